"""What a candidate may hand the compilers that run inside its own process.

`torch.utils.cpp_extension.load_inline` runs nvcc/g++ inside the candidate's job (the `jit`
filter profile) with whatever include folders, build folder and flags it is given: `-include
/path/.env` or `@/path/file` makes the compiler read a file and quote it in its diagnostics, a
plugin flag loads code into the compiler. `torch.compile(options=...)` patches inductor's
configuration, which names the compiler program and the folders it writes. The gate allows
flags from the same code-generation allow-list the driver applies to load_cpp
(harness/gates/cpp_rules.py `check_flags`), nvcc's code-generation options, and `-l<library>` for
linking; the flag lists must be literals it can read. The proof that nothing is read stays the
sandbox's mounts (harness/containment/allowlist.py); this is the early reason.
"""
from __future__ import annotations

import ast
import re
from collections.abc import Callable

LOAD_INLINE = "torch.utils.cpp_extension.load_inline"
_FLAG_KEYWORDS = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags")
_PATH_KEYWORDS = ("extra_include_paths", "build_directory")
_POSITIONAL_MAX = 4  # name, cpp_sources, cuda_sources, functions
_ARCH = r"(sm|compute)_\d{2,3}[a-z]?"
_NVCC = re.compile(
    r"^(-?-use_fast_math|--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda|"
    r"-lineinfo|--generate-line-info|-res-usage|--resource-usage|--extra-device-vectorization|"
    rf"(-arch|--gpu-architecture)={_ARCH}|-gencode=arch={_ARCH},code={_ARCH}|"
    r"-?-maxrregcount=\d{1,4}|-(ftz|prec-div|prec-sqrt|fmad)=(true|false)|--threads=\d{1,2}|"
    r"(-Xptxas|--ptxas-options)=[-A-Za-z0-9,=]{1,64})$")
_HOST_PASS = re.compile(r"^(-Xcompiler|--compiler-options)=(.+)$")
_LIBRARY = re.compile(r"^-l[A-Za-z0-9_]{1,64}$")
COMPILE_OPTIONS = ("torch.compile's `options` (or **keywords that could carry them) are not "
                   "allowed: inductor's options name the compiler program, its flags and the "
                   "folders it writes; pass mode=, dynamic= or fullgraph= only")
_FLAGS_HELP = ("code-generation flags only (-O*, -f<math/loop/vectorise option>, -m<target>, "
               "-D/-U, -std=, -W<warning>; nvcc's --use_fast_math, -arch=sm_XX, -lineinfo; "
               "-l<library> to link): no include paths, files, plugins or linker options")


def load_inline_problem(call: ast.Call, strings: Callable[[ast.AST], list[str] | None]
                        ) -> str | None:
    """Why this `load_inline(...)` call is refused, or None. `strings` gives the literal string
    values a node holds (static_strings.LiteralStrings.of), None when the gate cannot read them."""
    if len(call.args) > _POSITIONAL_MAX:
        return ("load_inline's options must be passed by keyword (extra_cflags=..., "
                "extra_cuda_cflags=...), so the gate can read them")
    for kw in call.keywords:
        if kw.arg is None:
            return "load_inline with **keywords hides its options; pass each by name"
        if kw.arg in _PATH_KEYWORDS:
            return (f"load_inline's {kw.arg} names a folder on disk; paste headers into the "
                    f"source and leave the build folder to torch")
        if kw.arg in _FLAG_KEYWORDS:
            flags = _literal_list(kw.value, strings)
            if flags is None:
                return (f"load_inline's {kw.arg} must be a list of string literals the gate can "
                        f"read; use {_FLAGS_HELP}")
            bad = next((f for f in flags if not _flag_ok(f, kw.arg)), None)
            if bad is not None:
                return f"load_inline's {kw.arg} flag {bad!r} is not allowed; use {_FLAGS_HELP}"
    return None


def _literal_list(node: ast.AST, strings: Callable[[ast.AST], list[str] | None]
                  ) -> list[str] | None:
    if isinstance(node, ast.Constant) and node.value is None:
        return []
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    out: list[str] = []
    for item in node.elts:
        values = None if isinstance(item, ast.Starred) else strings(item)
        if values is None:
            return None
        out += values
    return out


def _flag_ok(flag: str, keyword: str) -> bool:
    from kernelevolve.harness.gates.cpp_rules import check_flags

    if check_flags([flag]) is None:
        return True
    if keyword == "extra_ldflags":
        return bool(_LIBRARY.match(flag))
    if keyword == "extra_cuda_cflags":
        host = _HOST_PASS.match(flag)
        if host:
            return all(check_flags([f]) is None for f in host.group(2).split(","))
        return bool(_NVCC.match(flag))
    return False
