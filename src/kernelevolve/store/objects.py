"""Content-addressed object store: `objects/<2 hex>/<62 hex>`, named by the sha256 of the bytes.

Why content addressing: candidate sources, compiled libraries and logs repeat a lot across a
search (the same kernel proposed twice, the same library rebuilt), so identical bytes are stored
once, and a hash in the database is enough to find and verify them. Writes go to a temporary file
in the destination directory and are moved into place with `os.replace`, so a reader (or a run
killed mid-write) never sees a half-written object under its final name.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

from kernelevolve.store.errors import StoreError

_HASH = re.compile(r"^[0-9a-f]{64}$")


def sha256_hex(data: bytes | str) -> str:
    """The object name for `data` (str is encoded as UTF-8, as `put` stores it)."""
    return hashlib.sha256(_as_bytes(data)).hexdigest()


def _as_bytes(data: bytes | str) -> bytes:
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"object data must be bytes or str, not {type(data).__name__}")


class ObjectStore:
    """Immutable blobs under `root`, addressed by their sha256 (64 lowercase hex digits)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"ObjectStore({str(self.root)!r})"

    def path(self, hash: str) -> Path:
        """Where the object lives (whether or not it exists). Rejects anything but a sha256 hex
        name, so a hash read from a damaged database can never point outside the store."""
        if not isinstance(hash, str) or not _HASH.match(hash):
            raise StoreError(f"not an object hash (64 lowercase hex digits): {hash!r}")
        return self.root / hash[:2] / hash[2:]

    def exists(self, hash: str) -> bool:
        return self.path(hash).is_file()

    def put(self, data: bytes | str) -> str:
        """Store `data` once and return its hash; storing the same bytes again is a no-op."""
        blob = _as_bytes(data)
        digest = hashlib.sha256(blob).hexdigest()
        final = self.path(digest)
        if final.is_file():
            return digest
        final.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=final.parent, prefix=".tmp-", suffix=".part")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(blob)
                f.flush()
                # fsync before the rename: the database row naming this object is committed
                # right after, and must not outlive the bytes on a power loss. Objects are KB-MB,
                # evaluations take seconds, so the cost does not show.
                os.fsync(f.fileno())
            # mkstemp creates 0600; give objects the permissions a plain open() would have.
            os.chmod(tmp, 0o666 & ~_UMASK)
            os.replace(tmp, final)
        except BaseException:
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
            raise
        return digest

    def get(self, hash: str) -> bytes:
        """The object's bytes; a missing or corrupted object is a StoreError naming the path."""
        path = self.path(hash)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            raise StoreError(f"object {hash} is missing from {self.root} (expected at {path}); "
                             "the workspace's objects/ directory was moved or pruned") from None
        if hashlib.sha256(blob).hexdigest() != hash:
            raise StoreError(f"object {path} is corrupted: its content no longer matches its hash")
        return blob

    def get_text(self, hash: str) -> str:
        return self.get(hash).decode("utf-8")


def _read_umask() -> int:
    # os.umask can only be read by setting it, which is not thread-safe; do it once, at import.
    current = os.umask(0o022)
    os.umask(current)
    return current


_UMASK = _read_umask()
