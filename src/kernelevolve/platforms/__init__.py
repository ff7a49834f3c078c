"""Platform registry, found by convention: `platforms/<name>.py` holds exactly one Platform."""
from __future__ import annotations

import importlib
import inspect

from kernelevolve.errors import PlatformError
from kernelevolve.platforms.base import Platform, Timer

KNOWN = ("cpu", "cuda", "rocm")


def get_platform(name: str) -> Platform:
    if name not in KNOWN:
        raise PlatformError(f"unknown platform {name!r}; choose one of: {', '.join(KNOWN)}")
    module = importlib.import_module(f"kernelevolve.platforms.{name}")
    found = [obj for obj in vars(module).values()
             if inspect.isclass(obj) and issubclass(obj, Platform) and obj is not Platform
             and obj.__module__ == module.__name__]
    if len(found) != 1 or found[0].name != name:
        raise PlatformError(f"platforms/{name}.py must define exactly one Platform subclass "
                            f"named {name!r}; found {[c.__name__ for c in found]}")
    return found[0]()


__all__ = ["KNOWN", "Platform", "Timer", "get_platform"]
