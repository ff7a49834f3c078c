"""Knowledge that fits the prompt: whole sections of notes, chosen for the target and the problem.

A note's body is a sequence of sections: an untitled lead, then paragraphs that open with a bold
heading (`**Vector loads.** ...`), each running to the next heading. A section is the unit a
prompt takes or leaves, so nothing is ever cut mid-sentence.

A section is dropped when it is written for something this run is not:
- another language: its heading names only other languages (`**Triton.**` in a C++ run), or its
  text is dominated by another language's markers (`tl.load`, `__global__`, `#pragma omp`);
- low precision in a problem that has none: its heading is about fp16/bf16/fp8 (the accumulation
  note's "low-precision storage" rule in an fp32 problem).
The rest are ranked by the note's retrieval score and how many query words the section holds,
and taken whole, best first, until the character budget is spent; they are printed in the note's
own order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

_HEADING = re.compile(r"^\*\*(.+?)\*\*")
_WORD = re.compile(r"[a-z0-9_]+")


def _lang_words() -> dict[str, tuple[str, ...]]:
    """Words that say which language a heading or text is about (each Language's
    knowledge_patterns)."""
    from kernelevolve.plugins import languages

    return {lang.name: lang.knowledge_patterns for lang in languages() if lang.knowledge_patterns}

_LOW_PRECISION = re.compile(r"\b(fp16|bf16|fp8|half|low-precision|float16|bfloat16)\b", re.I)
LOW_DTYPES = frozenset({"float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "half"})


@dataclass(frozen=True)
class Section:
    note_id: str
    title: str          # the note's title
    index: int          # position in the note (0: the lead)
    heading: str        # the bold heading, "" for the lead
    text: str

    @property
    def key(self) -> str:
        return f"{self.note_id}#{self.index}"


def split(note: Any) -> list[Section]:
    """The note's sections, in order (paragraphs are kept intact)."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", note.body.strip()) if p.strip()]
    groups: list[tuple[str, list[str]]] = []
    for para in paragraphs:
        head = _HEADING.match(para)
        if head or not groups:
            groups.append((head.group(1).strip().rstrip(".") if head else "", [para]))
        else:
            groups[-1][1].append(para)
    return [Section(note.id, note.title, i, heading, "\n\n".join(paras))
            for i, (heading, paras) in enumerate(groups)]


def _languages_named(text: str) -> dict[str, int]:
    low = text.lower()
    return {lang: sum(len(re.findall(p, low)) for p in pats) for lang, pats in _lang_words().items()}


def off_target(section: Section, language: str, dtypes: Iterable[str]) -> str | None:
    """Why this section does not apply to the run, or None when it does."""
    if section.heading:
        named = {k for k, v in _languages_named(section.heading).items() if v}
        if named and language not in named:
            return f"about {', '.join(sorted(named))}"
    counts = _languages_named(section.text)
    own = counts.get(language, 0)
    other = max((v for k, v in counts.items() if k != language), default=0)
    if other >= 3 and own == 0:
        return "written for another language"
    low = {d.removeprefix("torch.") for d in dtypes} & LOW_DTYPES
    if not low and _LOW_PRECISION.search(section.heading or ""):
        return "about low-precision dtypes the problem does not use"
    return None


def relevance(section: Section, terms: Iterable[str]) -> float:
    words = set(_WORD.findall(section.text.lower()))
    head = set(_WORD.findall(section.heading.lower()))
    return sum((t in words) + 2 * (t in head) for t in terms)


def choose(hits: list[Any], *, language: str, dtypes: Iterable[str], terms: list[str],
           budget_chars: int, shown: set[str] = frozenset()) -> tuple[list[Section], list[Any]]:
    """(sections to print whole, hits whose every fitting section was shown earlier).

    `shown` holds the keys of sections already given in this run: those are not repeated; a
    note all of whose fitting sections were shown is returned in the second list, to be named
    by title only.
    """
    dtypes = list(dtypes)
    ranked: list[tuple[float, int, Section]] = []
    seen_only: list[Any] = []
    for rank, hit in enumerate(hits):
        fitting = [s for s in split(hit.note) if off_target(s, language, dtypes) is None]
        fresh = [s for s in fitting if s.key not in shown]
        if fitting and not fresh:
            seen_only.append(hit)
        for s in fresh:
            score = getattr(hit, "score", 1.0) * (1.0 + relevance(s, terms)) + (s.index == 0)
            ranked.append((score, rank, s))
    ranked.sort(key=lambda r: (-r[0], r[1], r[2].index))
    taken, used = [], 0
    for _, _, s in ranked:
        if used + len(s.text) > budget_chars:
            continue
        taken.append(s)
        used += len(s.text)
    order = {h.note.id: i for i, h in enumerate(hits)}
    taken.sort(key=lambda s: (order[s.note_id], s.index))
    return taken, seen_only
