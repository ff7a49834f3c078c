"""Executor scaling: candidates evaluated per minute, local pool vs Ray actors, 1 and 2 slots.

The candidates are the tune variants of tests/problems/tunable_scale_candidate.py (a C++
kernel; its 8 configurations, each evaluated 3 times: 24 evaluations; 4 once with --quick),
all submitted at once as the search engine does; the executor runs as many as it has slots. Every row evaluates the same set with the same options
and must give the same verdicts. The compile cache is warmed first (untimed), so rows measure
evaluation, not g++. Startup (workers or actors ready, fingerprint taken) is reported apart.

Ray runs as a private instance on 127.0.0.1 with the machine's real CPU count, so 2 actors get
1 thread each, as 2 local workers do; it is started once, before the Ray rows.

    python benchmarks/executor_scaling.py [--quick] [--repeat 3] [--json executor_scaling.json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = ROOT / "tests" / "problems" / "tunable_scale.py"
SEED = ROOT / "tests" / "problems" / "tunable_scale_candidate.py"
ROWS = (("local", 1), ("local", 2), ("ray", 1), ("ray", 2))


def candidates(folder: Path, count: int) -> list[Path]:
    """`count` tune variants of the seed, fastest configurations first (REPEAT 1, 4, ...)."""
    from itertools import product

    from kernelevolve.operators.tunables import rewrite, space

    source = SEED.read_text()
    grid = space(source)
    names = sorted(grid)
    paths = []
    for values in product(*(grid[n] for n in names)):
        if len(paths) == count:
            break
        config = dict(zip(names, values))
        path = folder / ("cand_" + "_".join(f"{k}{v}" for k, v in config.items()) + ".py")
        path.write_text(rewrite(source, config))
        paths.append(path)
    return paths


def make(kind: str, slots: int, options):
    from kernelevolve.executors.local import LocalExecutor
    from kernelevolve.executors.ray_actor import ActorSpec
    from kernelevolve.executors.ray_executor import RayExecutor
    from kernelevolve.harness.driver.evaluate import Evaluator

    if kind == "local":
        return LocalExecutor(Evaluator("cpu", workers=slots, options=options), slots)
    return RayExecutor(ActorSpec(options=options), workers=slots)


async def evaluate_all(executor, problem, paths):
    return await asyncio.gather(*(executor.evaluate(problem, p) for p in paths))


def measure(kind: str, slots: int, options, problem, paths) -> dict:
    t0 = time.monotonic()
    executor = make(kind, slots, options)
    try:
        executor.fingerprint()
        startup = time.monotonic() - t0
        t1 = time.monotonic()
        results = asyncio.run(evaluate_all(executor, problem, paths))
        wall = time.monotonic() - t1
    finally:
        executor.close()
    return {"executor": kind, "slots": slots, "candidates": len(paths),
            "startup_s": round(startup, 2), "wall_s": round(wall, 2),
            "per_minute": round(len(paths) / wall * 60, 1),
            "verdicts": [r.stage for r in results],
            "speedups": [round(r.speedup, 4) if r.speedup else None for r in results],
            "eval_wall_s": [round(r.wall_s, 2) for r in results]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="4 candidates, short timing")
    ap.add_argument("--repeat", type=int, default=None,
                    help="evaluations of each configuration (default 3; 1 with --quick)")
    ap.add_argument("--json", type=Path, default=Path("executor_scaling.json"),
                    help="where to write the rows (default ./executor_scaling.json)")
    args = ap.parse_args()

    from kernelevolve.executors.ray_cluster import connect, ray_available
    from kernelevolve.harness.driver.evaluate import EvalOptions
    from kernelevolve.harness.protocol.timing import TimingPolicy
    from kernelevolve.problem import load_problem

    console = Console(width=120)
    options = EvalOptions(timing=TimingPolicy(min_reps=5, min_time_s=0.1, max_time_s=1.0)
                          if args.quick else TimingPolicy())
    problem = load_problem(PROBLEM)
    rows = [r for r in ROWS if r[0] == "local" or ray_available()]
    if len(rows) < len(ROWS):
        console.print("[yellow]ray is not installed: local rows only[/] "
                      "(pip install 'kernelevolve[ray]')")
    with tempfile.TemporaryDirectory(prefix="ke-scaling-") as tmp:
        unique = candidates(Path(tmp), 4 if args.quick else 8)
        console.print(f"warming the compile cache with {len(unique)} candidates (untimed)")
        measure("local", 2, options, problem, unique)
        repeat = args.repeat or (1 if args.quick else 3)
        paths = unique * repeat
        t0 = time.monotonic()
        conn = connect(None) if ray_available() else None
        ray_start_s = round(time.monotonic() - t0, 2) if conn else None
        try:
            results = [measure(kind, slots, options, problem, paths) for kind, slots in rows]
        finally:
            if conn is not None:
                conn.close()
    reference = results[0]["verdicts"]
    for row in results:
        if row["verdicts"] != reference:
            console.print(f"[red]verdicts differ:[/] {row['executor']} x{row['slots']}: "
                          f"{row['verdicts']} vs {reference}")
            return 1

    table = Table(title=f"candidates per minute, {len(paths)} evaluations of {len(unique)} "
                        f"C++ candidates "
                        f"({'quick timing' if args.quick else 'search timing'}), "
                        f"{os.cpu_count()} CPUs")
    for col in ("executor", "slots", "startup s", "wall s", "candidates/min", "vs local x1"):
        table.add_column(col, justify="left" if col == "executor" else "right")
    base = results[0]["per_minute"]
    for row in results:
        table.add_row(row["executor"], str(row["slots"]), f"{row['startup_s']:.1f}",
                      f"{row['wall_s']:.1f}", f"{row['per_minute']:.1f}",
                      f"{row['per_minute'] / base:.2f}")
    console.print(table)
    if ray_start_s is not None:
        console.print(f"the private Ray instance itself started in {ray_start_s:.1f} s "
                      "(once per run, not in the startup column)")
    payload = {"ray_instance_start_s": ray_start_s, "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                           "platform": sys.platform},
               "quick": args.quick, "repeat": repeat, "problem": str(PROBLEM.relative_to(ROOT)),
               "rows": results}
    args.json.write_text(json.dumps(payload, indent=2) + "\n")
    console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
