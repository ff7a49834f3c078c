"""The agent's `time` tool: the candidate against a base source, paired, within a time budget.

Each evaluation of the harness already times its candidate next to eager PyTorch, batch by
batch in alternating order (harness/worker/measure.py), so its speedup over eager is paired and its
bootstrap interval (`speedup_ci`) honest. Comparing two sources is then the ratio of their
eager-paired speedups: the base (the last candidate that passed `time` in this conversation, or
the parent; at a first draft nothing, and eager alone is the baseline) and the candidate are
evaluated in turn, candidate-base-base-candidate (a linear drift of the machine over the call
cancels), each with the same timing settings (TIMING). The ratio's interval combines each
side's intervals in log space (normal approximation, the sides independent; widened to the
spread between rounds when that is larger).

Bounded: the candidate's first evaluation always runs; each later one starts only when the
time so far plus the longest evaluation yet stays within TIME_BUDGET_S. A case whose evaluation
takes more than half the budget (the gates of a large case can take minutes) is therefore not
paired: the candidate is compared with the base's earlier figure (the parent's evaluation, or
its own `time`), and the result says so.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

TIME_BUDGET_S = 30.0   # per `time` call (CPU): no evaluation starts that would pass it
ROUNDS = 2             # candidate then base, base then candidate
# Each evaluation times its case for about 2 s (3 s at most) with as many batches as fit:
# hundreds for a kernel of microseconds, at least 3 for one of a second.
TIMING = {"warmup": 3, "min_reps": 20, "max_reps": 1_000_000, "min_time_s": 2.0,
          "max_time_s": 3.0}
Z95 = 1.959964

Evaluate = Callable[..., Awaitable[dict[str, Any]]]


@dataclass
class Side:
    """One source's evaluations in this call: (speedup over eager, its interval) per round."""

    label: str
    runs: list[tuple[float, tuple[float, float]]] = field(default_factory=list)
    earlier: bool = False  # runs are the base's earlier figure, not timed in this call
    batches: int = 0
    calls: int = 0
    last: dict[str, Any] | None = None  # the last evaluation's result
    failed: dict[str, Any] | None = None  # a result that was not timed (rejected, or an error)

    def add(self, result: dict[str, Any], case: str) -> bool:
        self.last = result
        row = next((c for c in result.get("cases") or [] if c.get("name") == case), None)
        if not result.get("measured") or row is None or not row.get("speedup_ci"):
            self.failed = result
            return False
        self.runs.append((float(row["speedup"]), tuple(row["speedup_ci"])))
        self.batches += int((row.get("cand_timing") or {}).get("n") or 0)
        self.calls += int((row.get("profile") or {}).get("calls") or 0)
        return True

    def log_estimate(self) -> tuple[float, float]:
        """(mean log speedup, its standard error)."""
        logs = [math.log(s) for s, _ in self.runs]
        k = len(logs)
        within = math.sqrt(sum(((math.log(hi) - math.log(lo)) / (2 * Z95)) ** 2
                               for _, (lo, hi) in self.runs)) / k
        mean = sum(logs) / k
        between = (math.sqrt(sum((x - mean) ** 2 for x in logs) / (k - 1) / k) if k > 1
                   else 0.0)
        return mean, max(within, between)

    def speedup(self) -> tuple[float, float, float]:
        mean, se = self.log_estimate()
        return math.exp(mean), math.exp(mean - Z95 * se), math.exp(mean + Z95 * se)


@dataclass
class Paired:
    """What one `time` call measured."""

    cand: Side
    base: Side | None
    seconds: float
    evaluations: int

    def ratio(self) -> tuple[float, float, float] | None:
        """Candidate over base: (ratio, lo, hi), when both have figures (the base's may be
        earlier ones: `base.earlier`)."""
        if self.base is None or not self.base.runs or not self.cand.runs:
            return None
        (mc, sc), (mb, sb) = self.cand.log_estimate(), self.base.log_estimate()
        se = math.hypot(sc, sb)
        return math.exp(mc - mb), math.exp(mc - mb - Z95 * se), math.exp(mc - mb + Z95 * se)


async def paired_time(evaluate: Evaluate, source: str, case: str,
                      base: tuple[str, str] | None,
                      earlier: tuple[float, tuple[float, float]] | None = None) -> Paired:
    """Time `source` on `case` against `base` ((label, source)) or, without one, eager alone.
    `earlier`: the base's speedup over eager on this case and its interval, from before, used
    when the budget leaves no time to evaluate the base again."""
    start = time.monotonic()
    cand = Side("candidate")
    other = Side(base[0]) if base is not None else None
    order = [cand] if other is None else [cand, other] + [other, cand] * (ROUNDS - 1)
    evaluations, longest = 0, 0.0
    for i, side in enumerate(order):
        if side is other and other.failed is not None:
            continue  # the base could not be timed: the candidate against eager alone
        if i and time.monotonic() - start + longest > TIME_BUDGET_S:
            break
        t0 = time.monotonic()
        text = source if side is cand else base[1]
        result = await evaluate(text, "time", (case,), None, timing=dict(TIMING))
        longest = max(longest, time.monotonic() - t0)
        evaluations += 1
        if not side.add(result, case) and side is cand:
            break  # the candidate's verdict is decided
    if other is not None and not other.runs and other.failed is None and earlier is not None:
        other = Side(other.label, runs=[(earlier[0], tuple(earlier[1]))], earlier=True)
    return Paired(cand, other, time.monotonic() - start, evaluations)


def paired_text(p: Paired, case: str) -> list[str]:
    """The lines on speed that follow the verdict in the `time` tool's result."""
    lines = []
    if p.cand.runs:
        s, lo, hi = p.cand.speedup()
        lines.append(f"case {case}: {s:.3f}x over eager [{lo:.3f}-{hi:.3f}] "
                     f"(95% interval; {len(p.cand.runs)} evaluation(s))")
    ratio = p.ratio()
    if ratio is not None:
        r, lo, hi = ratio
        bs, blo, bhi = p.base.speedup()
        verdict = ("faster" if lo > 1 else "slower" if hi < 1 else
                   "no difference resolved (the interval contains 1)")
        when = (" (its earlier figure: an evaluation of this case takes longer than half "
                f"the {TIME_BUDGET_S:.0f} s budget, so it was not timed again; not paired)"
                if p.base.earlier else "")
        lines += [f"{p.base.label}: {bs:.3f}x over eager [{blo:.3f}-{bhi:.3f}]{when}",
                  f"candidate / {p.base.label}: {r:.3f}x [{lo:.3f}-{hi:.3f}]: {verdict}"]
    elif p.base is not None and p.base.failed is not None:
        stage = p.base.failed.get("stage") or "error"
        why = str(p.base.failed.get("reason") or p.base.failed.get("error") or "")
        lines.append(f"{p.base.label} could not be timed this time (stage {stage}: "
                     f"{_first(why)}); the candidate is compared with eager only")
    elif p.base is not None and not p.base.runs and p.cand.runs:
        lines.append(f"{p.base.label} was not timed again (an evaluation of this case takes "
                     f"longer than half the {TIME_BUDGET_S:.0f} s budget) and has no earlier "
                     "figure for it: the candidate is compared with eager only")
    elif p.base is None and p.cand.runs:
        lines.append("no earlier candidate to compare with: the baseline is eager alone")
    sides = [p.cand] + ([p.base] if p.base is not None and p.base.runs
                        and not p.base.earlier else [])
    counts = "; ".join(f"{s.label} {s.batches} batches ({s.calls} calls)" for s in sides)
    if p.cand.runs:
        lines.append(f"measured: {counts}, each batch paired with one of eager; "
                     f"{p.evaluations} evaluation(s) in {p.seconds:.1f} s")
    return lines


def _first(text: str) -> str:
    from kernelevolve.harness.protocol.text import inline

    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return inline(line[:160])
