"""Every corpus candidate goes through the real harness; each must end where its header says."""
from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import CORPUS, example

_HEADER = re.compile(r"^# (problem|expect|reason|runtime|runtime_reason): (.*)$")


def header(path: Path) -> dict[str, str]:
    fields = {}
    for line in path.read_text().splitlines():
        m = _HEADER.match(line)
        if not m:
            break
        fields[m.group(1)] = m.group(2).strip()
    assert {"problem", "expect"} <= set(fields), f"{path.name}: corpus header incomplete"
    return fields


CANDIDATES = sorted(p for p in CORPUS.glob("*.py"))


def problem_path(value: str) -> Path:
    """`softmax` names an example; `problems/x.py` is a path under tests/."""
    return CORPUS.parent / value if value.endswith(".py") else example(value)


def _check(result, stage: str, reason: str | None, name: str) -> None:
    stages = stage.split("|")
    assert result.stage in stages, f"{name}: expected stage {stage}, got {result.stage}: {result.reason}"
    assert result.accepted == (result.stage == "accepted"), name
    if reason:
        assert any(r.strip().lower() in result.reason.lower() for r in reason.split("|")), \
            f"{name}: reason lacks {reason!r}: {result.reason}"
    if result.stage != "accepted":
        assert result.fitness == 0.0


@pytest.mark.parametrize("path", CANDIDATES, ids=[p.stem for p in CANDIDATES])
def test_corpus_candidate(evaluator, path):
    fields = header(path)
    result = evaluator.evaluate(problem_path(fields["problem"]), path)
    _check(result, fields["expect"], fields.get("reason"), path.name)
    if "runtime" in fields:
        opts = replace(evaluator.options, static_rules=False)
        result = evaluator.evaluate(problem_path(fields["problem"]), path, options=opts)
        _check(result, fields["runtime"], fields.get("runtime_reason"), path.name + " (runtime)")
        # Escape attempts that ran (static rules off) must have left no trace outside the sandbox.
        for target in (Path("/tmp") / f"kernelevolve_escape_{path.stem}.txt",
                       Path.home() / f"kernelevolve_escape_{path.stem}.txt"):
            assert not target.exists(), f"{path.name} wrote {target} from inside the sandbox"


def test_pool_usable_after_corpus(evaluator):
    """After crashes, hangs, exits and memory hogs, the same pool still accepts a good kernel."""
    result = evaluator.evaluate(example("softmax"), CORPUS / "good_softmax_cpp.py")
    assert result.accepted, result.reason
    assert all(w.alive for w in evaluator.pool.workers)
