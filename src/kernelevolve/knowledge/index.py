"""Retrieval over knowledge notes: SQLite FTS5 with BM25, filtered by target, aware of provenance.

Why FTS5 and not embeddings: notes are short, technical and full of exact words (wgmma, LDS,
float4, num_stages) that lexical search matches well; it needs nothing beyond the standard library
and is deterministic, which keeps prompt construction testable. Dense retrieval can be layered on
later as an optional extra.

Scoring: `-bm25()` with title and tags weighted above the body (a note *about* softmax should beat
one that mentions it in passing), plus a small coverage bonus (see `_search`), times a confidence
factor, times a penalty when the note was measured somewhere else than the current fingerprint
(see `staleness`).
"""
from __future__ import annotations

import math
import re
import sqlite3
import threading
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Iterable

from kernelevolve.knowledge.notes import (KnowledgeError, Note, NoteError, language_tags,
                                          parse_note, platform_tags, render_note)
from kernelevolve.knowledge.staleness import staleness

CURATED_DIR = Path(__file__).resolve().parent / "notes"
# Column weights for bm25(): id (unindexed), title, tags, body. A word in the title or the tags
# says what the note is *about*; the same word in a 350-word body may be a passing mention. The
# typical queries in tests/test_knowledge.py pin the resulting ranking.
_WEIGHTS = (0.0, 8.0, 4.0, 1.0)
STALE_PENALTY = 0.5
COVERAGE = 2.0   # at most this much for matching every query word in the title or tags
SPECIFIC = 0.25  # per exact platform/language match, so a cuda-cpp note beats an `any` one
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
# Porter stems "vectorize" but not "vectorise"; rewriting -is(e|ation) to -iz on both the indexed
# text and the query lets British and American spellings meet.
_BRITISH = re.compile(r"(?<=\w{3})is(e|ed|es|ing|able|ation|ations)\b", re.IGNORECASE)
# Terms this long also match as prefixes ("mi300" finds "mi300x"); shorter ones ("exp") would
# drag in every word that starts with them.
_PREFIX_MIN = 4
# Glue words carry no topic; dropping them keeps "why" lines and garbage queries meaningful.
_STOP = frozenset("a an and are as at be by for from in is it not of on or the this that to "
                  "with near".split())


@dataclass
class Hit:
    note: Note
    score: float
    stale: bool
    why: str


class KnowledgeIndex:
    """An FTS5 index of notes. Later `add`s of the same id replace earlier ones (user overrides)."""

    def __init__(self, db_path: str | Path = ":memory:"):
        # One connection shared by the threads of a run (the evaluator's callbacks, the operator);
        # the lock serialises them, which costs nothing at this size.
        self.db = sqlite3.connect(str(db_path), check_same_thread=False)
        self._lock = threading.RLock()
        self.errors: list[str] = []  # faults met by add_folder/build, kept for reporting
        self._cache: dict[str, Note] = {}
        self.db.executescript("""
            CREATE TABLE IF NOT EXISTS note (
                rowid INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, text TEXT NOT NULL,
                path TEXT, expires TEXT);
            CREATE TABLE IF NOT EXISTS note_target (
                note_rowid INTEGER NOT NULL, kind TEXT NOT NULL, value TEXT NOT NULL);
            CREATE INDEX IF NOT EXISTS note_target_idx ON note_target(kind, value);
            CREATE VIRTUAL TABLE IF NOT EXISTS note_fts USING fts5(
                id UNINDEXED, title, tags, body, tokenize='porter unicode61 remove_diacritics 2');
        """)

    # ---- building ------------------------------------------------------------------------
    def add(self, note: Note) -> None:
        with self._lock, self.db:
            old = self.db.execute("SELECT rowid FROM note WHERE id = ?", (note.id,)).fetchone()
            if old:
                self._delete(old[0])
            cur = self.db.execute(
                "INSERT INTO note (id, text, path, expires) VALUES (?, ?, ?, ?)",
                (note.id, render_note(note), str(note.path) if note.path else None,
                 note.expires.isoformat() if note.expires else None))
            rowid = cur.lastrowid
            self.db.executemany("INSERT INTO note_target VALUES (?, ?, ?)",
                                [(rowid, "platform", p) for p in note.platforms]
                                + [(rowid, "language", lang) for lang in note.languages])
            tags = " ".join(note.tags + note.platforms + note.languages)
            self.db.execute("INSERT INTO note_fts (rowid, id, title, tags, body) "
                            "VALUES (?, ?, ?, ?, ?)",
                            (rowid, note.id, _fold(note.title), _fold(tags), _fold(note.body)))
        self._cache[note.id] = note

    def _delete(self, rowid: int) -> None:
        self.db.execute("DELETE FROM note WHERE rowid = ?", (rowid,))
        self.db.execute("DELETE FROM note_target WHERE note_rowid = ?", (rowid,))
        self.db.execute("DELETE FROM note_fts WHERE rowid = ?", (rowid,))

    def add_folder(self, folder: str | Path) -> list[str]:
        """Index every *.md in `folder`; invalid notes are returned as one-line errors, not raised.

        Two files with the same id in one folder are a fault (the second is skipped); an id seen
        in an earlier folder is replaced, so a user folder can override a curated note.
        """
        folder = Path(folder)
        if not folder.is_dir():
            raise KnowledgeError(f"{folder}: no such notes folder")
        errors: list[str] = []
        seen: dict[str, Path] = {}
        for path in sorted(folder.glob("*.md")):
            try:
                note = parse_note(path)
            except NoteError as exc:
                errors.append(str(exc))
                continue
            if note.id in seen:
                errors.append(f"{path}: duplicate id {note.id!r}, already used by "
                              f"{seen[note.id].name}")
                continue
            seen[note.id] = path
            self.add(note)
        self.errors.extend(errors)
        return errors

    def build(self, folders: Iterable[str | Path]) -> list[str]:
        errors: list[str] = []
        for folder in folders:
            errors.extend(self.add_folder(folder))
        return errors

    # ---- reading -------------------------------------------------------------------------
    def get(self, note_id: str) -> Note:
        with self._lock:
            return self._get(note_id)

    def _get(self, note_id: str) -> Note:
        if note_id not in self._cache:
            row = self.db.execute("SELECT text, path FROM note WHERE id = ?",
                                  (note_id,)).fetchone()
            if row is None:
                raise KnowledgeError(f"no note with id {note_id!r}; `kernelevolve kb list` shows "
                                     "the ids")
            self._cache[note_id] = self._load(row)
        return self._cache[note_id]

    def all(self) -> list[Note]:
        rows = self.db.execute("SELECT id FROM note ORDER BY id").fetchall()
        return [self.get(r[0]) for r in rows]

    def __len__(self) -> int:
        return self.db.execute("SELECT count(*) FROM note").fetchone()[0]

    def __contains__(self, note_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM note WHERE id = ?", (note_id,)).fetchone() is not None

    @staticmethod
    def _load(row) -> Note:
        note = parse_note(row[0], name=row[1] or "<index>")
        note.path = Path(row[1]) if row[1] else None
        return note

    def search(self, query: str, *, platform: str | None = None, language: str | None = None,
               fingerprint: dict | None = None, k: int = 5,
               today: date | None = None) -> list[Hit]:
        """The k best notes for `query` that apply to the target and have not expired.

        Any text is a valid query: it is split into words, each quoted, so FTS5 syntax typed by
        a user (quotes, parentheses, AND, *, :) is searched for as words, never parsed.
        """
        platform, language = check_target(platform, language)
        terms = query_terms(query)
        if not terms or k <= 0:
            return []
        with self._lock:
            return self._search(terms, platform, language, fingerprint, k, today)

    def _search(self, terms: list[str], platform: str | None, language: str | None,
                fingerprint: dict | None, k: int, today: date | None) -> list[Hit]:
        match = " OR ".join(_term(t) for t in terms)
        sql = ["SELECT n.rowid, n.id, -bm25(note_fts, ?, ?, ?, ?) AS score FROM note_fts "
               "JOIN note n ON n.rowid = note_fts.rowid WHERE note_fts MATCH ? "
               "AND (n.expires IS NULL OR n.expires > ?)"]
        args: list = [*_WEIGHTS, match, (today or date.today()).isoformat()]
        for kind, value in (("platform", platform), ("language", language)):
            if value is not None:
                sql.append("AND n.rowid IN (SELECT note_rowid FROM note_target WHERE kind = ? "
                           "AND value IN (?, 'any'))")
                args += [kind, value]
        rows = self.db.execute(" ".join(sql), args).fetchall()
        anywhere, about, idf = self._term_stats(terms) if rows else ({}, {}, {})
        hits = []
        for rowid, note_id, score in rows:
            note = self._get(note_id)
            words = [t for t in terms if rowid in anywhere[t]]
            # FTS5 clamps the IDF of a word found in over half the notes to ~0, so in a corpus of
            # a few dozen notes "softmax" or "row" adds nothing to bm25(). The bonus keeps such
            # words informative: the IDF-weighted share of query words matched (half for any
            # match, half for a title/tag match), plus a little for a note written for exactly
            # the requested platform or language rather than for `any`.
            score = max(score, 0.0) + COVERAGE * sum(
                idf[t] * ((rowid in anywhere[t]) + (rowid in about[t])) / 2 for t in terms)
            score += SPECIFIC * ((platform in note.platforms) + (language in note.languages))
            # Confidence scales the score between 0.5x and 1x: a shaky learned note still shows
            # up, but below a curated one that matches as well.
            score *= 0.5 + 0.5 * note.confidence
            reasons = staleness(note.provenance, fingerprint) if fingerprint else []
            if reasons:
                score *= STALE_PENALTY
                why = "; ".join(reasons) + ": revalidate"
            else:
                why = "matched: " + ", ".join(words) if words else "matched"
            hits.append(Hit(note=note, score=score, stale=bool(reasons), why=why))
        hits.sort(key=lambda h: (-h.score, h.note.id))
        return hits[:k]

    def _term_stats(self, terms: list[str]) -> tuple[dict, dict, dict]:
        """Per term: the notes it hits anywhere, those it hits in title or tags, and a weight.

        Hits come from FTS5 itself, so stemming and prefixes count as in the ranking. The weight
        is a never-zero IDF (the Lucene form), normalised to sum to 1 over the query.
        """
        anywhere, about, raw = {}, {}, {}
        total = len(self)
        for t in terms:
            anywhere[t] = {r[0] for r in self.db.execute(
                "SELECT rowid FROM note_fts WHERE note_fts MATCH ?", (_term(t),))}
            about[t] = {r[0] for r in self.db.execute(
                "SELECT rowid FROM note_fts WHERE note_fts MATCH ?",
                (f"{{title tags}} : ({_term(t)})",))}
            n = len(anywhere[t])
            raw[t] = math.log(1 + (total - n + 0.5) / (n + 0.5))
        norm = sum(raw.values()) or 1.0
        return anywhere, about, {t: w / norm for t, w in raw.items()}

    def close(self) -> None:
        self.db.close()


def query_terms(query: str) -> list[str]:
    """Lowercase words of the query, deduplicated in order; punctuation and FTS syntax dropped."""
    seen: list[str] = []
    for tok in _TOKEN.findall(_fold(query).lower()):
        if tok not in seen and tok not in _STOP:
            seen.append(tok)
    return seen[:64]  # a pasted compiler log should not become a 10,000-term query


def _fold(text: str) -> str:
    return _BRITISH.sub(lambda m: "iz" + m.group(1), text)


def _term(term: str) -> str:
    """One query word as FTS5 syntax: quoted, so it can never be read as an operator."""
    return f'"{term}" OR "{term}"*' if len(term) >= _PREFIX_MIN else f'"{term}"'


def check_target(platform: str | None,
                 language: str | None) -> tuple[str | None, str | None]:
    """Validate target filters ("any" means no filter) and return them normalised.

    A misspelt filter is an error: `--platform cdua` finding nothing would look like no notes.
    """
    for value, allowed, what in ((platform, platform_tags(), "platform"),
                                 (language, language_tags(), "language")):
        if value is not None and value not in allowed:
            raise KnowledgeError(f"unknown {what} {value!r}; expected one of "
                                 f"{', '.join(a for a in allowed if a != 'any')}")
    return (None if platform == "any" else platform, None if language == "any" else language)


def user_notes_dir(workspace: str | Path) -> Path:
    """Where `kernelevolve kb add` puts a user's notes."""
    return Path(workspace) / "knowledge" / "notes"


def learned_notes_dir(workspace: str | Path) -> Path:
    """Where notes learned by runs are written."""
    return Path(workspace) / "knowledge" / "learned"


def default_index(extra_folders: Iterable[str | Path] = (),
                  learned_folder: str | Path | None = None) -> KnowledgeIndex:
    """Curated notes, then user folders, then learned notes (each may override earlier ids).

    A missing learned folder just means nothing was learned yet; a missing user folder is an
    error (a typo in `--notes` should not silently search less). Faults are in `index.errors`.
    """
    index = KnowledgeIndex()
    index.build([CURATED_DIR, *extra_folders])
    if learned_folder is not None and Path(learned_folder).is_dir():
        index.add_folder(learned_folder)
    return index


def workspace_index(workspace: str | Path = ".kernelevolve",
                    extra_folders: Iterable[str | Path] = ()) -> KnowledgeIndex:
    """The index a run or the CLI uses: curated + the workspace's own notes + extras + learned."""
    user = user_notes_dir(workspace)
    folders = ([user] if user.is_dir() else []) + list(extra_folders)
    return default_index(folders, learned_folder=learned_notes_dir(workspace))
