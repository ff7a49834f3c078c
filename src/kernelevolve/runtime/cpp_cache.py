"""The compiled-library cache: `<stem>-<key>.so` plus a manifest with the hash of its bytes.

A library is loaded only when its bytes hash to what the manifest recorded when it was built,
so a file swapped in under a known key (by anything that could write the folder) is rebuilt,
never loaded. Inside the harness only the driver writes here (workers see the cache read-only
and ask the driver for builds); a user's own `load_cpp` writes here directly. Builds of the same
key are serialised by a lock file, and every write is a rename, so readers never see half a file.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


LIBRARIES_SUBDIR = "cpp"  # load_cpp's libraries under the cache folder (KERNELEVOLVE_CACHE_DIR)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class LibraryCache:
    def __init__(self, root: Path):
        self.root = Path(root)

    def paths(self, stem: str, key: str) -> tuple[Path, Path]:
        base = self.root / f"{stem}-{key[:20]}"
        return base.with_suffix(".so"), base.with_suffix(".json")

    def lookup(self, stem: str, key: str) -> tuple[Path, dict[str, Any]] | None:
        """The library and its manifest when the bytes match the manifest's hash."""
        lib, manifest = self.paths(stem, key)
        try:
            meta = json.loads(manifest.read_text())
            if meta.get("key") != key or not lib.is_file() or lib.is_symlink():
                return None
            if sha256_file(lib) != meta.get("sha256"):
                return None
        except (OSError, ValueError, AttributeError):
            return None
        return lib, meta

    def store(self, stem: str, key: str, built: Path, **meta: Any) -> tuple[Path, dict[str, Any]]:
        """Move a freshly built library in and record its hash (library first, then manifest)."""
        lib, manifest = self.paths(stem, key)
        record = {"key": key, "sha256": sha256_file(built), **meta}
        os.replace(built, lib)
        self.write_manifest(manifest, record)
        return lib, record

    def write_manifest(self, manifest: Path, record: dict[str, Any]) -> None:
        fd, tmp = tempfile.mkstemp(prefix=".manifest-", dir=self.root)
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh)
        os.replace(tmp, manifest)

    @contextlib.contextmanager
    def locked(self, key: str) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / f".lock-{key[:20]}", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)
