"""Every corpus candidate goes through the real harness; each must end where its header says.

Layers are proven one at a time: `runtime` turns the static rules off, `native` also the
compiled-library inspection (only the syscall filter and the sandbox stand), `contained` also
the syscall filter (only the sandbox's mounts and namespaces, Landlock and the driver's
robustness stand). After every run, nothing an escape attempt tried to leave may exist.

An entry headed `# timing: short` is timed to the minimums (TimingPolicy's `tight` off): its
verdicts, every layer's, are decided by the gates, the sandbox or the filter, never by how long
its timing runs (on a busy machine the evaluator's policy times each case on, up to 1 s, to
narrow an interval no assertion reads). Entries that attack the timing, count calls or act on
the outputs of timed calls keep the evaluator's policy.
"""
from __future__ import annotations

import json
import platform
import re
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import CORPUS, example
from kernelevolve import knobs
from kernelevolve.harness.protocol.timing import TimingPolicy

_HEADER = re.compile(r"^# (problem|expect|reason|runtime|runtime_reason|native|native_reason|"
                     r"contained|contained_reason|arch|timing): (.*)$")
_LAYERS = {"runtime": dict(static_rules=False),
           "native": dict(static_rules=False, inspect_libraries=False),
           "contained": dict(static_rules=False, inspect_libraries=False, syscall_filter=False)}


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
SHORT = TimingPolicy(min_reps=5, min_time_s=0.05, max_time_s=0.5, tight=None)


def problem_path(value: str) -> Path:
    """`softmax` names an example; `problems/x.py` is a path under tests/."""
    return CORPUS.parent / value if value.endswith(".py") else example(value)


def _check(result, stage: str, reason: str | None, name: str, secret: str | None = None) -> None:
    if secret is not None:  # nothing a planted secret file holds may come back, in any field
        assert secret not in json.dumps(result.to_dict()), f"{name}: the planted secret leaked"
    stages = stage.split("|")
    assert result.stage in stages, f"{name}: expected stage {stage}, got {result.stage}: {result.reason}"
    assert result.accepted == (result.stage == "accepted"), name
    if reason:
        assert any(r.strip().lower() in result.reason.lower() for r in reason.split("|")), \
            f"{name}: reason lacks {reason!r}: {result.reason}"
    if result.stage != "accepted":
        assert result.fitness == 0.0


def escape_traces(stem: str) -> list[Path]:
    """Files an escape attempt of corpus entry `stem` would leave if it got out."""
    found = [p for p in (Path("/tmp") / f"kernelevolve_escape_{stem}.txt",
                         Path.home() / f"kernelevolve_escape_{stem}.txt") if p.exists()]
    return found + sorted(knobs.cache_dir().rglob(f"kernelevolve_escape_{stem}*"))


@pytest.mark.parametrize("path", CANDIDATES, ids=[p.stem for p in CANDIDATES])
def test_corpus_candidate(evaluator, planted_secrets, path):
    fields = header(path)
    if fields.get("arch", platform.machine()) != platform.machine():
        pytest.skip(f"{path.name} is written for {fields['arch']}")
    base = evaluator.options
    if fields.get("timing") == "short":
        base = replace(base, timing=SHORT)
    result = evaluator.evaluate(problem_path(fields["problem"]), path, options=base)
    _check(result, fields["expect"], fields.get("reason"), path.name, planted_secrets)
    for layer, off in _LAYERS.items():
        if layer not in fields:
            continue
        opts = replace(base, **off)
        result = evaluator.evaluate(problem_path(fields["problem"]), path, options=opts)
        _check(result, fields[layer], fields.get(f"{layer}_reason"), f"{path.name} ({layer})",
               planted_secrets)
        # Escape attempts that ran must have left no trace outside the sandbox.
        assert not escape_traces(path.stem), f"{path.name} ({layer}) got out: {escape_traces(path.stem)}"


def test_pool_usable_after_corpus(evaluator):
    """After crashes, hangs, exits and memory hogs, the same pool still accepts a good kernel."""
    result = evaluator.evaluate(problem_path("problems/softmax_small.py"),
                                CORPUS / "good_softmax_cpp.py")
    assert result.accepted, result.reason
    assert all(w.alive for w in evaluator.pool.workers)
