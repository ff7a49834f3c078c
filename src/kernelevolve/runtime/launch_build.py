"""Building and loading the trusted kernel launcher (launch_ext.cpp), a CPython extension.

It is harness code: built by kernelevolve from the file shipped beside this module, never from
candidate text, with the plain compiler (no sandbox is needed for our own source), into the
compile cache's `harness` folder, keyed by its source, the compiler's version, Python's
version and headers (runtime/cpp.py's cache: a library is loaded only when its bytes hash to
what was recorded at build time). Python's headers are all it needs (no libtorch: about a
second to build, once per machine and toolchain).

Inside a harness job no compiler may run: the driver builds it (`build`) and hands the job
(path, sha256), which `load` verifies before loading.
"""
from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import sys
import sysconfig
from pathlib import Path
from types import ModuleType

from kernelevolve.errors import CppCompileError
from kernelevolve.runtime.cpp import build as build_library
from kernelevolve.runtime.cpp_cache import LibraryCache, sha256_file

SOURCE = Path(__file__).with_name("launch_ext.cpp")
MODULE = "_ke_launch"  # PyInit__ke_launch in launch_ext.cpp
HARNESS_SUBDIR = "harness"  # the harness's own native helpers under the cache folder


def python_include() -> Path:
    return Path(sysconfig.get_paths()["include"])


def build(cache_root: Path) -> dict[str, str]:
    """Build (or find in the cache) the launcher for this interpreter; {"path", "sha256"}.
    Raises CppCompileError saying why it cannot be built (no Python headers, no compiler)."""
    include = python_include()
    if not (include / "Python.h").is_file():
        raise CppCompileError(f"no Python headers (Python.h is not in {include}; install "
                              "the python3-dev package)")
    try:
        source = SOURCE.read_text()
    except OSError as exc:
        raise CppCompileError(f"the launcher's source is missing ({exc})") from None
    # Python's version and ABI flags in the key: an extension is built for one interpreter.
    abi = hashlib.sha256(f"{sys.version}|{sysconfig.get_config_var('SOABI')}".encode())
    flags = (f"-I{include}", f"-DKE_PYTHON_ABI_{abi.hexdigest()[:12]}", "-O2")
    lib, record = build_library(source, flags, "ke_launch", LibraryCache(cache_root))
    return {"path": str(lib), "sha256": record["sha256"]}


def load(spec: dict[str, str]) -> ModuleType:
    """Load the extension named by (path, sha256) once its bytes are checked; raises OSError
    or ImportError when the file is not the one recorded or cannot be loaded here."""
    path = str(spec["path"])
    if sha256_file(Path(path)) != spec["sha256"]:
        raise OSError(f"{path} no longer matches the hash recorded when it was built")
    loader = importlib.machinery.ExtensionFileLoader(MODULE, path)
    found = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    if found is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(found)
    loader.exec_module(module)
    return module
