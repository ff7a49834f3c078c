"""The static rules on whole files: every example and good corpus candidate passes; every bad
corpus file meant for the static gate is flagged with its `# reason:`; every bad file meant for
a later gate gets past these rules (or it would prove nothing about that gate)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import CORPUS, EXAMPLES
from kernelevolve.harness.gates.static import defines_model_new
from kernelevolve.harness.gates.static_rules import find_violations

EXAMPLE_CANDIDATES = sorted(EXAMPLES.glob("*/candidate_*.py"))
GOOD_CORPUS = sorted(CORPUS.glob("good_*.py"))
BAD_CORPUS = sorted(CORPUS.glob("bad_*.py"))


def _header(path: Path) -> dict[str, str]:
    from test_corpus import header

    return header(path)


def _stages(path: Path) -> set[str]:
    """The `# expect:` stages (`run|correctness` allows either)."""
    expect = _header(path).get("expect", "")
    return {s.strip() for s in expect.split("|") if s.strip()}


def _file_findings(path: Path) -> list[str]:
    source = path.read_text()
    return find_violations(ast.parse(source, filename=str(path)), source, path.name)


def test_examples_and_good_corpus_found():
    assert len(EXAMPLE_CANDIDATES) >= 6 and GOOD_CORPUS


LEGIT = EXAMPLE_CANDIDATES + GOOD_CORPUS


@pytest.mark.parametrize("path", LEGIT, ids=[f"{p.parent.name}/{p.name}" for p in LEGIT])
def test_legitimate_candidates_pass(path):
    assert _file_findings(path) == []


def _static_rule_cases() -> list[Path]:
    """bad_* files that must stop at the static gate because of these rules (not because they do
    not parse or lack ModelNew, which static.py reports before the rules run)."""
    cases = []
    for path in BAD_CORPUS:
        if _stages(path) != {"static"}:
            continue
        try:
            tree = ast.parse(path.read_text())
        except SyntaxError:
            continue
        if defines_model_new(tree):
            cases.append(path)
    return cases


STATIC_BAD = _static_rule_cases()


@pytest.mark.parametrize("path", STATIC_BAD, ids=[p.name for p in STATIC_BAD])
def test_static_bad_corpus_rejected_with_reason(path):
    found = _file_findings(path)
    reasons = [r.strip().lower() for r in _header(path).get("reason", "").split("|")]
    assert found, f"{path.name}: no finding"
    assert any(r in f.lower() for r in reasons for f in found), \
        f"{path.name}: lacks {reasons!r}: {found}"


OTHER_BAD = [p for p in BAD_CORPUS if _stages(p) and "static" not in _stages(p)]


@pytest.mark.parametrize("path", OTHER_BAD, ids=[p.name for p in OTHER_BAD])
def test_runtime_bad_corpus_passes_static_rules(path):
    """A corpus file meant to be caught later (run, correctness, ...) must get past these rules,
    or it would stop at the static gate and prove nothing about the later defence."""
    assert _file_findings(path) == []


SYNTH_SAMPLE = [EXAMPLES / "softmax" / "problem.py",
                EXAMPLES.parent / "benchmarks" / "synth_problems" / "layernorm_gelu.py"]


@pytest.mark.slow
@pytest.mark.parametrize("language", ["cpp", "triton"])
@pytest.mark.parametrize("problem", SYNTH_SAMPLE, ids=[p.parent.name for p in SYNTH_SAMPLE])
def test_synthesized_candidates_pass(problem, language):
    """The synthesizer's drafts pass the rules as written (test_synth_drafts.py runs more of them
    through the whole harness)."""
    from kernelevolve.synth import synthesize

    source, _ = synthesize(str(problem), language)
    assert find_violations(ast.parse(source), source, "draft.py") == []
