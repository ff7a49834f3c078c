// The trusted kernel launcher: a CPython extension (harness code, built by kernelevolve from this
// file, never from candidate text) that calls a load_cpp kernel with tensors and ints without
// ctypes' per-call Python work (argument conversion objects, the counting wrapper's Python frame).
//
// Why no libtorch: compiling against torch's headers takes ~25 s (load_inline); this file needs
// only Python.h and builds in about a second. Tensors are read through torch's own Python-level
// descriptors, taken once from torch._C.TensorBase (not from the instance, so a patched
// torch.Tensor attribute is never what runs): the `dtype` and `is_cpu` getters and the
// `is_contiguous` and `data_ptr` methods, each a C call into torch with no Python frame.
//
// Why a plain call through a cast is sound: every argument of a synthesized kernel is a pointer or
// an int64_t, and on the ABIs g++ targets here (x86-64 System V, AArch64) both are passed the same
// way (the next integer register, then an 8-byte stack slot). The launcher refuses any other
// signature (launch.py only builds it from tensors, ints and the index flag).
//
// Launch accounting lives here as two statics that runtime/launches.py folds in when it is read
// (`take`) and sets when launches are suppressed (`suppress`).
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace {

constexpr int kMaxArgs = 32;

struct TorchRefs {  // taken once by init(); strong references held for the process
    PyTypeObject* tensor = nullptr;
    PyObject* data_ptr = nullptr;       // TensorBase.data_ptr (method descriptor)
    PyObject* is_contiguous = nullptr;  // TensorBase.is_contiguous (method descriptor)
    PyObject* dtype = nullptr;          // TensorBase.dtype (getset descriptor)
    PyObject* is_cpu = nullptr;         // TensorBase.is_cpu (getset descriptor)
    PyObject* numel = nullptr;          // TensorBase.numel (method descriptor)
    PyObject* contiguous = nullptr;     // TensorBase.contiguous (method descriptor)
    PyObject* empty_like = nullptr;     // torch._C._VariableFunctions.empty_like
    PyObject* dtype_kw = nullptr;       // ("dtype",): empty_like's keyword
};
TorchRefs torch_refs;
long long launches = 0;
int suppressed = 0;

using Caller = void (*)(void*, const int64_t*);

template <std::size_t I>
using Int64 = int64_t;

template <std::size_t... I>
void call_with(void* fn, const int64_t* a, std::index_sequence<I...>) {
    reinterpret_cast<void (*)(Int64<I>...)>(fn)(a[I]...);
}

template <std::size_t N>
void call_n(void* fn, const int64_t* a) {
    call_with(fn, a, std::make_index_sequence<N>{});
}

template <std::size_t... N>
constexpr std::array<Caller, sizeof...(N)> callers(std::index_sequence<N...>) {
    return {&call_n<N>...};
}

constexpr auto kCallers = callers(std::make_index_sequence<kMaxArgs + 1>{});

struct Launcher {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    void* fn;
    PyObject* owner;   // the library: kept loaded while this launcher lives
    PyObject* name;    // str: the kernel's name, for messages
    PyObject* dtypes;  // tuple of torch.dtype, one per tensor argument
    int ntensors;
    int nints;
    int flag;  // 1: the kernel takes a trailing int32_t* set when an index is out of range
    // Elementwise mode (nouts > 0): the call passes the inputs only; the launcher makes each
    // contiguous, allocates the outputs like input `domain` (empty_like, with the output's
    // dtype), passes the domain's numel as the one int, and returns the output(s).
    int nouts;
    int domain;
    PyObject* out_dtypes;  // tuple of torch.dtype
};

// One tensor argument's type, dtype and device as the signature says. Returns 0 with a Python
// exception set when it is not what the kernel takes.
int check_tensor(Launcher* self, int i, PyObject* obj) {
    const TorchRefs& t = torch_refs;
    if (!PyObject_TypeCheck(obj, t.tensor)) {
        PyErr_Format(PyExc_TypeError, "kernel %U: argument %d must be a torch.Tensor, not %s",
                     self->name, i + 1, Py_TYPE(obj)->tp_name);
        return 0;
    }
    PyObject* want = PyTuple_GET_ITEM(self->dtypes, i);
    PyObject* dtype = Py_TYPE(t.dtype)->tp_descr_get(t.dtype, obj, (PyObject*)Py_TYPE(obj));
    if (dtype == nullptr) return 0;
    Py_DECREF(dtype);  // dtypes are singletons torch keeps; identity is enough
    if (dtype != want) {
        PyErr_Format(PyExc_TypeError, "kernel %U: argument %d must be a %S tensor, got %S",
                     self->name, i + 1, want, dtype);
        return 0;
    }
    PyObject* cpu = Py_TYPE(t.is_cpu)->tp_descr_get(t.is_cpu, obj, (PyObject*)Py_TYPE(obj));
    if (cpu == nullptr) return 0;
    Py_DECREF(cpu);
    if (cpu != Py_True) {
        PyObject* dev = PyObject_GetAttrString(obj, "device");
        PyObject* text = dev ? PyObject_Str(dev) : nullptr;
        Py_XDECREF(dev);
        if (text == nullptr) return 0;
        PyErr_Format(PyExc_ValueError, "kernel %U: argument %d must be a CPU tensor, got one on "
                     "%U", self->name, i + 1, text);
        Py_DECREF(text);
        return 0;
    }
    return 1;
}

// -1 on error, else whether obj is contiguous.
int is_contiguous(PyObject* obj) {
    PyObject* r = PyObject_Vectorcall(torch_refs.is_contiguous, &obj, 1, nullptr);
    if (r == nullptr) return -1;
    Py_DECREF(r);
    return r == Py_True;
}

int data_ptr(PyObject* obj, int64_t* out) {
    PyObject* ptr = PyObject_Vectorcall(torch_refs.data_ptr, &obj, 1, nullptr);
    if (ptr == nullptr) return 0;
    *out = static_cast<int64_t>(reinterpret_cast<intptr_t>(PyLong_AsVoidPtr(ptr)));
    Py_DECREF(ptr);
    return PyErr_Occurred() ? 0 : 1;
}

// A tensor the caller passed: checked, contiguous (or refused), its data pointer into *out.
int tensor_arg(Launcher* self, int i, PyObject* obj, int64_t* out) {
    if (!check_tensor(self, i, obj)) return 0;
    const int c = is_contiguous(obj);
    if (c <= 0) {
        if (c == 0)
            PyErr_Format(PyExc_ValueError, "kernel %U: argument %d is not contiguous; pass "
                         "t.contiguous()", self->name, i + 1);
        return 0;
    }
    return data_ptr(obj, out);
}

int int_arg(Launcher* self, int i, PyObject* obj, int64_t* out) {
    if (!PyLong_Check(obj)) {  // bool is an int subclass, as torch's own int arguments take it
        PyErr_Format(PyExc_TypeError, "kernel %U: argument %d must be an int, not %s",
                     self->name, i + 1, Py_TYPE(obj)->tp_name);
        return 0;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (overflow) {
        PyErr_Format(PyExc_OverflowError, "kernel %U: argument %d does not fit in int64",
                     self->name, i + 1);
        return 0;
    }
    if (v == -1 && PyErr_Occurred()) return 0;
    *out = static_cast<int64_t>(v);
    return 1;
}

PyObject* launch(PyObject* self_, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
    auto* self = reinterpret_cast<Launcher*>(self_);
    const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_Format(PyExc_TypeError, "kernel %U takes positional arguments only", self->name);
        return nullptr;
    }
    if (n != self->ntensors + self->nints) {
        PyErr_Format(PyExc_TypeError, "kernel %U takes %d tensor(s) then %d int(s) (%d "
                     "arguments), got %zd", self->name, self->ntensors, self->nints,
                     self->ntensors + self->nints, n);
        return nullptr;
    }
    int64_t a[kMaxArgs + 1];
    for (int i = 0; i < self->ntensors; ++i) {
        if (!tensor_arg(self, i, args[i], &a[i])) return nullptr;
    }
    for (int j = 0; j < self->nints; ++j) {
        const int i = self->ntensors + j;
        if (!int_arg(self, i, args[i], &a[i])) return nullptr;
    }
    int32_t bad = 0;
    if (self->flag) a[n] = static_cast<int64_t>(reinterpret_cast<intptr_t>(&bad));
    ++launches;
    if (!suppressed) kCallers[n + self->flag](self->fn, a);
    if (bad) {
        PyErr_SetString(PyExc_IndexError, "index out of range in self");
        return nullptr;
    }
    Py_RETURN_NONE;
}

// Elementwise mode's inputs made contiguous and its outputs allocated, each held in `held` (new
// references, released by the caller), their pointers and the domain's numel in `a`.
int prepare_like(Launcher* self, PyObject* const* args, PyObject** held, int* nheld, int64_t* a) {
    const TorchRefs& t = torch_refs;
    for (int i = 0; i < self->ntensors; ++i) {
        if (!check_tensor(self, i, args[i])) return 0;
        const int c = is_contiguous(args[i]);
        if (c < 0) return 0;
        PyObject* x = args[i];
        if (c) Py_INCREF(x);
        else x = PyObject_Vectorcall(t.contiguous, &args[i], 1, nullptr);
        if (x == nullptr) return 0;
        held[(*nheld)++] = x;
        if (!data_ptr(x, &a[i])) return 0;
    }
    PyObject* dom = held[self->domain];
    PyObject* numel = PyObject_Vectorcall(t.numel, &dom, 1, nullptr);
    if (numel == nullptr) return 0;
    a[self->ntensors + self->nouts] = PyLong_AsLongLong(numel);
    Py_DECREF(numel);
    if (PyErr_Occurred()) return 0;
    for (int o = 0; o < self->nouts; ++o) {
        PyObject* dtype = PyTuple_GET_ITEM(self->out_dtypes, o);
        PyObject* call[2] = {dom, dtype};
        // the domain's own dtype: no keyword (a keyword call builds a tuple and a dict)
        const bool same = dtype == PyTuple_GET_ITEM(self->dtypes, self->domain);
        PyObject* y = PyObject_Vectorcall(t.empty_like, call, 1, same ? nullptr : t.dtype_kw);
        if (y == nullptr) return 0;
        held[(*nheld)++] = y;
        if (!data_ptr(y, &a[self->ntensors + o])) return 0;
    }
    return 1;
}

PyObject* launch_like(PyObject* self_, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
    auto* self = reinterpret_cast<Launcher*>(self_);
    const Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    if (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) > 0) {
        PyErr_Format(PyExc_TypeError, "kernel %U takes positional arguments only", self->name);
        return nullptr;
    }
    if (n != self->ntensors) {
        PyErr_Format(PyExc_TypeError, "kernel %U takes %d input tensor(s), got %zd",
                     self->name, self->ntensors, n);
        return nullptr;
    }
    PyObject* held[kMaxArgs];
    int nheld = 0;
    int64_t a[kMaxArgs + 1];
    PyObject* result = nullptr;
    if (prepare_like(self, args, held, &nheld, a)) {
        const int total = self->ntensors + self->nouts + 1;
        if (a[total - 1] > 0) {  // as the glue's `if numel:`: nothing to launch when empty
            ++launches;
            if (!suppressed) kCallers[total](self->fn, a);
        }
        PyObject* const* outs = held + self->ntensors;
        if (self->nouts == 1) {
            result = outs[0];
            Py_INCREF(result);
        } else if ((result = PyTuple_New(self->nouts)) != nullptr) {
            for (int o = 0; o < self->nouts; ++o) {
                Py_INCREF(outs[o]);
                PyTuple_SET_ITEM(result, o, outs[o]);
            }
        }
    }
    for (int k = 0; k < nheld; ++k) Py_DECREF(held[k]);
    return result;
}

void launcher_dealloc(PyObject* self_) {
    auto* self = reinterpret_cast<Launcher*>(self_);
    Py_XDECREF(self->owner);
    Py_XDECREF(self->name);
    Py_XDECREF(self->dtypes);
    Py_XDECREF(self->out_dtypes);
    PyObject_Free(self_);
}

PyObject* launcher_repr(PyObject* self_) {
    auto* self = reinterpret_cast<Launcher*>(self_);
    if (self->nouts > 0)
        return PyUnicode_FromFormat("<kernel launcher %U: elementwise, inputs %S, outputs %S "
                                    "like input %d>", self->name, self->dtypes, self->out_dtypes,
                                    self->domain);
    return PyUnicode_FromFormat("<kernel launcher %U: tensors %S, %d int(s)%s>", self->name,
                                self->dtypes, self->nints, self->flag ? ", index flag" : "");
}

PyTypeObject LauncherType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyObject* make(PyObject*, PyObject* args) {
    unsigned long long addr = 0;
    PyObject *owner, *name, *dtypes, *out_dtypes;
    int nints, flag, domain;
    if (!PyArg_ParseTuple(args, "KOUO!ipO!i", &addr, &owner, &name, &PyTuple_Type, &dtypes,
                          &nints, &flag, &PyTuple_Type, &out_dtypes, &domain))
        return nullptr;
    const Py_ssize_t ntensors = PyTuple_GET_SIZE(dtypes), nouts = PyTuple_GET_SIZE(out_dtypes);
    const bool like = nouts > 0;
    if (torch_refs.tensor == nullptr || addr == 0 || nints < 0 ||
        ntensors + nouts + nints + flag + like > kMaxArgs ||
        (like && (nints != 0 || flag || domain < 0 || domain >= ntensors))) {
        PyErr_SetString(PyExc_ValueError, "launcher: not initialised, a null kernel or a "
                        "signature it cannot call");
        return nullptr;
    }
    auto* self = PyObject_New(Launcher, &LauncherType);
    if (self == nullptr) return nullptr;
    self->vectorcall = like ? launch_like : launch;
    self->fn = reinterpret_cast<void*>(static_cast<uintptr_t>(addr));
    for (PyObject* o : {owner, name, dtypes, out_dtypes}) Py_INCREF(o);
    self->owner = owner;
    self->name = name;
    self->dtypes = dtypes;
    self->out_dtypes = out_dtypes;
    self->ntensors = static_cast<int>(ntensors);
    self->nouts = static_cast<int>(nouts);
    self->nints = nints;
    self->flag = flag;
    self->domain = domain;
    return reinterpret_cast<PyObject*>(self);
}

PyObject* init(PyObject*, PyObject* args) {
    PyObject *tensor, *data_ptr, *is_contiguous, *dtype, *is_cpu, *numel, *contiguous, *empty_like;
    if (!PyArg_ParseTuple(args, "O!OOOOOOO", &PyType_Type, &tensor, &data_ptr, &is_contiguous,
                          &dtype, &is_cpu, &numel, &contiguous, &empty_like))
        return nullptr;
    if (Py_TYPE(dtype)->tp_descr_get == nullptr || Py_TYPE(is_cpu)->tp_descr_get == nullptr) {
        PyErr_SetString(PyExc_TypeError, "launcher: init takes torch's own descriptors");
        return nullptr;
    }
    for (PyObject* f : {data_ptr, is_contiguous, numel, contiguous, empty_like}) {
        if (!PyCallable_Check(f)) {
            PyErr_SetString(PyExc_TypeError, "launcher: init takes torch's own methods");
            return nullptr;
        }
    }
    PyObject* kw = Py_BuildValue("(s)", "dtype");
    if (kw == nullptr) return nullptr;
    for (PyObject* o : {tensor, data_ptr, is_contiguous, dtype, is_cpu, numel, contiguous,
                        empty_like}) Py_INCREF(o);
    torch_refs = {reinterpret_cast<PyTypeObject*>(tensor), data_ptr, is_contiguous, dtype,
                  is_cpu, numel, contiguous, empty_like, kw};
    Py_RETURN_NONE;
}

PyObject* take(PyObject*, PyObject*) {
    const long long n = launches;
    launches = 0;
    return PyLong_FromLongLong(n);
}

PyObject* suppress(PyObject*, PyObject* arg) {
    const int on = PyObject_IsTrue(arg);
    if (on < 0) return nullptr;
    suppressed = on;
    Py_RETURN_NONE;
}

PyMethodDef kMethods[] = {
    {"init", init, METH_VARARGS, "init(Tensor, data_ptr, is_contiguous, dtype, is_cpu, numel, "
                                 "contiguous, empty_like)"},
    {"make", make, METH_VARARGS, "make(address, owner, name, dtypes, nints, flag, out_dtypes, "
                                 "domain)"},
    {"take", take, METH_NOARGS, "launches since the last take(), and zero them"},
    {"suppress", suppress, METH_O, "suppress(on): count launches without running kernels"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_ke_launch", nullptr, -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__ke_launch() {
    LauncherType.tp_name = "kernelevolve.KernelLauncher";
    LauncherType.tp_basicsize = sizeof(Launcher);
    LauncherType.tp_dealloc = launcher_dealloc;
    LauncherType.tp_repr = launcher_repr;
    LauncherType.tp_call = PyVectorcall_Call;
    LauncherType.tp_vectorcall_offset = offsetof(Launcher, vectorcall);
    LauncherType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL |
                            Py_TPFLAGS_DISALLOW_INSTANTIATION;
    LauncherType.tp_new = nullptr;  // made only by make(), which launch.py alone can reach
    if (PyType_Ready(&LauncherType) < 0) return nullptr;
    return PyModule_Create(&kModule);
}
