"""Stage time limits that fit the machine and the work.

A fixed limit is wrong twice: on a loaded machine a correct candidate ran past it and got
fitness 0 like a hung one, and a limit long enough for the Triton interpreter (about 5000x
slower than PyTorch) lets a hung C++ kernel hold a worker for minutes. So the limits of the
stages that run candidate code (load, run, timing) are scaled:

- by the machine: a fixed probe (pure Python and a small numpy reduction, ~5 ms on an idle
  core here) is timed when a pool starts; its ratio to `PROBE_IDLE_S` (clamped to 1..8) is the
  factor, so two busy processes on a 2-core machine about double every limit;
- by the work: a candidate the Triton interpreter runs gets `INTERPRETER_FACTOR` more;
- and a user's `--stage-timeout SECONDS` (or `stage_timeout` in the config file) replaces the
  computed limit of those stages outright.

The supervisor still enforces the result (harness/worker/supervise.py): a job can only shorten it.
"""
from __future__ import annotations

import time

from kernelevolve.harness.protocol.stages import CANDIDATE_STAGES
PROBE_IDLE_S = 0.0034       # the probe's best-of-3 time on an idle core of the dev machine
MAX_MACHINE_FACTOR = 8.0
INTERPRETER_FACTOR = 4.0


def probe_s() -> float:
    """Best of three runs of a fixed CPU workload, in seconds."""
    import numpy as np

    data = np.arange(20000, dtype=np.float64)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(60000):
            total += i * i
        for _ in range(20):
            total += int(data.sum())
        best = min(best, time.perf_counter() - start)
    return best


def machine_factor(measured_s: float | None = None) -> float:
    """How much slower than the idle reference this machine is now (1 at least)."""
    measured = probe_s() if measured_s is None else measured_s
    return min(max(measured / PROBE_IDLE_S, 1.0), MAX_MACHINE_FACTOR)


def stage_timeouts(base: dict[str, float], *, factor: float = 1.0, interpreted: bool = False,
                   override_s: float | None = None) -> dict[str, float]:
    """The limits one job runs under."""
    out = dict(base)
    for stage in CANDIDATE_STAGES:
        if stage not in out:
            continue
        if override_s is not None:
            out[stage] = float(override_s)
        else:
            out[stage] = out[stage] * factor * (INTERPRETER_FACTOR if interpreted else 1.0)
    return out
