"""Harness overhead per evaluation with a warm worker pool.

overhead = wall time of a full `evaluate()` minus the time spent inside timed reference and
candidate runs, for a trivial candidate (so what remains is the harness: static gate, three
forked jobs, input generation, transport, comparison). Goal: under 0.5 s.

Also the pool start's share for the trusted kernel launcher (runtime/launch_build.py, built by
the driver for each worker): its first build into an empty cache, and the cached lookup every
later pool start pays (the source hashed, the library's bytes checked against the manifest).

    python benchmarks/harness_overhead.py [--evals 10] [--sandbox auto|bwrap|unshare|none]
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evals", type=int, default=10)
    ap.add_argument("--sandbox", default=None)
    args = ap.parse_args()

    from kernelevolve.harness.driver.evaluate import Evaluator
    from kernelevolve.problem import load_problem

    problem = load_problem(HERE / "problems" / "trivial.py")
    candidate = HERE / "problems" / "trivial_candidate.py"
    t0 = time.monotonic()
    with Evaluator("cpu", sandbox_mode=args.sandbox) as ev:
        started = time.monotonic() - t0
        first = ev.evaluate(problem, candidate)  # warms: fingerprint, g++ cache, imports
        assert first.accepted, first.reason
        walls, measured = [], []
        for _ in range(args.evals):
            r = ev.evaluate(problem, candidate)
            assert r.accepted, r.reason
            walls.append(r.wall_s)
            measured.append(r.measured_s)
        facts = ev.pool.sandbox_facts
    overheads = [w - m for w, m in zip(walls, measured)]
    table = Table(title=f"harness overhead per evaluation (warm pool, sandbox={facts.method}, "
                        f"{args.evals} evals)")
    for col in ("metric", "median", "min", "max"):
        table.add_column(col, justify="right" if col != "metric" else "left")
    for name, values in (("wall s", walls), ("inside timed runs s", measured),
                         ("overhead s", overheads)):
        table.add_row(name, f"{statistics.median(values):.3f}", f"{min(values):.3f}",
                      f"{max(values):.3f}")
    console = Console()
    console.print(table)
    console.print(f"pool start (one-off): {started:.2f} s; first evaluation (cold caches): "
                  f"{first.wall_s:.2f} s")
    verdict = "meets" if statistics.median(overheads) < 0.5 else "MISSES"
    console.print(f"median overhead {statistics.median(overheads):.3f} s {verdict} the 0.5 s goal")
    cold, warm = launcher_cost()
    console.print(f"kernel launcher at pool start: first build {cold:.2f} s (once per machine and "
                  f"toolchain), cached lookup {warm * 1e3:.1f} ms (median of 10)")


def launcher_cost() -> tuple[float, float]:
    """(seconds to build the launcher into an empty cache, median seconds of a cached lookup)."""
    from kernelevolve.runtime import launch_build

    with tempfile.TemporaryDirectory() as root:
        t0 = time.perf_counter()
        launch_build.build(Path(root))
        cold = time.perf_counter() - t0
        warm = []
        for _ in range(10):
            t0 = time.perf_counter()
            launch_build.build(Path(root))
            warm.append(time.perf_counter() - t0)
    return cold, statistics.median(warm)


if __name__ == "__main__":
    main()
