"""The synthesizer's PARALLEL_MIN_ELEMENTS default, swept through the real harness.

For each named ATen-suite probe and size profile, the C++ draft is written once, then evaluated
by the full harness (sandboxed worker, outside timing, every gate) with the threshold set to each
value: below it a kernel runs on one thread. Prints the weighted speedup over eager per value and
the per-case eager / candidate medians, so the default can be chosen from this machine's figures
(cpp_module.py records the sweep behind the current one).

    python benchmarks/synth_threshold.py [--probes abs,exp,sum_d1] [--profiles medium,large]
                                         [--values 32768,262144,100000000] [--json out.json]

About 10 s per (probe, profile, value) on a 2-core machine.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

DEFAULT_PROBES = "abs,exp,sin,softmax_dlast,sum_d1,sum_all"
DEFAULT_VALUES = "32768,131072,262144,100000000"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probes", default=DEFAULT_PROBES)
    ap.add_argument("--profiles", default="medium,large")
    ap.add_argument("--values", default=DEFAULT_VALUES)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import kernelevolve
    from kernelevolve.bench import aten_suite
    from kernelevolve.synth.api import synthesize

    values = [int(v) for v in args.values.split(",")]
    console = Console()
    table = Table("probe", "profile", "threshold", "speedup", "cases (eager / cand us)")
    rows = []
    with tempfile.TemporaryDirectory(prefix="ke-threshold-") as tmp:
        for profile in args.profiles.split(","):
            for probe in aten_suite.select(args.probes.split(",")):
                problem = Path(tmp) / f"{probe.name}_{profile}.py"
                problem.write_text(aten_suite.render(probe, profile))
                source, _ = synthesize(str(problem), "cpp")
                for value in values:
                    cand = Path(tmp) / f"{probe.name}_{profile}_{value}.py"
                    cand.write_text(re.sub(r"^PARALLEL_MIN_ELEMENTS = \d+",
                                           f"PARALLEL_MIN_ELEMENTS = {value}", source,
                                           flags=re.M))
                    r = kernelevolve.evaluate(str(problem), str(cand), platform="cpu")
                    cases = {c.name: (c.ref_ms, c.cand_ms) for c in r.cases if c.ref_ms}
                    rows.append({"probe": probe.name, "profile": profile, "threshold": value,
                                 "accepted": r.accepted, "speedup": r.speedup, "cases": cases})
                    text = " ".join(f"{n}:{a * 1e3:.0f}/{b * 1e3:.0f}"
                                    for n, (a, b) in cases.items())
                    speed = f"{r.speedup:.2f}x" if r.speedup else r.stage
                    table.add_row(probe.name, profile, str(value), speed, text)
                    console.print(f"{probe.name} {profile} {value}: {speed}  {text}")
    console.print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
