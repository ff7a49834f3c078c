"""Knowledge notes: markdown files with YAML front matter, parsed and checked strictly.

A note is what a general model cannot know on its own: a hardware rule, a trick that paid off, a
failure that kept recurring, and *where it was measured*. The front matter carries that provenance
so retrieval can tell a fresh fact from one measured on another device or toolchain.

Validation is strict (unknown keys, bad types, bad dates are all errors) because a typo such as
`tag:` for `tags:` would otherwise silently drop a note from every filtered search. Each fault is
one line naming the file, so `kernelevolve kb validate` output reads like a compiler's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import yaml

from kernelevolve.errors import KernelevolveError
from kernelevolve.knowledge.applies import COMMENT, parse_applies



def platform_tags() -> tuple[str, ...]:
    """What a note's `platforms:` may say: a registered platform, or any."""
    from kernelevolve.plugins import platform_names

    return (*platform_names(), "any")


def language_tags() -> tuple[str, ...]:
    """What a note's `languages:` may say: a registered language, or any."""
    from kernelevolve.plugins import language_names

    return (*language_names(), "any")


SOURCES = ("curated", "learned")
REQUIRED = ("id", "title", "platforms", "languages", "tags", "source", "confidence", "created")
OPTIONAL = ("provenance", "expires", "applies")  # applies: knowledge/applies.py
# Provenance values compared against a fingerprint; numbers there are refused because YAML reads
# an unquoted `torch: 2.10` as the float 2.1, which would silently compare as the wrong version.
VERSION_KEYS = ("device", "driver", "compiler", "platform")  # + the platforms' toolkit keys
_SLUG = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")


class KnowledgeError(KernelevolveError):
    """A knowledge-base mistake a user can fix: unknown note id, bad filter, missing folder."""


class NoteError(KnowledgeError):
    """A note file that does not parse or validate; the message names the file and the fault."""

    def __init__(self, where: str, fault: str):
        self.where = str(where)
        self.fault = fault
        super().__init__(f"{self.where}: {fault}")

    def __reduce__(self):
        return (type(self), (self.where, self.fault))


@dataclass
class Note:
    id: str
    title: str
    platforms: list[str]
    languages: list[str]
    tags: list[str]
    body: str
    source: str = "curated"
    confidence: float = 0.8
    created: date = field(default_factory=date.today)
    expires: date | None = None
    provenance: dict[str, Any] = field(default_factory=dict)
    applies: dict[str, list[str]] = field(default_factory=dict)  # where it applies (applies.py)
    path: Path | None = field(default=None, compare=False)

    def expired(self, today: date | None = None) -> bool:
        """A note is no longer used from its `expires` day on."""
        return self.expires is not None and (today or date.today()) >= self.expires

    def matches(self, platform: str | None = None, language: str | None = None) -> bool:
        """Whether the note applies to this target; `any` in the note matches every target."""
        ok_p = platform is None or platform in self.platforms or "any" in self.platforms
        ok_l = language is None or language in self.languages or "any" in self.languages
        return ok_p and ok_l


def parse_note(source: str | Path, *, name: str | None = None) -> Note:
    """Parse a note from a path, or from text (a str holding a newline is text, else a path).

    Raises `NoteError` with one line: "<file>: <fault>".
    """
    path: Path | None = None
    if isinstance(source, Path) or "\n" not in str(source):
        path = Path(source)
        where = name or str(path)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise NoteError(where, f"cannot read note ({reason})") from None
    else:
        text, where = str(source), name or "<text>"
    meta, body = _split(text, where)
    note = _build(meta, body, where)
    note.path = path
    return note


def render_note(note: Note) -> str:
    """The note as markdown with front matter; `parse_note(render_note(n)) == n`."""
    meta: dict[str, Any] = {
        "id": note.id, "title": note.title, "platforms": list(note.platforms),
        "languages": list(note.languages), "tags": list(note.tags), "source": note.source,
        "confidence": note.confidence, "created": note.created, "expires": note.expires,
        "provenance": dict(note.provenance),
    }
    if note.applies:
        meta["applies"] = {k: list(v) for k, v in note.applies.items()}
    head = yaml.safe_dump(meta, sort_keys=False, default_flow_style=None, allow_unicode=True,
                          width=100)
    return f"---\n{head}---\n\n{note.body.strip()}\n"


class _Loader(yaml.SafeLoader):
    """SafeLoader that leaves dates as text, so `created: 2026-13-45` gets our one-line message
    instead of a ValueError from deep inside YAML's timestamp constructor."""


_Loader.yaml_implicit_resolvers = {
    ch: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for ch, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def _split(text: str, where: str) -> tuple[dict, str]:
    lines = text.lstrip("\ufeff").splitlines()
    if not lines or lines[0].strip() != "---":
        raise NoteError(where, "no front matter: the file must start with a '---' line")
    try:
        end = next(i for i, ln in enumerate(lines[1:], 1) if ln.strip() == "---")
    except StopIteration:
        raise NoteError(where, "front matter is not closed by a second '---' line") from None
    try:
        meta = yaml.load("\n".join(lines[1:end]), Loader=_Loader)  # noqa: S506 - safe subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise NoteError(where, f"bad YAML front matter{at}: {problem}") from None
    if not isinstance(meta, dict):
        raise NoteError(where, "front matter must be a mapping of fields (id: ..., title: ...)")
    return meta, "\n".join(lines[end + 1:]).strip()


def _build(meta: dict, body: str, where: str) -> Note:
    def fault(msg: str) -> NoteError:
        return NoteError(where, msg)

    unknown = sorted(str(k) for k in meta if k not in REQUIRED + OPTIONAL)
    if unknown:
        raise fault(f"unknown field {unknown[0]!r}; allowed: {', '.join(REQUIRED + OPTIONAL)}")
    for key in REQUIRED:
        if meta.get(key) is None:
            raise fault(f"missing field {key!r}")
    note_id = meta["id"]
    if not isinstance(note_id, str) or not _SLUG.match(note_id):
        raise fault(f"id must be a lowercase slug (a-z, 0-9, '-', '_', '.'), got {note_id!r}")
    title = meta["title"]
    if not isinstance(title, str) or not title.strip() or "\n" in title.strip():
        raise fault("title must be a non-empty one-line string")
    platforms = _str_list(meta["platforms"], "platforms", fault, platform_tags())
    languages = _str_list(meta["languages"], "languages", fault, language_tags())
    tags = [t.lower() for t in _str_list(meta["tags"], "tags", fault, None)]
    source = meta["source"]
    if source not in SOURCES:
        raise fault(f"unknown source {source!r}; expected one of {', '.join(SOURCES)}")
    conf = meta["confidence"]
    if isinstance(conf, bool) or not isinstance(conf, (int, float)):
        raise fault(f"confidence must be a number between 0 and 1, got {conf!r}")
    if not 0.0 <= float(conf) <= 1.0:
        raise fault(f"confidence {conf} is out of range; expected 0..1")
    created = _date(meta["created"], "created", fault)
    expires = None if meta.get("expires") is None else _date(meta["expires"], "expires", fault)
    if expires is not None and expires < created:
        raise fault(f"expires {expires} is before created {created}")
    provenance = _provenance(meta.get("provenance"), fault)
    if not body:
        raise fault("the note has no body after the front matter")
    applies = parse_applies(meta.get("applies"), fault)
    for comment in COMMENT.finditer(body):  # a section's own <!-- applies: ... -->
        parse_applies(comment.group(1).strip(), fault)
    return Note(id=note_id, title=title.strip(), platforms=platforms, languages=languages,
                tags=tags, body=body, source=source, confidence=float(conf), created=created,
                expires=expires, provenance=provenance, applies=applies)


def _str_list(value: Any, key: str, fault, allowed: tuple[str, ...] | None) -> list[str]:
    if isinstance(value, str):
        value = [value]  # `platforms: cuda` is an obvious shorthand for [cuda]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v.strip()
                                                            for v in value):
        raise fault(f"{key} must be a non-empty list of strings, got {value!r}")
    out = [v.strip() for v in value]
    if allowed is not None:
        bad = [v for v in out if v not in allowed]
        if bad:
            raise fault(f"unknown {key[:-1]} {bad[0]!r}; expected any of {', '.join(allowed)}")
    return out


def _date(value: Any, key: str, fault) -> date:
    if isinstance(value, date):  # a Note built in code rather than parsed
        return value
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise fault(f"{key} must be an ISO date (YYYY-MM-DD), got {value!r}") from None


def _provenance(value: Any, fault) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fault(f"provenance must be a mapping (device, driver, compiler, libraries, "
                    f"shapes), got {value!r}")
    from kernelevolve.plugins import toolkit_labels

    for key in (*VERSION_KEYS, *toolkit_labels()):
        if key in value and value[key] is not None and not isinstance(value[key], str):
            raise fault(f"provenance.{key} must be a quoted string, got {value[key]!r}")
    libs = value.get("libraries")
    if libs is not None:
        if not isinstance(libs, dict):
            raise fault(f"provenance.libraries must be a mapping such as {{torch: '2.5'}}, "
                        f"got {libs!r}")
        for lib, ver in libs.items():
            if ver is not None and not isinstance(ver, str):
                raise fault(f"provenance.libraries.{lib} must be a quoted version string "
                            f"(YAML reads 2.10 as 2.1), got {ver!r}")
    return dict(value)
