"""The Python package inside an exported build: generated entry points plus shipped modules.

The kernels package imports `<package>/__init__.py` and takes the layer class from its
`layers` attribute; `kernelize` then puts the layer's `forward` on the user's module (the layer
must define nothing but `forward`, `has_backward` and `can_torch_compile`, and its `forward`
must take the arguments the user's layer takes: here, the problem's `Model.forward`'s).

What is written is generated from the problem's signature and the kernel's name; what is
copied are kernelevolve modules that import nothing of kernelevolve (checked here: a copy
that did would fail where kernelevolve is not installed).
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from kernelevolve.share.layout import ShareError

_SRC = Path(__file__).resolve().parent.parent
# shipped name -> kernelevolve module it is a copy of
SHIPPED = {"_runtime.py": "share/shipped.py", "_binding.py": "registry/binding.py",
           "_region.py": "registry/region.py", "_launch.py": "runtime/launch_fallback.py"}

_INIT = '''"""{title}

Exported by kernelevolve {version}: the kernel, its problem, its libraries for this build, and
the evidence it was promoted on (evidence.json). Loaded by the kernels package
(`get_local_kernel`, `LocalLayerRepository(..., layer_name="{layer}")`) or imported directly.
"""
from pathlib import Path as _Path

from . import _binding, _launch, _region, _runtime

KERNEL = _runtime.load(_Path(__file__).resolve().parent, _binding, _region, _launch)

from . import layers  # noqa: E402  (layers.py reads KERNEL)


def coverage():
    """Calls so far: served by the kernel, and fallbacks to the module's own forward by
    reason (module, shape, dtype, layout, device, arguments, value, autograd, error)."""
    return KERNEL.counts


__all__ = ["KERNEL", "coverage", "layers"]
'''

_LAYERS = '''"""The layer kernelize puts on a module marked
`@use_kernel_forward_from_hub("{layer}")`."""
import torch

from . import KERNEL as _KERNEL


class {layer}(torch.nn.Module):
    """{title}: the kernel inside its validated region, the module's own forward elsewhere."""

    has_backward = False      # inference only: a call that needs gradients runs the original
    can_torch_compile = False  # an opaque ctypes call; kernelize falls back under compile

    def forward({params}):
        return _KERNEL.forward(self, {args})
'''


def layer_name(name: str) -> str:
    """A class name from the kernel's name: `rms_norm-2` -> `RmsNorm2`."""
    parts = [p for p in re.split(r"[^A-Za-z0-9]+", name) if p]
    out = "".join(p[:1].upper() + p[1:] for p in parts) or "Kernel"
    return out if out[0].isalpha() else f"K{out}"


def forward_params(problem_source: bytes) -> tuple[str, str]:
    """(parameter list, call arguments) of the problem's `Model.forward`, `self` first."""
    try:
        tree = ast.parse(problem_source)
    except SyntaxError as exc:
        raise ShareError(f"the kernel's problem does not parse ({exc.msg}); promote it "
                         "again") from None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return _params(item.args)
    raise ShareError("the kernel's problem has no Model.forward; it cannot be exported")


def _params(args: ast.arguments) -> tuple[str, str]:
    if args.kwonlyargs or args.kwarg or args.posonlyargs:
        raise ShareError("Model.forward takes keyword-only or positional-only arguments; the "
                         "exported layer passes positional ones only")
    names = [a.arg for a in args.args]
    if names[:1] != ["self"]:
        raise ShareError("Model.forward's first argument is not self")
    call = names[1:] + ([f"*{args.vararg.arg}"] if args.vararg else [])
    return ast.unparse(args), ", ".join(call)


def write(pkg: Path, *, title: str, layer: str, version: str, problem_source: bytes) -> None:
    """The generated files and the shipped copies, into `pkg` (which exists)."""
    params, call = forward_params(problem_source)
    (pkg / "__init__.py").write_text(_INIT.format(title=title, version=version, layer=layer))
    (pkg / "layers.py").write_text(_LAYERS.format(title=title, layer=layer, params=params,
                                                  args=call))
    for shipped, module in SHIPPED.items():
        text = (_SRC / module).read_text()
        if re.search(r"^\s*(from|import)\s+kernelevolve\b", text, re.M):
            raise ShareError(f"kernelevolve/{module} imports kernelevolve, so it cannot ship "
                             "inside an exported kernel (a kernelevolve bug: please report it)")
        (pkg / shipped).write_text(text)
