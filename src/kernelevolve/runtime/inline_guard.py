"""Launch accounting for CUDA/HIP C++ built with torch's `load_inline`: every call of a function
of the returned extension module counts as a launch (and is skipped while launches are
suppressed by the integrity probe)."""
from __future__ import annotations

import functools
from typing import Any

from kernelevolve.runtime import launches

_MARK = "_kernelevolve_counted"


class _CountedExtension:
    """Wraps an extension module; attribute access and `dir()` behave like the module's."""

    def __init__(self, module: Any):
        object.__setattr__(self, "_module", module)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._module, name)
        if callable(value) and not name.startswith("_"):
            @functools.wraps(value)
            def counted(*args: Any, **kwargs: Any) -> Any:
                launches.record("inline")
                if launches.suppressed():
                    return None
                return value(*args, **kwargs)
            return counted
        return value

    def __dir__(self) -> list[str]:
        return dir(self._module)


def install() -> None:
    try:
        from torch.utils import cpp_extension
    except Exception:  # noqa: BLE001 - no cpp_extension: nothing to count
        return
    original = cpp_extension.load_inline
    if getattr(original, _MARK, False):
        return

    @functools.wraps(original)
    def load_inline(*args: Any, **kwargs: Any) -> Any:
        return _CountedExtension(original(*args, **kwargs))

    setattr(load_inline, _MARK, True)
    cpp_extension.load_inline = load_inline
