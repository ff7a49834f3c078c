"""Outside measurement against the earlier in-process protocol, on the same kernels.

For every example C++ candidate and every good corpus candidate the harness measures, it runs
the full evaluation with `measurement="outside"` (harness/worker/measure.py: the reference and the
clock in a process that never loads candidate code, fresh inputs per timed call) and with
`measurement="inprocess"` (the earlier protocol: both timed in one process over three rotating
input sets), alternating A, B, A, B so that drift on a shared machine lands on both. Prints the
median speedup of each, their spread (min-max over the repetitions) and whether the five
95% intervals of the outside protocol overlap (the same kernel measured again must agree).

    python benchmarks/protocol_compare.py [--reps 5] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
CORPUS_GOOD = ("good_softmax_cpp", "good_pointwise_two_kernels", "good_rmsnorm_cpp_partial",
               "good_omp_team_sizes", "good_two_libraries", "good_double_accumulation")


def pairs() -> list[tuple[str, Path, Path]]:
    out = [(f"examples/{p.parent.name}", p.parent / "problem.py", p)
           for p in sorted(ROOT.glob("examples/*/candidate_cpp.py"))]
    for name in CORPUS_GOOD:
        path = ROOT / "tests" / "corpus" / f"{name}.py"
        problem = next(line.split(":", 1)[1].strip() for line in path.read_text().splitlines()
                       if line.startswith("# problem:"))
        prob = ROOT / "tests" / problem if problem.endswith(".py") else \
            ROOT / "examples" / problem / "problem.py"
        out.append((name, prob, path))
    return out


def overlap(intervals: list[tuple[float, float]]) -> bool:
    return max(lo for lo, _ in intervals) <= min(hi for _, hi in intervals)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator

    console = Console()
    rows = []
    with Evaluator("cpu", options=EvalOptions()) as ev:
        for label, problem, cand in pairs():
            got = {"outside": [], "inprocess": []}
            intervals = []
            for _ in range(args.reps):
                for mode in ("outside", "inprocess"):
                    r = ev.evaluate(problem, cand, options=replace(ev.options, measurement=mode))
                    if not r.accepted:
                        console.print(f"[red]{label} ({mode}) rejected:[/] {r.reason[:200]}")
                        continue
                    got[mode].append(r.speedup)
                    if mode == "outside":
                        intervals.append(tuple(r.speedup_ci))
            rows.append({"candidate": label, **{f"{m}_median": statistics.median(v) if v else None
                                                 for m, v in got.items()},
                         **{f"{m}_spread": [min(v), max(v)] if v else None
                            for m, v in got.items()},
                         "outside_intervals_overlap": bool(intervals) and overlap(intervals)})
    table = Table(title=f"speedup over eager, outside vs in-process measurement ({args.reps} each, "
                        "alternating)")
    for col in ("candidate", "outside", "spread", "in-process", "spread ", "ratio",
                "outside CIs overlap"):
        table.add_column(col, justify="left" if col == "candidate" else "right")
    for row in rows:
        o, i = row["outside_median"], row["inprocess_median"]
        table.add_row(row["candidate"], _f(o), _spread(row["outside_spread"]), _f(i),
                      _spread(row["inprocess_spread"]), _f(o / i if o and i else None),
                      "yes" if row["outside_intervals_overlap"] else "NO")
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


def _f(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def _spread(pair) -> str:
    return "-" if not pair else f"{pair[0]:.2f}-{pair[1]:.2f}"


if __name__ == "__main__":
    sys.exit(main())
