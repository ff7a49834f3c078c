"""Turn an LLM reply into a candidate source: a whole module, or SEARCH/REPLACE edits.

Forgiving of prose around the code. A reply that yields no usable candidate raises
`GenerationFailure` with a reason; the engine counts those in the funnel's `generation` stage.
Syntax errors are *not* generation failures: such a module goes to the static gate, whose
reason (with the line and a caret) is more useful in the next prompt.
"""
from __future__ import annotations

import re

from kernelevolve.harness.protocol.text import clean

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.S)
_EDIT = re.compile(r"<{5,}\s*SEARCH\s*\n(.*?)\n?={5,}\s*\n(.*?)\n?>{5,}\s*REPLACE", re.S)


class GenerationFailure(ValueError):
    """The reply contains no usable candidate; the message says why, for the funnel."""


def parse_reply(reply: str, parent_source: str | None) -> tuple[str, str]:
    """Return (source, rationale)."""
    if not reply or not reply.strip():
        raise GenerationFailure("empty reply")
    edits = _EDIT.findall(reply)
    if edits:
        if parent_source is None:
            raise GenerationFailure("SEARCH/REPLACE edits in a draft (there is no parent to edit)")
        return apply_edits(parent_source, edits), _rationale(reply)
    blocks = [(lang.lower(), body) for lang, body in _FENCE.findall(reply)]
    code = [body for lang, body in blocks if lang in ("", "python", "py", "python3")]
    with_model = [body for body in code if "ModelNew" in body]
    if with_model:
        return with_model[-1].strip() + "\n", _rationale(reply)
    if code:
        raise GenerationFailure("the code block defines no ModelNew (a fragment, not a module)")
    if blocks:
        langs = ", ".join(sorted({lang or "plain" for lang, _ in blocks}))
        raise GenerationFailure(f"no Python code block (found only: {langs})")
    if "class ModelNew" in reply:  # an unfenced module: take from the first import
        start = min((m.start() for m in re.finditer(r"^(import|from) ", reply, re.M)),
                    default=reply.index("class ModelNew"))
        return reply[start:].strip() + "\n", ""
    raise GenerationFailure("no code in the reply (prose only)")


def apply_edits(source: str, edits: list[tuple[str, str]]) -> str:
    for i, (search, replace) in enumerate(edits, start=1):
        if search in source:
            source = source.replace(search, replace, 1)
            continue
        # Forgive trailing whitespace and indentation drift of the whole block.
        pattern = r"\n".join(r"[ \t]*" + re.escape(line.strip()) + r"[ \t]*"
                             for line in search.strip("\n").splitlines())
        match = re.search(pattern, source)
        if not match:
            first = _first(search)
            raise GenerationFailure(f"SEARCH block {i} of {len(edits)} does not match the parent "
                                    f"(first line: {first!r})")
        source = source[:match.start()] + replace + source[match.end():]
    return source


def _first(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:80]


def _rationale(reply: str) -> str:
    """The prose before the first code, as the node's rationale: shown on terminals, in reports
    and in later prompts, so made inert like a candidate's text (harness/protocol/text.py)."""
    head = clean(re.split(r"```|<{5,}", reply, maxsplit=1)[0].strip())
    first, _, rest = head.partition("\n")
    if re.match(r"^\W*change\W*:", first, re.I):  # the one-line summary stays a line of its own
        return (" ".join(first.split())[:160] + "\n" + " ".join(rest.split())).strip()[:400]
    return " ".join(head.split())[:400]
