"""Evaluations timed to the minimums, for tests whose subject is a verdict that does not depend
on how long timing runs: a synthesized draft is accepted (compiled, correct on every case,
integrity-checked, timed), whatever its speed.

The session evaluator's policy (tests/conftest.py) times on, up to 1 s a case, while a case's
interval is wider than 1.5, so that the examples' and the corpus's measured figures hold still
beside a busy neighbour; a draft's test reads no figure, and under load most of its cases timed
to that cap. Every stage still runs; only the timing loop stops at its minimums (five samples,
0.05 s, at most 0.5 s). tests/test_corpus.py times its '# timing: short' entries the same way.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kernelevolve.harness.protocol.timing import TimingPolicy

SHORT = TimingPolicy(min_reps=5, min_time_s=0.05, max_time_s=0.5, tight=None)


def evaluate_short(evaluator, problem: str | Path, candidate: str | Path, **options):
    """`evaluator.evaluate` with its own options (and `options` on top) but the SHORT timing."""
    opts = replace(evaluator.options, timing=SHORT, **options)
    return evaluator.evaluate(problem, candidate, options=opts)
