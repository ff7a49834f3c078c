"""Where things are in an exported kernel, and the file digest that seals a build.

    DIR/
      README.md                     what this is, how to load it, the headline figures
      build/<variant>/              one build (share/variant.py names it)
        metadata.json               the kernels package's metadata, with a digest of every file
        <package>/                  the Python package the kernels package imports
          __init__.py, layers.py    generated: the kernel loaded at import; one layer class
          _runtime.py               the loader (share/shipped.py), no kernelevolve import
          _binding.py, _region.py, _launch.py   copies of kernelevolve's own modules it uses
          kernel.py, problem.py     the kernel's source and its problem (the reference)
          evidence.json             the registry entry, events, evaluation, machine, harness
          libs/<file>.so            the compiled libraries (none for a noarch build)

The digest has the kernels package's shape (`{"algorithm": "sha256", "files": {relative path:
base64 of the file's sha256}}`, metadata.json and `__pycache__` left out), so the kernels
package checks it at every load of a local kernel, and `kernelevolve verify` checks it too.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from kernelevolve.errors import KernelevolveError

METADATA = "metadata.json"
EVIDENCE = "evidence.json"
LIBS = "libs"
# The only files a package may hold besides its libraries: anything else is not ours.
PACKAGE_FILES = ("__init__.py", "layers.py", "_runtime.py", "_binding.py", "_region.py",
                 "_launch.py", "kernel.py", "problem.py", EVIDENCE)


class ShareError(KernelevolveError):
    """An exported kernel that cannot be written, read or trusted; the message says why."""


class Refused(ShareError):
    """The gate refused the kernel (exit 1, as `eval` for a rejected candidate)."""

    exit_code = 1


def kernel_id(name: str) -> str:
    """The kernels package's kernel name: lowercase letters, digits and dashes."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    slug = slug if slug[:1].isalpha() else f"k-{slug}"
    return slug if len(slug) >= 2 else f"{slug}-kernel"


def python_name(name: str) -> str:
    return kernel_id(name).replace("-", "_")


def builds(root: Path) -> list[Path]:
    """The build folders of an exported kernel (each holds a metadata.json)."""
    base = root / "build"
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and (p / METADATA).is_file())


def package_dir(build: Path) -> Path:
    meta = read_metadata(build)
    return build / python_name(str(meta.get("name", "")))


def read_metadata(build: Path) -> dict[str, Any]:
    try:
        meta = json.loads((build / METADATA).read_text())
    except (OSError, ValueError) as exc:
        raise ShareError(f"{build / METADATA} cannot be read ({exc}); export the kernel "
                         "again") from None
    if not isinstance(meta, dict):
        raise ShareError(f"{build / METADATA} is not a metadata object; export the kernel again")
    return meta


def read_evidence(build: Path) -> dict[str, Any]:
    path = package_dir(build) / EVIDENCE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ShareError(f"{path} cannot be read ({exc}); export the kernel again") from None
    if not isinstance(data, dict) or not isinstance(data.get("entry"), dict) or \
            not _entry_ok(data["entry"]):
        raise ShareError(f"{path} is not kernelevolve evidence (a field is missing or of the "
                         "wrong type); export the kernel again")
    return data


def _entry_ok(entry: dict[str, Any]) -> bool:
    """The fields verify, the loader and import read without a default."""
    def has(d: Any, *keys: str) -> bool:
        return isinstance(d, dict) and all(isinstance(d.get(k), str) for k in keys)

    libs = entry.get("libraries", [])
    return (has(entry.get("source"), "sha256") and has(entry.get("problem"), "sha256")
            and isinstance(entry.get("region"), dict) and isinstance(libs, list)
            and all(has(lib, "file", "sha256", "source_sha256")
                    and isinstance(lib.get("flags"), list) and Path(lib["file"]).name ==
                    lib["file"] and not lib["file"].startswith(".") for lib in libs))


def file_digests(build: Path) -> dict[str, str]:
    """{path relative to the build: base64 sha256} of every file but metadata.json."""
    out = {}
    for path in sorted(build.rglob("*")):
        rel = path.relative_to(build).as_posix()
        if not path.is_file() or rel == METADATA or "__pycache__" in path.parts:
            continue
        out[rel] = base64.b64encode(hashlib.sha256(path.read_bytes()).digest()).decode()
    return out


def seal(build: Path) -> None:
    """Record the digest of every file of a build in its metadata.json, and an id derived from
    it: the kernels package keeps one module per id in a process and refuses a second build
    under the same id, so another build (other evidence included) must have another id."""
    meta = read_metadata(build)
    files = file_digests(build)
    meta["digest"] = {"algorithm": "sha256", "files": files}
    sealed = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:12]
    meta["id"] = f"_{python_name(str(meta.get('name', 'kernel')))}_{sealed}"
    (build / METADATA).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def digest_problems(build: Path) -> list[str]:
    """One line per file that differs from the sealed digest (changed, missing, unknown)."""
    meta = read_metadata(build)
    want = (meta.get("digest") or {}).get("files")
    if not isinstance(want, dict):
        return [f"{build / METADATA} records no digest, so nothing in the build can be trusted"]
    have = file_digests(build)
    out = [f"{rel} was modified (its sha256 differs from the digest)"
           for rel in sorted(want) if rel in have and have[rel] != want[rel]]
    out += [f"{rel} is missing" for rel in sorted(set(want) - set(have))]
    out += [f"{rel} is not part of the build" for rel in sorted(set(have) - set(want))]
    return out
