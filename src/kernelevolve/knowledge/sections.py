"""Knowledge that fits the prompt: whole sections of notes, chosen for the target and the problem.

A note's body is a sequence of sections: an untitled lead, then paragraphs that open with a bold
heading (`**Vector loads.** ...`), each running to the next heading. A section is the unit a
prompt takes or leaves, so nothing is ever cut mid-sentence.

A section is dropped when it is written for something this run is not:
- its `applies` (the note's, and the section's own `<!-- applies: ... -->`; knowledge/applies.py)
  names ops, dtypes, platforms or languages the problem does not have (a bf16 rule in an fp32
  problem, a softmax rule in a convolution);
- another language: its heading names only other languages (`**Triton.**` in a C++ run), or its
  text is dominated by another language's markers (`tl.load`, `__global__`, `#pragma omp`);
- low precision in a problem that has none: its heading is about fp16/bf16/fp8.
The rest are ranked: sections whose `applies` names the problem's ops or dtypes first, then by
the note's retrieval score and how many of the problem's words (op names and classes, dtypes) the
section holds. Each retrieved note's best section is taken first (in retrieval order), then the
rest best first, whole, until the character budget is spent; they are printed in the note's own
order. Every prompt chooses afresh: a stateless model sees each prompt alone.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from kernelevolve.knowledge.applies import ProblemFacts, mismatch, section_applies, targeted

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
    text: str           # without its `applies` comments
    applies: tuple[tuple[str, tuple[str, ...]], ...] = ()  # the note's and its own

    @property
    def where(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self.applies}

    @property
    def key(self) -> str:
        return f"{self.note_id}#{self.index}"


def split(note: Any) -> list[Section]:
    """The note's sections, in order (paragraphs are kept intact)."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", note.body.strip()) if p.strip()]
    groups: list[tuple[str, list[str], dict[str, list[str]]]] = []
    pending: dict[str, list[str]] = {}  # a comment standing alone: for the section after it
    for para in paragraphs:
        try:
            own, para = section_applies(para)
        except ValueError:  # a note built in code, never validated: the comment is ignored
            own, para = {}, para
        if not para:
            pending = own
            continue
        own, pending = {**pending, **own}, {}
        head = _HEADING.match(para)
        if head or not groups:
            groups.append((head.group(1).strip().rstrip(".") if head else "", [para], {}))
        else:
            groups[-1][1].append(para)
        for key, values in own.items():
            groups[-1][2].setdefault(key, []).extend(values)
    base = dict(getattr(note, "applies", None) or {})
    return [Section(note.id, note.title, i, heading, "\n\n".join(paras),
                    tuple((k, tuple(v)) for k, v in {**base, **own}.items()))
            for i, (heading, paras, own) in enumerate(groups)]


def _languages_named(text: str) -> dict[str, int]:
    low = text.lower()
    return {lang: sum(len(re.findall(p, low)) for p in pats) for lang, pats in _lang_words().items()}


def off_target(section: Section, language: str, dtypes: Iterable[str],
               facts: ProblemFacts | None = None) -> str | None:
    """Why this section does not apply to the run, or None when it does."""
    if facts is not None and section.applies:
        why = mismatch(section.where, facts)
        if why:
            return why
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


TARGETED = 100.0  # a section whose `applies` names the problem's ops or dtypes ranks first


def choose(hits: list[Any], *, facts: ProblemFacts, terms: list[str],
           budget_chars: int) -> list[Section]:
    """The sections to print whole, for this problem and target, within the budget."""
    dtypes = list(facts.dtypes)
    ranked: list[tuple[float, int, Section]] = []
    for rank, hit in enumerate(hits):
        for s in split(hit.note):
            if off_target(s, facts.language, dtypes, facts) is not None:
                continue
            score = getattr(hit, "score", 1.0) * (1.0 + relevance(s, terms)) + (s.index == 0)
            score += TARGETED * targeted(s.where)
            ranked.append((score, rank, s))
    ranked.sort(key=lambda r: (-r[0], r[1], r[2].index))
    # First each retrieved note's best section (a note the index found for this problem, a
    # learned one included, is never crowded out by another note's tagged sections), then the
    # rest by score.
    firsts = {}
    for item in ranked:
        firsts.setdefault(item[1], item)
    taken, used = [], 0
    for _, _, s in sorted(firsts.values(), key=lambda r: r[1]) + ranked:
        if s in taken or used + len(s.text) > budget_chars:
            continue
        taken.append(s)
        used += len(s.text)
    order = {h.note.id: i for i, h in enumerate(hits)}
    taken.sort(key=lambda s: (order[s.note_id], s.index))
    return taken
