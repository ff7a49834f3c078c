"""The timing protocol, worker side, and the statistics over its samples.

Reference and candidate are timed in the same process, interleaved (alternating which goes
first, to cancel drift), after warm-up, on rotating input sets (so caching an output for one
input does not pay), until both a minimum count and a minimum time are reached.

Noise against change (the rules the history table and every other "did it get worse?" judgement
use, decided from 249 timed cases of benchmark runs on five problems, cpu/cpp on a shared 2-core
machine: quiet runs show an IQR of 2-10% of the median and a case interval hi/lo of 1.04-1.2;
runs beside busy neighbours show IQRs of 30-160% and intervals of 1.5-4.3; the two measures
agree, correlation 0.97):

- `separated(a, b)`: interval a lies wholly below interval b. Two 95% intervals that overlap are
  not told apart; a REGRESSED verdict needs them separated.
- `clearly_below(a, a_ci, b, b_ci)`: the same on figures that may lack an interval (old stores):
  without both intervals, a must be more than REL_MARGIN (10%) below b. 10% is about twice the
  half-width of a quiet run's weighted interval (median hi/lo 1.08).
- `case_noise(case)`: a case is noisy when its speedup interval's hi/lo exceeds NOISY_WIDTH (1.5,
  the noisiest 18% of the stored cases) or either side's IQR exceeds NOISY_SPREAD (50%) of its
  median. The factor returned (hi/lo, else the wider q3/q1) is the size of a difference on that
  case that is still noise: a case timed 7x slower once, code unchanged, shows a factor near 7.

How long to time (`TimingPolicy.tight`, from the same figures): TIGHT = 1.2 is the top of a
quiet run's case interval (1.04-1.2), so a quiet machine still stops at the minimums and a good
`eval` stays as fast idle, while a busy one (1.5-4.3 at the minimums) is timed on: an interval's
log-width shrinks about as 1/sqrt(samples), so ten times the samples bring 1.5 to about 1.14 and
4.3 to about 1.6. It is under the width the outcome warns at (report/timing_notes.py
WIDE_INTERVAL, about 1.28), so a case that met it is never the one warned about. The cap is the
policy's max_time_s: 3 s a case for `eval` (EVAL_TIMING; about ten times its 0.3 s minimum),
6 s for the final re-measurement (config.py final_timing). The search's own evaluations have no
`tight`: their figures only steer (which parent next, which finalists), the finalists are
re-measured with it, and a search timed to the cap under load would evaluate fewer candidates.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from kernelevolve.types import TimingStats


REL_MARGIN = 0.10    # without intervals, a figure this much lower (relative) is a real change
NOISY_WIDTH = 1.5    # a case's speedup interval wider than this factor (hi/lo) is noisy
NOISY_SPREAD = 0.5   # so is a side whose IQR exceeds this fraction of its median


@dataclass(frozen=True)
class TimingPolicy:
    warmup: int = 3            # calls per function before any sample is kept
    min_reps: int = 15         # samples per function, at least
    max_reps: int = 1000       # beyond this a median moves less than the machine's noise
    min_time_s: float = 0.3    # wall time spent timing a case, at least
    max_time_s: float = 3.0    # wall budget per case; stops early even if min_time not reached
    # Past min_reps and min_time, keep timing until the case's 95% speedup interval is at most
    # this wide (hi/lo), or max_time_s is spent: a busy machine is measured longer, a quiet one
    # stops at the minimums. None: stop at the minimums.
    tight: float | None = None


TIGHT = 1.2  # hi/lo that ends timing past the minimums (see the module docstring)
# `kernelevolve eval`'s policy: the defaults (15 reps, 0.3 s, 3 s cap) timed on to TIGHT
EVAL_TIMING = TimingPolicy(tight=TIGHT)


def tight_enough(policy: TimingPolicy, ref_ms: Sequence[float], cand_ms: Sequence[float]) -> bool:
    """The stop rule's interval test: True when no `tight` width is asked for, or the paired
    samples' 95% speedup interval (the bootstrap scoring uses, fewer resamples) is that narrow."""
    if policy.tight is None:
        return True
    if min(len(ref_ms), len(cand_ms)) < 3:
        return False
    lo, hi = speedup_interval(ref_ms, cand_ms, resamples=300)
    return lo > 0 and hi / lo <= policy.tight


STOP_REASONS = ("minimums", "tight", "time cap", "rep cap")


class StopRule:
    """When a timing loop has enough: minimum samples and time, then (with `tight`) an interval
    that narrow, checked at sample counts about 10% apart; always at max_reps or max_time_s.
    `why` says which ended it: "minimums", "tight", "time cap" or "rep cap"."""

    def __init__(self, policy: TimingPolicy):
        self.policy, self.why, self._next_check = policy, "", 0

    def done(self, reps: int, calls: int, elapsed: float, ref_ms: Sequence[float],
             cand_ms: Sequence[float]) -> bool:
        p = self.policy
        if reps >= p.max_reps:
            self.why = "rep cap"
            return True
        if reps >= 3 and elapsed >= p.max_time_s:
            self.why = "time cap"
            return True
        if reps < p.min_reps or not (elapsed >= p.min_time_s or calls >= p.max_reps):
            return False
        if p.tight is None:
            self.why = "minimums"
            return True
        if reps < self._next_check:
            return False
        self._next_check = reps + max(1, reps // 10)
        if tight_enough(p, ref_ms, cand_ms):
            self.why = "tight"
            return True
        return False


def interleaved(fns: Sequence[Callable[..., Any]], sets: Sequence[list[Any]], timer,
                policy: TimingPolicy,
                before_rep: Callable[[int, list[Any]], None] | None = None
                ) -> tuple[list[list[float]], str]:
    """Time each function on rotating input sets; returns samples (ms) per function and what
    ended the loop (StopRule.why).
    `before_rep(rep, args)`, outside the timed region, may write new values into the set
    about to be timed."""
    for _ in range(policy.warmup):
        for i, fn in enumerate(fns):
            fn(*sets[i % len(sets)])
    samples: list[list[float]] = [[] for _ in fns]
    stop = StopRule(policy)
    start = time.monotonic()
    rep = 0
    while True:
        args = sets[rep % len(sets)]
        if before_rep is not None:
            before_rep(rep, args)
        order = range(len(fns)) if rep % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            samples[i].append(timer.time_ms(fns[i], args))
        rep += 1
        cand = samples[1] if len(samples) > 1 else samples[0]  # [ref, cand, compiled?]
        if stop.done(rep, rep, time.monotonic() - start, samples[0], cand):
            return samples, stop.why


def summarize(samples: Sequence[float]) -> TimingStats:
    import numpy as np

    arr = np.asarray(samples, dtype=np.float64)
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    return TimingStats(median_ms=float(med), q1_ms=float(q1), q3_ms=float(q3),
                       min_ms=float(arr.min()), n=int(arr.size))


def bootstrap_ratios(ref: Sequence[float], cand: Sequence[float], *, resamples: int = 1000,
                     seed: int = 0):
    """Bootstrap distribution of median(ref)/median(cand), resampling the paired repetitions
    (rep i of the reference and rep i of the candidate ran back to back, so they share noise)."""
    import numpy as np

    r = np.asarray(ref, dtype=np.float64)
    c = np.asarray(cand, dtype=np.float64)
    n = min(r.size, c.size)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    return np.median(r[:n][idx], axis=1) / np.median(c[:n][idx], axis=1)


def speedup_interval(ref: Sequence[float], cand: Sequence[float], *, resamples: int = 1000,
                     seed: int = 0) -> tuple[float, float]:
    """Bootstrap 95% interval of one case's speedup."""
    import numpy as np

    lo, hi = np.percentile(bootstrap_ratios(ref, cand, resamples=resamples, seed=seed), [2.5, 97.5])
    return float(lo), float(hi)


def weighted_interval(pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
                      weights: Sequence[float], *, resamples: int = 1000,
                      seed: int = 0) -> tuple[float, float]:
    """Bootstrap 95% interval of the weighted geometric-mean speedup over cases."""
    import numpy as np

    logs = sum(w * np.log(bootstrap_ratios(r, c, resamples=resamples, seed=seed + i))
               for i, ((r, c), w) in enumerate(zip(pairs, weights)))
    lo, hi = np.percentile(np.exp(logs / sum(weights)), [2.5, 97.5])
    return float(lo), float(hi)


def weighted_geomean(values: Sequence[float], weights: Sequence[float]) -> float:
    import math

    total = sum(weights)
    return math.exp(sum(w * math.log(v) for v, w in zip(values, weights)) / total)


def _valid(ci: Any) -> bool:
    return (ci is not None and len(ci) == 2 and all(isinstance(v, (int, float)) for v in ci)
            and 0 < ci[0] <= ci[1])


def separated(a_ci: Sequence[float], b_ci: Sequence[float]) -> bool:
    """Interval `a_ci` lies wholly below interval `b_ci`: the difference is not noise."""
    return a_ci[1] < b_ci[0]


def clearly_below(a: float, a_ci: Sequence[float] | None, b: float,
                  b_ci: Sequence[float] | None) -> bool:
    """Figure `a` is below `b` by more than noise: by their intervals when both have one, else
    by more than REL_MARGIN (relative)."""
    if _valid(a_ci) and _valid(b_ci):
        return separated(a_ci, b_ci)
    return a * (1.0 + REL_MARGIN) < b


def _get(obj: Any, key: str) -> Any:
    return obj.get(key) if isinstance(obj, Mapping) else getattr(obj, key, None)


def spread(stats: Any) -> float | None:
    """IQR over median of one side's TimingStats (or its dict), None where not timed."""
    med, q1, q3 = (_get(stats, k) for k in ("median_ms", "q1_ms", "q3_ms"))
    if stats is None or not med or q1 is None or q3 is None:
        return None
    return (q3 - q1) / med


def case_noise(case: Any) -> float | None:
    """The noise factor of one timed case (a CaseResult or its dict) when it is noisy (see the
    module docstring), else None: differences under this factor on that case are noise."""
    ci = _get(case, "speedup_ci")
    width = ci[1] / ci[0] if _valid(ci) else None
    sides = [_get(case, "ref_timing"), _get(case, "cand_timing")]
    spreads = [s for s in (spread(side) for side in sides) if s is not None]
    if not ((width is not None and width > NOISY_WIDTH) or any(s > NOISY_SPREAD for s in spreads)):
        return None
    if width is not None:
        return width
    ratios = [_get(side, "q3_ms") / _get(side, "q1_ms") for side in sides
              if spread(side) is not None and _get(side, "q1_ms")]
    return max(ratios, default=1.0 + max(spreads))
