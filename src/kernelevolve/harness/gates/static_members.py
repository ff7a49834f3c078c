"""What a candidate may reach inside modules that can evaluate strings, run programs or read files.

An allow-list per module (`ALLOWLISTS`): `torch.utils.benchmark.Timer` runs a Python string,
`torch.utils.collect_env.run` a shell command, `functools.singledispatch` and typing's resolvers
evaluate string annotations, `dataclasses.make_dataclass` writes code from strings, `triton.compile`
reads a file; naming such a module's safe members and refusing the rest holds against members
nobody has thought of yet. Modules that hold only pure functions (math, cmath, itertools, abc,
numbers, operator but for its two string lookups) need no list.

`reached_module` refuses a standard-library module reached as an attribute of an allowed one
(`torch.cuda.traceback`, `torch.glob`, `triton.language.core.builtins`): reaching it is importing
it, and torch, numpy and triton hold dozens (io, pathlib, linecache, tempfile, string, logging).

Used by harness/gates/static_allow.py's `path_reason`; documented in docs/SECURITY.md. Reasons are
written to be pasted into an LLM prompt.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Allowlist:
    allowed: frozenset[str]          # dotted members below the module; their attributes too
    why: str                         # what the module can do that a candidate must not
    instead: str                     # what a candidate may use
    specific: dict[str, str] = field(default_factory=dict)  # first refused name -> reason


_ANNOTATION_TYPES = frozenset({
    "Any", "Optional", "Union", "List", "Dict", "Tuple", "Set", "FrozenSet", "Type", "Callable",
    "Sequence", "MutableSequence", "Mapping", "MutableMapping", "MutableSet", "AbstractSet",
    "Iterable", "Iterator", "Generator", "Collection", "Container", "Hashable", "Sized",
    "Reversible", "KeysView", "ValuesView", "ItemsView", "DefaultDict", "OrderedDict", "Counter",
    "Deque", "ChainMap", "NamedTuple", "TypedDict", "TypeVar", "Generic", "Protocol", "ClassVar",
    "Final", "Literal", "Annotated", "NoReturn", "Never", "Self", "LiteralString", "TypeAlias",
    "TypeGuard", "ParamSpec", "Concatenate", "Unpack", "TypeVarTuple", "Required", "NotRequired",
    "SupportsInt", "SupportsFloat", "SupportsIndex", "SupportsAbs", "SupportsRound",
    "SupportsComplex", "SupportsBytes", "Text", "AnyStr", "TYPE_CHECKING", "cast", "overload",
    "final", "no_type_check", "runtime_checkable", "NewType", "get_origin", "get_args",
    "assert_never", "assert_type", "dataclass_transform",
})
_EVAL = ("it evaluates strings as code (annotations written as strings); write annotations in "
         "the source and do not resolve them at run time")
_TYPING = Allowlist(
    _ANNOTATION_TYPES,
    "typing's helpers that resolve annotations evaluate strings as code",
    "annotation types (Optional, List, Tuple, Callable, TypeVar, Protocol, ...), cast and overload",
    {"get_type_hints": _EVAL, "ForwardRef": _EVAL, "get_annotations": _EVAL,
     "evaluate_forward_ref": _EVAL},
)

ALLOWLISTS: dict[str, Allowlist] = {
    "torch.utils": Allowlist(
        frozenset({"cpp_extension.load_inline", "dlpack.to_dlpack", "dlpack.from_dlpack"}),
        "torch.utils runs Python strings (benchmark.Timer), shell commands (collect_env), reads "
        "and writes files (data, checkpoint, tensorboard) and installs hooks",
        "torch.utils.cpp_extension.load_inline and torch.utils.dlpack; time nothing yourself "
        "(the harness times forward)",
        {"benchmark": "it runs code given as a string (Timer(stmt=...)) and times it itself; "
                      "the harness times forward: write the code directly",
         "collect_env": "it runs shell commands; a candidate has nothing to ask the system"},
    ),
    "torch.jit": Allowlist(
        frozenset({"trace", "is_scripting", "is_tracing"}),
        "TorchScript compiles a function's source, evaluates `# type:` comments and string "
        "annotations as code, and loads and saves files",
        "torch.jit.trace, is_scripting and is_tracing; write plain torch code or a kernel in "
        "the platform's language",
    ),
    "torch.compiler": Allowlist(
        frozenset({"disable", "is_compiling", "is_dynamo_compiling", "is_exporting",
                   "cudagraph_mark_step_begin", "allow_in_graph", "assume_constant_result"}),
        "torch.compiler configures the compiler the harness uses too, and loads compiled "
        "artifacts and caches from files",
        "torch.compile itself, and torch.compiler.disable, is_compiling, allow_in_graph",
    ),
    "functools": Allowlist(
        frozenset({"lru_cache", "cache", "cached_property", "partial", "partialmethod", "reduce",
                   "wraps", "update_wrapper", "total_ordering", "cmp_to_key",
                   "WRAPPER_ASSIGNMENTS", "WRAPPER_UPDATES"}),
        "functools.singledispatch evaluates a registered function's string annotations as code",
        "lru_cache, cache, cached_property, partial, reduce, wraps and total_ordering; dispatch "
        "on types with isinstance",
        {"singledispatch": _EVAL + "; dispatch with isinstance",
         "singledispatchmethod": _EVAL + "; dispatch with isinstance"},
    ),
    "typing": _TYPING,
    "typing_extensions": Allowlist(_TYPING.allowed | {"override", "deprecated"}, _TYPING.why,
                                   _TYPING.instead, _TYPING.specific),
    "dataclasses": Allowlist(
        frozenset({"dataclass", "field", "fields", "asdict", "astuple", "replace", "is_dataclass",
                   "InitVar", "KW_ONLY", "MISSING", "FrozenInstanceError"}),
        "dataclasses writes and runs code built from names and annotations",
        "the @dataclass decorator with field, fields, asdict, astuple and replace",
        {"make_dataclass": "it builds a class's code from names given as strings; write the "
                           "class with @dataclass"},
    ),
    "collections": Allowlist(
        frozenset({"namedtuple", "OrderedDict", "defaultdict", "deque", "Counter", "ChainMap",
                   "UserDict", "UserList", "UserString", "abc"}),
        "only the container types are needed by a kernel",
        "namedtuple, OrderedDict, defaultdict, deque, Counter, ChainMap and collections.abc",
    ),
    "enum": Allowlist(
        frozenset({"Enum", "IntEnum", "Flag", "IntFlag", "StrEnum", "ReprEnum", "auto", "unique",
                   "verify", "member", "nonmember", "EnumMeta", "EnumType", "EnumCheck",
                   "FlagBoundary", "property"}),
        "only the enum types are needed by a kernel",
        "Enum, IntEnum, Flag, IntFlag, StrEnum, auto and unique",
    ),
    "numpy.lib": Allowlist(
        frozenset({"stride_tricks", "mixins", "scimath", "array_utils", "recfunctions",
                   "NumpyVersion", "Arrayterator"}),
        "numpy.lib reads and writes files (npyio, format) and holds numpy's internals",
        "numpy.lib.stride_tricks, mixins, scimath, array_utils and recfunctions",
    ),
    "triton": Allowlist(
        frozenset({"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2",
                   "language", "constexpr_function", "must_use_result", "reinterpret",
                   "TensorWrapper", "JITFunction", "KernelInterface", "OutOfResources",
                   "CompilationError", "TritonError", "InterpreterError",
                   "runtime.driver.active", "runtime.Autotuner", "runtime.Heuristics",
                   "runtime.Config", "runtime.JITFunction", "runtime.KernelInterface",
                   "runtime.OutOfResources", "runtime.InterpreterError"}),
        "triton.compile reads source files, triton.runtime's cache and build read, write and "
        "compile files, and triton.knobs and triton.testing change the harness's settings and "
        "time code",
        "triton.jit, autotune, heuristics, Config, cdiv, next_power_of_2, triton.language and "
        "triton.runtime.driver.active",
    ),
}

# Attributes named like a standard-library module that are something else: numpy.random is
# numpy's, torch.signal torch's, np.array a function. name -> the exact parents where it is fine.
SAME_NAME_MEMBERS = {
    "array": {"numpy", "numpy.char", "numpy.ma", "numpy.rec"},
    "chunk": {"torch", "torch.Tensor"},
    "copy": {"numpy", "numpy.ndarray", "numpy.ma"},
    "math": {"triton.language"},
    "random": {"torch", "torch.cuda", "numpy", "triton.language"},
    "select": {"torch", "torch.Tensor", "numpy"},
    "signal": {"torch"},
    "trace": {"torch", "torch.Tensor", "numpy", "numpy.linalg", "torch.jit"},
    "types": {"torch"},
    "typing": {"numpy"},
    "abc": {"collections"},
    "numpy": {"torch.Tensor"},
}
# Third-party roots count as modules too: `torch.nn.functional.torch.utils` is torch.utils.
_REACHABLE_ROOTS = frozenset({"torch", "numpy", "triton", "kernelevolve"})
STDLIB_MODULES = frozenset(n for n in sys.stdlib_module_names if not n.startswith("_"))


def allowlist_rule(parts: list[str]) -> tuple[int, str] | None:
    """(index of the last component of the refused prefix, reason) when `parts` reaches below an
    allow-listed module something its list does not name."""
    for cut in range(len(parts) - 1, 0, -1):
        rules = ALLOWLISTS.get(".".join(parts[:cut]))
        if rules is not None:
            break
    else:
        return None
    rest = parts[cut:]
    entries = [e.split(".") for e in rules.allowed]
    for k in range(1, len(rest) + 1):
        head = rest[:k]
        if _is_dunder(head[-1]):
            return None  # __version__, __name__; the dunders that reach internals have a rule
        if not any(e[:k] == head or head[:len(e)] == e for e in entries):
            reason = rules.specific.get(rest[k - 1]) or (
                f"{rules.why}; a candidate may use {rules.instead}")
            return cut + k - 1, reason
        if any(head[:len(e)] == e for e in entries):
            return None  # an allowed member, or an attribute of one
    return None


def reached_module(parts: list[str], allowed_top: frozenset[str], reasons: dict[str, str],
                   hint: Callable[[], str]) -> tuple[int, str] | None:
    """A module reached as an attribute of another (`torch.cuda.traceback`): (index, reason)."""
    if parts[:2] == ["torch", "ops"]:
        return None  # operator names (aten.select, aten.copy), never modules
    for i in range(1, len(parts)):
        name = parts[i]
        if name not in STDLIB_MODULES and name not in _REACHABLE_ROOTS:
            continue
        if ".".join(parts[:i]) in SAME_NAME_MEMBERS.get(name, ()):
            continue
        where = ".".join(parts[:i])
        if name in reasons:
            why = reasons[name]
        elif name in allowed_top:
            why = f"import {name} directly, where its own rules apply"
        else:
            why = hint()
        return i, f"reaching {name} through {where} is importing it: {why}"
    return None


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")
