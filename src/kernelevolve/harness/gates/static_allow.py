"""Tables of the static gate: what a candidate may import, and which names and paths it may reach.

Used by harness/gates/static_rules.py (the AST walk) and documented in docs/SECURITY.md. Every reason is
written to be pasted into an LLM prompt: it says why, and where there is one, what to do instead.
`path_reason` applies the per-module rules to a resolved dotted path such as `torch.cuda.Stream`;
the allow-lists of modules that can run strings, programs or read files (torch.utils, functools,
typing, dataclasses, triton, ...) and the rule against standard-library modules reached through
allowed ones are in harness/gates/static_members.py.
"""
from __future__ import annotations

from kernelevolve.harness.gates.static_members import allowlist_rule, reached_module

# ---- imports ------------------------------------------------------------------------------------

# Common to every language; each registered Language adds its own (`imports`, e.g. its DSL).
COMMON_MODULES = frozenset({
    "torch", "numpy", "math", "cmath", "ctypes", "functools", "itertools", "typing",
    "typing_extensions", "dataclasses", "collections", "enum", "operator", "abc", "numbers",
    "__future__", "kernelevolve",
})
_HINT = ("it is not on the allow-list: candidates may import torch, {langs}numpy, math, "
         "cmath, ctypes (types only), functools, itertools, typing, dataclasses, "
         "collections, enum, operator, abc, numbers and kernelevolve.runtime "
         "(load_cpp, ptr, kernel_launcher, elementwise_launcher)")


def language_modules() -> frozenset[str]:
    """What the registered languages add to the allow-list (their DSLs' top-level modules)."""
    from kernelevolve.plugins import languages

    return frozenset(m for lang in languages() for m in lang.imports)


def allowed_modules() -> frozenset[str]:
    return COMMON_MODULES | language_modules()


def allowed_hint() -> str:
    return _HINT.format(langs="".join(f"{m}, " for m in sorted(language_modules())))

KERNELEVOLVE_ALLOWED = ("kernelevolve.runtime.load_cpp", "kernelevolve.runtime.ptr",
                        "kernelevolve.runtime.kernel_launcher",
                        "kernelevolve.runtime.elementwise_launcher")
KERNELEVOLVE_REASON = ("only load_cpp, ptr, kernel_launcher and elementwise_launcher from "
                       "kernelevolve.runtime may be used; the rest of kernelevolve is the harness")

_PROCESS = "process creation, environment and file-system access escape the sandbox"
_THREADS = "threads run hidden work that escapes timing"
_INTERNALS = "sys.modules and gc access can patch the harness"
_TIME = "timing functions are the harness's; candidates must not read or patch them"
_NETWORK = "candidates have no network access"
_FILES = "candidates may not touch the file system; embed constants in the source"
_DYNAMIC = "dynamic imports bypass the import allow-list; import an allowed module directly"
_PICKLE = "deserialising objects can run arbitrary code"
_INTROSPECT = "introspection reaches the harness's frames and globals"
_SIGNAL = "signal handlers can interrupt or fake the harness's timing and exit"

MODULE_REASONS = {
    **dict.fromkeys(("os", "posix", "nt", "subprocess", "pty"), _PROCESS),
    "multiprocessing": "processes run hidden work that escapes timing",
    **dict.fromkeys(("threading", "_thread", "concurrent", "asyncio", "sched"), _THREADS),
    **dict.fromkeys(("sys", "gc", "sysconfig", "resource", "faulthandler", "weakref"), _INTERNALS),
    "signal": _SIGNAL,
    **dict.fromkeys(("time", "timeit", "datetime"), _TIME),
    **dict.fromkeys(("socket", "ssl", "urllib", "urllib3", "http", "requests", "httpx", "aiohttp",
                     "ftplib", "smtplib", "xmlrpc", "socketserver"), _NETWORK),
    **dict.fromkeys(("pathlib", "shutil", "tempfile", "glob", "io", "fileinput", "mmap", "fcntl",
                     "zipfile", "tarfile"), _FILES),
    **dict.fromkeys(("importlib", "imp", "pkgutil", "runpy", "zipimport", "code", "codeop"),
                    _DYNAMIC),
    "builtins": "builtins access can replace open, exec and __import__",
    **dict.fromkeys(("inspect", "traceback", "types", "dis", "pdb", "bdb", "trace", "ast"),
                    _INTROSPECT),
    **dict.fromkeys(("pickle", "cPickle", "marshal", "shelve", "dill", "cloudpickle", "copyreg",
                     "joblib"), _PICKLE),
    "atexit": "exit hooks run after the harness's checks",
}

# Modules that allowed modules re-export as attributes (torch.os): reaching one is importing it.
INDIRECT_MODULES = {
    **{name: MODULE_REASONS[name] for name in (
        "os", "sys", "subprocess", "builtins", "importlib", "gc", "threading", "_thread", "socket",
        "shutil", "pickle", "inspect")},
    "ctypes": "ctypes may only be imported directly, and only for argument types",
}

# ---- builtins -----------------------------------------------------------------------------------

_EXEC = "it runs code the static gate cannot check; write the code directly"
_NAMESPACE = "namespace dictionaries can rebind anything; refer to names directly"
_INTERACTIVE = "the worker has no terminal; interactive calls hang until the time limit"
_SITE_HELPER = ("site's interactive helpers read text from files they are pointed at and run a "
                "pager; a candidate has nothing to show")
_EXIT = "it ends the worker without a result; return the output from forward"
FORBIDDEN_BUILTINS = {
    "eval": _EXEC, "exec": _EXEC, "compile": _EXEC, "__import__": _DYNAMIC,
    "globals": _NAMESPACE, "locals": _NAMESPACE, "vars": _NAMESPACE,
    "open": _FILES, "input": _INTERACTIVE, "breakpoint": _INTERACTIVE,
    **dict.fromkeys(("license", "credits", "copyright", "help"), _SITE_HELPER),
    "exit": _EXIT, "quit": _EXIT, "SystemExit": _EXIT, "KeyboardInterrupt": _EXIT,
}
CALL_ONLY_BUILTINS = frozenset({"input"})  # often a parameter name; flagged only when called
ATTR_BUILTINS = frozenset({"getattr", "setattr", "delattr", "hasattr"})
_ANNOTATIONS = ("annotations are fed to code that evaluates them (typing's resolvers) or writes "
                "code from them (dataclasses); write annotations in the source")
FORBIDDEN_NAMES = {  # module-level dunder names, flagged whenever they appear
    **{name: "it reaches interpreter internals" for name in ("__builtins__", "__loader__",
                                                             "__spec__")},
    "__annotations__": _ANNOTATIONS,
}

# ---- attribute names forbidden on any object: name -> full sentence ----------------------------

_DUNDER = "`{}` is not allowed: it reaches interpreter internals (globals, builtins, classes, code)"
_FRAME = "`{}` is not allowed: frame objects expose the harness's locals and globals"
_MEMORY = "`{}` is not allowed: it reads arbitrary memory; pass tensors to kernels with ptr(t)"
_WRITE = "`{}` is not allowed: candidates may not write files"
_ENV = "`{}` is not allowed: the environment is the harness's; take settings as arguments"
ANY_ATTRIBUTE = {
    **dict.fromkeys(("__globals__", "__builtins__", "__subclasses__", "__dict__", "__code__",
                     "__closure__", "__class__", "__base__", "__bases__", "__mro__",
                     "__getattribute__",
                     "__loader__", "__spec__", "__import__", "__self__", "__traceback__",
                     "func_globals", "func_code"), _DUNDER),
    **dict.fromkeys(("f_back", "f_globals", "f_locals", "f_builtins", "f_code", "gi_frame",
                     "tb_frame", "cr_frame", "ag_frame", "tb_next", "_getframe"), _FRAME),
    **dict.fromkeys(("__setattr__", "__delattr__"),
                    "`{}` is not allowed outside self/super(): it bypasses the monkeypatching "
                    "rules; assign attributes of your own objects directly"),
    "__getattr__": "`{}` is not allowed outside self/super(): it looks names up from strings, "
                   "which hides what is reached; use plain attribute access",
    "_exit": "os._exit ends the worker without a result; return the output from forward",
    **dict.fromkeys(("environ", "getenv", "putenv", "unsetenv"), _ENV),
    **dict.fromkeys(("from_address", "from_buffer", "from_buffer_copy"), _MEMORY),
    **dict.fromkeys(("tofile", "write_text", "write_bytes"), _WRITE),
    "from_file": "`{}` is not allowed: candidates may not read files; embed constants in the "
                 "source",
    "_FuncPtr": "`{}` is not allowed: replacing a library's function type bypasses load_cpp's "
                "launch accounting",
    "_handle": "`{}` is not allowed: call functions of the load_cpp library, not its raw handle",
    **dict.fromkeys(("__annotations__", "__annotate__"), "`{}` is not allowed: " + _ANNOTATIONS),
}
# Backstops on chains the gate cannot resolve to an import (a module passed as an argument, an
# object a call returned), where the allow-lists cannot follow: names with no use in a kernel
# that run strings or commands, or read files. Import-rooted chains get the allow-lists' reasons.
UNROOTED_ATTRIBUTE = {
    **dict.fromkeys(("singledispatch", "singledispatchmethod", "get_type_hints", "ForwardRef",
                     "make_dataclass"),
                    "`{}` is not allowed: it evaluates strings as code (annotations, field "
                    "names); dispatch with isinstance and write classes in the source"),
    **dict.fromkeys(("collect_env", "get_pretty_env_info", "timeit", "blocked_autorange",
                     "adaptive_autorange", "CompilationUnit", "symbolic_trace"),
                    "`{}` is not allowed: it runs code or commands given as strings; write the "
                    "code directly (the harness times forward)"),
    **dict.fromkeys(("FrameSummary", "getline", "getlines", "_Printer__filenames", "fromfile",
                     "fromregex", "loadtxt", "genfromtxt", "fromtextfile", "openfile"),
                    "`{}` is not allowed: it reads files; embed constants in the source"),
}
# fine on self and super(): the candidate's own class
SELF_ONLY_ATTRIBUTES = frozenset({"__setattr__", "__delattr__", "__getattr__"})
# String literals and keyword names that spell one of these reach the same internals
# (`type("C", (), {"__annotations__": ...})`, `dict(__globals__=...)`).
DUNDER_STRINGS = frozenset(n for n in (*ANY_ATTRIBUTE, *FORBIDDEN_NAMES)
                            if n.startswith("__") and n.endswith("__"))

# Members of forbidden modules, on import-rooted paths (checked as consecutive pairs).
MEMBER_REASONS = {
    ("sys", "exit"): _EXIT, ("sys", "modules"): _INTERNALS,
    ("sys", "settrace"): _INTROSPECT, ("sys", "setprofile"): _INTROSPECT,
}
ANY_MEMBER_OF = {"os": _PROCESS, "signal": _SIGNAL, "subprocess": _PROCESS}

# ---- torch --------------------------------------------------------------------------------------

STREAM_REASON = ("CUDA streams hide work from the timer; use the current stream "
                 "(torch.cuda.current_stream())")
STREAM_NAMES = frozenset({"Stream", "ExternalStream", "stream", "set_stream", "streams"})
DEVICE_STREAM_REASON = ("device streams hide work from the timer; use the device's current "
                        "stream")
TORCH_ANY_MODULE = {  # submodule names refused wherever they sit below torch
    "fx": "torch.fx generates Python code from graphs and runs it; call the ops directly",
    "profiler": "profilers write trace files and run timers of their own; the harness "
                "profiles and times forward",
}
_GLOBAL_STATE = "it changes process-wide torch state that the harness relies on"
_SEED = "the harness owns the random state; do not seed it or read it"
BACKENDS_REASON = ("torch.backends settings change numerics and speed for the harness too; leave "
                   "them as they are")
TORCH_PREFIXES = {  # path below torch -> reason
    ("multiprocessing",): "processes run hidden work that escapes timing",
    ("distributed",): "it talks to other processes; a candidate is one process",
    ("library",): "torch.library can register or replace operators; call your kernels directly",
    ("overrides",): "torch function modes intercept every torch call, the harness's included",
    ("utils", "cpp_extension", "load"): "it builds from files; use load_inline or "
                                        "kernelevolve.runtime.load_cpp with a source string",
    ("save",): "it writes files", ("load",): "it reads files and can run pickled code",
    ("serialization",): "it reads and writes files and can run pickled code",
    ("jit", "save"): "it writes files", ("jit", "load"): "it reads files",
    ("package",): "it reads files and can run pickled code",
    ("utils", "model_zoo"): "it downloads over the network",
    ("jit", "fork"): "it runs work on another thread, hidden from the timer",
    ("cuda", "cudart"): "raw CUDA runtime calls bypass the stream rules",
    ("hub",): "torch.hub downloads code over the network",
    ("testing",): "torch.testing is the harness's comparison code",
    ("export",): "torch.export saves and loads programs from files; call your kernels directly",
    ("onnx",): "it writes model files; call your kernels directly",
    ("cuda", "tunable"): "it reads and writes tuning files and changes the harness's kernels",
    ("cuda", "gds"): "it reads and writes files",
    ("cuda", "jiterator"): "it compiles C++ from strings inside torch; use load_cpp or "
                           "load_inline",
    ("use_deterministic_algorithms",): _GLOBAL_STATE,
}
TORCH_ANY = {
    **dict.fromkeys(("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
                     "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all"),
                    _SEED),
    "load_library": "it loads operator libraries from files; use load_cpp or "
                    "torch.utils.cpp_extension.load_inline",
    **dict.fromkeys(("change_current_allocator", "CUDAPluggableAllocator"),
                    "it replaces the allocator the harness uses too"),
    **dict.fromkeys(("read_file", "write_file"),  # torch.ops.image.* when torchvision is loaded
                    "it reads or writes files; embed constants in the source"),
}
TORCH_NAME_PREFIXES = {"set_": _GLOBAL_STATE,
                       "register_module_": "global module hooks change every module's behaviour"}

# ---- numpy, ctypes, typing, operator ------------------------------------------------------------

_NP_FILES = "it reads or writes files; embed constants in the source"
NUMPY_PREFIXES = {
    **{(name,): _NP_FILES for name in ("save", "savez", "savez_compressed", "savetxt", "load",
                                       "loadtxt", "genfromtxt", "fromfile", "fromregex", "memmap",
                                       "DataSource")},
    ("ctypeslib",): "it reads arbitrary memory; pass tensors to kernels with ptr(t)",
    ("lib", "format"): _NP_FILES, ("lib", "npyio"): _NP_FILES,
    ("f2py",): "it runs compilers in subprocesses; use load_cpp",
    ("distutils",): "it runs compilers in subprocesses; use load_cpp",
    ("testing",): "numpy.testing builds and imports extensions and runs test suites; the harness "
                  "compares outputs",
    ("test",): "it runs numpy's test suite in subprocesses",
    ("core",): "numpy.core is numpy's internals (its records read files); use numpy's public "
               "functions",
    ("rec", "fromfile"): _NP_FILES, ("ma", "mrecords"): _NP_FILES,
}

TYPE_PATCH_REASON = ("patching attributes of type(...) changes a class the harness shares (such as "
                     "torch.Tensor); define your own class instead")

CTYPES_ALLOWED = frozenset({
    "c_void_p", "c_bool", "c_char", "c_char_p", "c_byte", "c_ubyte", "c_short", "c_ushort",
    "c_int", "c_uint", "c_long", "c_ulong", "c_longlong", "c_ulonglong", "c_int8", "c_uint8",
    "c_int16", "c_uint16", "c_int32", "c_uint32", "c_int64", "c_uint64", "c_size_t", "c_ssize_t",
    "c_float", "c_double", "c_longdouble", "POINTER", "pointer", "byref", "sizeof", "Structure",
    "Union", "Array",
})
CTYPES_REASON = "ctypes may only describe argument types; load libraries with load_cpp"

# operator holds pure functions but for these two string-named lookups; the modules that can
# evaluate strings, run programs or read files have allow-lists in static_members.py.
MODULE_MEMBERS = {  # (top module, first member) -> reason
    ("operator", "attrgetter"): "it hides which attribute is reached; use attribute access",
    ("operator", "methodcaller"): "it hides which method is called; call the method directly",
}


def path_reason(parts: list[str], allowed: frozenset[str] | None = None) -> str | None:
    """Why the import-rooted dotted path `parts` (torch, cuda, Stream) is forbidden, or None. The
    message names the shortest forbidden prefix (`torch._C`, not `torch._C._get_tracing_state`).
    `allowed` is allowed_modules(), passed in by a caller that checks many paths."""
    allowed = allowed_modules() if allowed is None else allowed
    if parts[0] not in allowed:
        return None  # the import itself is reported
    found = _path_rule(parts[0], parts[1:], allowed)
    if found is None:
        return None
    end, reason = found
    return f"{'.'.join(parts[:end + 1])} is not allowed: {reason}"


def _path_rule(top: str, rest: list[str], allowed: frozenset[str]) -> tuple[int, str] | None:
    """(index in [top, *rest] of the last component of the forbidden prefix, reason)."""
    reached = reached_module([top, *rest], allowed, _REACHED_REASONS, allowed_hint)
    found = _member_rule(top, rest)
    if reached and (found is None or reached[0] < found[0]):
        return reached  # the shorter refused prefix names the real problem
    return found


_REACHED_REASONS = {**MODULE_REASONS, **INDIRECT_MODULES}


def _member_rule(top: str, rest: list[str]) -> tuple[int, str] | None:
    if top == "kernelevolve":
        for i in range(1, len(rest) + 1):
            dotted = ".".join(["kernelevolve", *rest[:i]])
            if not any(p == dotted or p.startswith(dotted + ".") for p in KERNELEVOLVE_ALLOWED):
                return i, KERNELEVOLVE_REASON
        return None
    if top == "ctypes" and rest and rest[0] not in CTYPES_ALLOWED:
        return 1, CTYPES_REASON
    for i, name in enumerate(rest, 1):
        if name.startswith("_") and not _is_dunder(name):
            return i, f"private {top} internals are off limits"
    found = _stream_rule(top, rest)
    if found is not None:
        return found
    if top == "torch":
        found = _torch_rule(rest)
    elif top == "numpy":
        found = next(((len(p), r) for p, r in NUMPY_PREFIXES.items()
                      if tuple(rest[:len(p)]) == p), None)
    elif rest and (top, rest[0]) in MODULE_MEMBERS:
        found = 1, MODULE_MEMBERS[top, rest[0]]
    return found or allowlist_rule([top, *rest])


def _stream_rule(top: str, rest: list[str]) -> tuple[int, str] | None:
    """A stream API below a module that a registered platform declares as its device's
    (`Platform.device_stream_modules`); torch's are refused anywhere below torch."""
    if top == "torch" or not rest:
        return None
    from kernelevolve.plugins import device_stream_modules

    path = [top, *rest]
    for module in device_stream_modules():
        parts = module.split(".")
        end = len(parts)
        if path[:end] == parts and len(path) > end and path[end] in STREAM_NAMES:
            return end, DEVICE_STREAM_REASON
    return None


def _torch_rule(rest: list[str]) -> tuple[int, str] | None:
    for i, name in enumerate(rest, 1):
        if name in STREAM_NAMES:
            return i, STREAM_REASON
        if name in TORCH_ANY_MODULE:
            return i, TORCH_ANY_MODULE[name]
    for prefix, reason in TORCH_PREFIXES.items():
        if tuple(rest[:len(prefix)]) == prefix:
            return len(prefix), reason
    for i, name in enumerate(rest, 1):
        if name in TORCH_ANY:
            return i, TORCH_ANY[name]
        if rest[0] == "backends" and name.startswith(("set_", "enable_")):
            return i, BACKENDS_REASON
        for start, reason in TORCH_NAME_PREFIXES.items():
            if name.startswith(start) and len(name) > len(start):
                return i, reason
    return None


def _is_dunder(name: str) -> bool:
    """`__init__`, `__call__`, `__version__` are protocol names, not private internals (the
    dunders that reach interpreter internals are in ANY_ATTRIBUTE)."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")
