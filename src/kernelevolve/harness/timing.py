"""The timing protocol, worker side, and the statistics over its samples.

Reference and candidate are timed in the same process, interleaved (alternating which goes
first, to cancel drift), after warm-up, on rotating input sets (so caching an output for one
input does not pay), until both a minimum count and a minimum time are reached.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from kernelevolve.types import TimingStats


@dataclass(frozen=True)
class TimingPolicy:
    warmup: int = 3            # calls per function before any sample is kept
    min_reps: int = 15         # samples per function, at least
    max_reps: int = 1000       # beyond this a median moves less than the machine's noise
    min_time_s: float = 0.3    # wall time spent timing a case, at least
    max_time_s: float = 3.0    # wall budget per case; stops early even if min_time not reached


def interleaved(fns: Sequence[Callable[..., Any]], sets: Sequence[list[Any]], timer,
                policy: TimingPolicy,
                before_rep: Callable[[int, list[Any]], None] | None = None) -> list[list[float]]:
    """Time each function on rotating input sets; returns samples (ms) per function.
    `before_rep(rep, args)`, outside the timed region, may write new values into the set
    about to be timed."""
    for _ in range(policy.warmup):
        for i, fn in enumerate(fns):
            fn(*sets[i % len(sets)])
    samples: list[list[float]] = [[] for _ in fns]
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
        elapsed = time.monotonic() - start
        enough = rep >= policy.min_reps and elapsed >= policy.min_time_s
        if enough or rep >= policy.max_reps or (rep >= 3 and elapsed >= policy.max_time_s):
            return samples


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
