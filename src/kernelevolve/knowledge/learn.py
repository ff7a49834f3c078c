"""Writing learned notes: what a run found (a winning transformation, a recurring failure).

Learned notes are ordinary note files (`source: learned`) in a folder the index reads, so a user
can inspect, edit or delete them like any other note. Three properties matter:

- valid by construction: the note is rendered and re-parsed before it is written, so a bad
  argument (confidence 1.5, unknown platform) fails here, not in a later run's index build;
- idempotent: the id is the title's slug plus a hash of the content, so a resumed run that learns
  the same thing again finds the existing file and does not write a duplicate;
- never destructive: a *different* note that happens to share the id gets a `-2`, `-3` suffix,
  and files are created exclusively (a concurrent run cannot clobber one half-written).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Iterable

from kernelevolve.knowledge.notes import Note, NoteError, parse_note, render_note

_MAX_SUFFIX = 1000


def write_learned_note(folder: str | Path, *, title: str, body: str,
                       platforms: Iterable[str] | str, languages: Iterable[str] | str,
                       tags: Iterable[str] | str, provenance: dict[str, Any], confidence: float,
                       expires_days: int | None = 180) -> Path:
    """Write a `source: learned` note into `folder` and return its path (see module docstring)."""
    folder = Path(folder)
    created = date.today()
    if isinstance(confidence, bool) or not _is_number(confidence):
        raise NoteError("learned note", f"confidence must be a number between 0 and 1, "
                                        f"got {confidence!r}")
    note = Note(id="pending", title=" ".join(str(title).split()), platforms=_list(platforms),
                languages=_list(languages), tags=[t.lower() for t in _list(tags)],
                body=str(body).strip(), source="learned", confidence=float(confidence),
                created=created, provenance=_plain(provenance or {}),
                expires=None if expires_days is None else created + timedelta(days=expires_days))
    base = f"{_slug(note.title)}-{_content_hash(note)}"
    note.id = base
    parse_note(render_note(note), name=f"learned note {base!r}")  # raises NoteError if invalid
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(1, _MAX_SUFFIX):
        note.id = base if n == 1 else f"{base}-{n}"
        path = folder / f"{note.id}.md"
        if path.exists():
            if _same(path, note):
                return path  # already learned (a resumed run): nothing to write
            continue
        if _create_exclusive(path, render_note(note)):
            return path
    raise NoteError(str(folder), f"more than {_MAX_SUFFIX} notes share the id {base!r}")


def provenance_from_fingerprint(fingerprint: dict[str, Any],
                                shapes: Any = None, **extra: Any) -> dict[str, Any]:
    """The provenance block of a learned note, from a platform fingerprint (see platforms/base).

    Keeps what decides whether a measurement still holds (device, driver, compiler, CUDA/HIP,
    torch/triton) and drops host trivia such as hostname. `extra` adds fields like `gain`.
    """
    fp = fingerprint or {}
    prov: dict[str, Any] = {}
    from kernelevolve.plugins import library_keys, toolkit_labels

    for key, src in (("platform", "platform"), ("device", "device"), ("driver", "driver"),
                     ("compiler", "cxx"), *((k, k) for k in toolkit_labels())):
        if fp.get(src) not in (None, ""):
            prov[key] = str(fp[src])
    libs = {lib: str(fp[lib]) for lib in ("torch", *library_keys()) if fp.get(lib)}
    if libs:
        prov["libraries"] = libs
    if shapes is not None:
        prov["shapes"] = shapes
    prov.update(extra)
    return _plain(prov)


def _is_number(value: Any) -> bool:
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, str)


def _list(value: Iterable[str] | str) -> list[str]:
    return [value] if isinstance(value, str) else [str(v) for v in value]


def _slug(title: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
    return (slug[:48].rstrip("-") or "note")


def _content_hash(note: Note) -> str:
    """What the note says, not when it was written: the same lesson hashes the same next week."""
    key = json.dumps([note.title, note.body, sorted(note.platforms), sorted(note.languages),
                      sorted(note.tags), note.provenance], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def _same(path: Path, note: Note) -> bool:
    try:
        old = parse_note(path)
    except NoteError:
        return False  # a broken file is not "the same note"; leave it alone and pick a suffix
    return (old.id == note.id and old.title == note.title and old.body == note.body
            and sorted(old.platforms) == sorted(note.platforms)
            and sorted(old.languages) == sorted(note.languages)
            and sorted(old.tags) == sorted(note.tags) and old.provenance == note.provenance)


def _create_exclusive(path: Path, text: str) -> bool:
    """Write `text` to a new file at `path`; False if something already exists there."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".learn-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            os.link(tmp, path)  # atomic and fails if the name is taken
        except FileExistsError:
            return False
        except OSError:  # filesystems without hard links: exclusive create instead
            try:
                with open(path, "x", encoding="utf-8") as fh:
                    fh.write(text)
            except FileExistsError:
                return False
        return True
    finally:
        os.unlink(tmp)


def _plain(value: Any) -> Any:
    """JSON-like data that safe YAML can write: tuples to lists, numpy/other scalars to str."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str, date)):
        return value
    return str(value)
