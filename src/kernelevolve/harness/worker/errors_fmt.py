"""Errors as prompt-ready text: the candidate's own frames with source line and caret, the
harness's and torch's frames stripped, then the exception line."""
from __future__ import annotations

import os
import traceback

_MAX_CHARS = 2000


def format_exception(exc: BaseException, candidate_path: str) -> str:
    te = traceback.TracebackException.from_exception(exc, capture_locals=False)
    target = os.path.realpath(candidate_path)
    frames = [f for f in te.stack if os.path.realpath(f.filename) == target]
    lines: list[str] = []
    if frames:
        name = os.path.basename(candidate_path)
        for line in traceback.StackSummary.from_list(frames).format():
            lines.append(line.replace(f'File "{frames[0].filename}"', f'File "{name}"'))
    lines.extend(te.format_exception_only())
    text = "".join(lines).rstrip()
    if len(text) > _MAX_CHARS:
        text = text[:_MAX_CHARS // 2] + "\n  ...\n" + text[-_MAX_CHARS // 2:]
    return text
