"""Tables of the static gate's integrity rules: what a candidate may import and reach.

Used by harness/static_rules.py. Every reason is written to be pasted into an LLM prompt: it says
what is forbidden and, where there is one, what to do instead. docs/SECURITY.md documents them.
"""
from __future__ import annotations

# ---- imports ------------------------------------------------------------------------------------

ALLOWED_MODULES = frozenset({
    "torch", "triton", "numpy", "math", "cmath", "ctypes", "functools", "itertools", "typing",
    "typing_extensions", "dataclasses", "collections", "enum", "operator", "abc", "numbers",
    "__future__", "kernelevolve",
})
ALLOWED_HINT = ("candidates may import torch, triton, numpy, math, cmath, ctypes (types only), "
                "functools, itertools, typing, dataclasses, collections, enum, operator, abc, "
                "numbers and kernelevolve.runtime (load_cpp, ptr)")

# kernelevolve: only these dotted paths (and their prefixes) may be reached.
KERNELEVOLVE_ALLOWED = frozenset({"kernelevolve.runtime.load_cpp", "kernelevolve.runtime.ptr"})
KERNELEVOLVE_REASON = ("only `load_cpp` and `ptr` from kernelevolve.runtime may be used; the rest "
                       "of kernelevolve is the harness")

_PROCESS = "process creation, environment and file-system access are not allowed"
_THREADS = "thread creation is not allowed: hidden work escapes timing"
_INTERNALS = "sys.modules and gc access can patch the harness"
_NETWORK = "network access is not allowed"
_FILES = "file-system access is not allowed; embed constants in the source"
_DYNAMIC = "dynamic imports are not allowed; import an allowed module with a plain import"
_PICKLE = "deserialising objects can run arbitrary code"
_INTROSPECT = "introspection reaches frames and globals of the harness"

MODULE_REASONS = {
    "os": _PROCESS, "posix": _PROCESS, "nt": _PROCESS, "subprocess": _PROCESS, "pty": _PROCESS,
    "multiprocessing": "process creation is not allowed: hidden work escapes timing",
    "threading": _THREADS, "_thread": _THREADS, "concurrent": _THREADS, "asyncio": _THREADS,
    "sched": _THREADS,
    "sys": _INTERNALS, "gc": _INTERNALS, "sysconfig": _INTERNALS, "resource": _INTERNALS,
    "faulthandler": _INTERNALS, "weakref": _INTERNALS,
    "signal": "signal handlers can interrupt or fake the harness's timing and exit",
    "time": "timing functions are the harness's; candidates must not read or patch them",
    "timeit": "timing functions are the harness's; candidates must not read or patch them",
    "datetime": "timing functions are the harness's; candidates must not read or patch them",
    "socket": _NETWORK, "ssl": _NETWORK, "urllib": _NETWORK, "urllib3": _NETWORK,
    "http": _NETWORK, "requests": _NETWORK, "httpx": _NETWORK, "aiohttp": _NETWORK,
    "ftplib": _NETWORK, "smtplib": _NETWORK, "xmlrpc": _NETWORK, "socketserver": _NETWORK,
    "pathlib": _FILES, "shutil": _FILES, "tempfile": _FILES, "glob": _FILES, "io": _FILES,
    "fileinput": _FILES, "mmap": _FILES, "fcntl": _FILES, "zipfile": _FILES, "tarfile": _FILES,
    "importlib": _DYNAMIC, "imp": _DYNAMIC, "pkgutil": _DYNAMIC, "runpy": _DYNAMIC,
    "zipimport": _DYNAMIC, "code": _DYNAMIC, "codeop": _DYNAMIC,
    "builtins": "builtins access can replace open, exec and __import__",
    "inspect": _INTROSPECT, "traceback": _INTROSPECT, "types": _INTROSPECT, "dis": _INTROSPECT,
    "pdb": _INTROSPECT, "bdb": _INTROSPECT, "trace": _INTROSPECT, "ast": _INTROSPECT,
    "pickle": _PICKLE, "cPickle": _PICKLE, "marshal": _PICKLE, "shelve": _PICKLE,
    "dill": _PICKLE, "cloudpickle": _PICKLE, "copyreg": _PICKLE, "joblib": _PICKLE,
    "atexit": "exit hooks run after the harness's checks",
}

# Modules that other modules re-export as attributes (torch.os, np.sys): reaching one that way is
# the same as importing it.
INDIRECT_MODULES = frozenset({
    "os", "sys", "subprocess", "builtins", "importlib", "gc", "threading", "_thread", "socket",
    "shutil", "pickle", "inspect", "ctypes", "multiprocessing",
})

# ---- builtins -----------------------------------------------------------------------------------

_EXEC = "runs code the static gate cannot check; write the code directly"
_NAMESPACE = "namespace dictionaries can rebind anything; refer to names directly"
_INTERACTIVE = "the worker has no terminal; interactive calls hang until the time limit"
_EXIT = "ends the worker without a result; return the output from forward"
FORBIDDEN_BUILTINS = {
    "eval": _EXEC, "exec": _EXEC, "compile": _EXEC,
    "__import__": _DYNAMIC,
    "globals": _NAMESPACE, "locals": _NAMESPACE, "vars": _NAMESPACE,
    "open": "file access is not allowed; embed constants in the source",
    "input": _INTERACTIVE, "breakpoint": _INTERACTIVE,
    "exit": _EXIT, "quit": _EXIT,
    "SystemExit": _EXIT, "KeyboardInterrupt": "raising it " + _EXIT,
}
ATTR_BUILTINS = frozenset({"getattr", "setattr", "delattr", "hasattr"})

# ---- attribute names forbidden on any object ----------------------------------------------------

_DUNDER = "reaches interpreter internals (globals, builtins, classes, code, frames)"
_FRAME = "frame objects expose the harness's locals and globals"
_MEMORY = "arbitrary memory access is not allowed; pass tensors with ptr(t)"
_WRITE = "writing files is not allowed"
ANY_ATTRIBUTE = {
    **{name: _DUNDER for name in (
        "__globals__", "__builtins__", "__subclasses__", "__dict__", "__code__", "__closure__",
        "__class__", "__bases__", "__mro__", "__getattribute__", "__loader__", "__spec__",
        "__import__", "__self__", "__traceback__", "func_globals", "func_code")},
    **{name: _FRAME for name in (
        "f_back", "f_globals", "f_locals", "f_builtins", "f_code", "gi_frame", "tb_frame",
        "cr_frame", "ag_frame", "tb_next")},
    "__setattr__": "object.__setattr__ bypasses the monkeypatching rules; assign attributes of "
                   "your own objects directly",
    "__delattr__": "object.__delattr__ bypasses the monkeypatching rules",
    "_exit": "os._exit " + _EXIT,
    "environ": "environment access is not allowed", "getenv": "environment access is not allowed",
    "putenv": "environment access is not allowed", "unsetenv": "environment access is not allowed",
    "_getframe": _FRAME,
    "from_address": _MEMORY, "from_buffer": _MEMORY, "from_buffer_copy": _MEMORY,
    "tofile": _WRITE, "write_text": _WRITE, "write_bytes": _WRITE,
    "_FuncPtr": "replacing a library's function type bypasses load_cpp's launch accounting",
    "_handle": "raw library handles are not allowed; call functions of the load_cpp library",
}
# Attribute access that is fine on these bases (super().__setattr__ in a module's own __setattr__).
SELF_ONLY_ATTRIBUTES = frozenset({"__setattr__", "__delattr__"})

# Members of forbidden modules reached through any chain (os, sys, signal imported indirectly).
MODULE_MEMBER_REASONS = {
    ("sys", "exit"): "sys.exit " + _EXIT,
    ("sys", "modules"): _INTERNALS,
    ("sys", "settrace"): _INTROSPECT, ("sys", "setprofile"): _INTROSPECT,
}
MEMBER_OF_ANY = {"os": _PROCESS, "signal": MODULE_REASONS["signal"], "subprocess": _PROCESS}

# ---- torch --------------------------------------------------------------------------------------

STREAM_REASON = ("CUDA streams hide work from the timer; use the current stream "
                 "(torch.cuda.current_stream())")
STREAM_NAMES = frozenset({"Stream", "ExternalStream", "stream", "set_stream", "streams"})
_GLOBAL_STATE = "changes process-wide torch state that the harness relies on"
_SEED = "the harness owns the random state; do not seed it or read it"
TORCH_PREFIXES = {  # path relative to torch -> reason
    ("multiprocessing",): "process creation is not allowed: hidden work escapes timing",
    ("distributed",): "distributed communication is not allowed",
    ("library",): "torch.library can register or replace operators; call your kernels directly",
    ("ops", "load_library"): "loading operator libraries is not allowed; use load_cpp or "
                             "torch.utils.cpp_extension.load_inline",
    ("utils", "cpp_extension", "load"): "cpp_extension.load builds from files; use load_inline or "
                                        "kernelevolve.runtime.load_cpp with a source string",
    ("save",): "torch.save writes files", ("load",): "torch.load reads files and can run "
                                                      "pickled code",
    ("hub",): "torch.hub downloads code over the network",
    ("testing",): "torch.testing is the harness's comparison code; candidates must not use it",
    ("use_deterministic_algorithms",): _GLOBAL_STATE,
    ("are_deterministic_algorithms_enabled",): _GLOBAL_STATE,
}
TORCH_ANYWHERE = {  # component anywhere below torch -> reason
    "manual_seed": _SEED, "manual_seed_all": _SEED, "seed": _SEED, "seed_all": _SEED,
    "initial_seed": _SEED, "get_rng_state": _SEED, "set_rng_state": _SEED,
    "get_rng_state_all": _SEED, "set_rng_state_all": _SEED,
}
TORCH_PREFIX_NAMES = {  # component name prefix anywhere below torch -> reason
    "set_": _GLOBAL_STATE,
    "register_module_": "global module hooks change every module's behaviour",
}
BACKENDS_REASON = ("changing torch.backends settings changes numerics and speed for the harness "
                   "too; leave them as they are")

# ---- numpy, ctypes, typing, operator ------------------------------------------------------------

_NP_FILES = "numpy file I/O is not allowed; embed constants in the source"
NUMPY_PREFIXES = {
    **{(name,): _NP_FILES for name in (
        "save", "savez", "savez_compressed", "savetxt", "load", "loadtxt", "genfromtxt",
        "fromfile", "fromregex", "memmap", "DataSource")},
    ("ctypeslib",): _MEMORY,
    ("lib", "format"): _NP_FILES, ("lib", "npyio"): _NP_FILES,
}

CTYPES_ALLOWED = frozenset({
    "c_void_p", "c_bool", "c_char", "c_char_p", "c_byte", "c_ubyte", "c_short", "c_ushort",
    "c_int", "c_uint", "c_long", "c_ulong", "c_longlong", "c_ulonglong", "c_int8", "c_uint8",
    "c_int16", "c_uint16", "c_int32", "c_uint32", "c_int64", "c_uint64", "c_size_t", "c_ssize_t",
    "c_float", "c_double", "c_longdouble", "POINTER", "pointer", "byref", "sizeof", "Structure",
    "Union", "Array",
})
CTYPES_REASON = "ctypes may only describe argument types; load libraries with load_cpp"

EVAL_STRINGS = "evaluates strings as code"
MODULE_MEMBERS = {  # (top module, member) -> reason
    ("typing", "get_type_hints"): EVAL_STRINGS, ("typing", "ForwardRef"): EVAL_STRINGS,
    ("typing_extensions", "get_type_hints"): EVAL_STRINGS,
    ("typing_extensions", "get_annotations"): EVAL_STRINGS,
    ("typing_extensions", "ForwardRef"): EVAL_STRINGS,
    ("operator", "attrgetter"): "string-named attribute access hides what is reached; use plain "
                                "attribute access",
    ("operator", "methodcaller"): "string-named method calls hide what is called; call the "
                                  "method directly",
}
