"""Full reductions and row scans split across threads (emit_cpp_split.py, emit_cpp_solo_split.py),
before and after, on this machine.

For each problem the C++ draft is written once and built twice: as emitted ("after") and with the
split path's guard made false ("before": the code the emitter wrote until the split existed).
Both are timed in alternation, then eager, --reps rounds of --calls calls each; the median round
and the fastest (on a machine other processes load, the fastest round is the one whose threads
found the cores free: a parallel region waits on its slowest thread).

    python benchmarks/synth_split.py [--reps 15] [--calls 20]
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

CASES = {            # name: (forward's expression, input shape)
    "sum 4M": ("x.sum()", (1024, 4096)),
    "amax 4M": ("x.amax()", (1024, 4096)),
    "argmax 4M": ("torch.argmax(x)", (1024, 4096)),
    "cumsum 64x65536": ("torch.cumsum(x, -1)", (64, 65536)),
    "cumsum 2x2M": ("torch.cumsum(x, -1)", (2, 2097152)),
}
PROBLEM = """import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return {expr}


def get_inputs():
    return [torch.randn{shape}]


def get_init_inputs():
    return []
"""
GUARDS = ("rows < omp_get_max_threads() &&", "(outer + SCAN_ROWS - 1) / SCAN_ROWS < "
          "omp_get_max_threads() &&", "outer < omp_get_max_threads() &&")


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _time(f, x, calls: int) -> float:
    t = time.perf_counter()
    for _ in range(calls):
        f(x)
    return (time.perf_counter() - t) / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--calls", type=int, default=20)
    args = ap.parse_args()
    from kernelevolve.synth.api import synthesize

    print(f"threads: {torch.get_num_threads()}")
    print("median (fastest) round, us a call")
    print(f"{'problem':18} {'eager':>13} {'before':>13} {'after':>13} {'before/after':>15}")
    with tempfile.TemporaryDirectory(prefix="ke-split-") as tmp:
        for i, (name, (expr, shape)) in enumerate(CASES.items()):
            problem = Path(tmp) / f"p{i}.py"
            problem.write_text(PROBLEM.format(expr=expr, shape=shape))
            source, _ = synthesize(str(problem), "cpp")
            before = source
            for g in GUARDS:
                before = before.replace(g, "false &&")
            assert before != source, "no split guard in " + name
            mods = []
            for tag, text in (("after", source), ("before", before)):
                path = Path(tmp) / f"c{i}_{tag}.py"
                path.write_text(text.replace('name="synth_', f'name="synth_{tag}{i}_'))
                mods.append(_load(path, f"split_{tag}{i}").ModelNew())
            eager = _load(problem, f"split_ref{i}").Model()
            x = torch.randn(shape)
            assert torch.allclose(mods[0](x).double(), eager(x).double(), rtol=1e-4, atol=1e-3)
            fs = {"eager": eager, "before": mods[1], "after": mods[0]}
            for f in fs.values():
                _time(f, x, 3)
            t = {k: [] for k in fs}
            for _ in range(args.reps):          # before and after in alternation
                for k in ("before", "after"):
                    t[k].append(_time(fs[k], x, args.calls))
            for _ in range(args.reps):          # eager apart: its OpenMP runtime is not
                t["eager"].append(_time(eager, x, args.calls))   # ours, and its threads
            # spin after each call on the cores ours would use (interleaved, a split sum
            # measured 7.6 ms a call against 0.16 ms on its own)
            m = {k: statistics.median(v) for k, v in t.items()}
            b = {k: min(v) for k, v in t.items()}
            cells = " ".join(f"{m[k]:6.0f} ({b[k]:4.0f})" for k in fs)
            print(f"{name:18} {cells} {m['before'] / m['after']:6.2f}x ({b['before'] / b['after']:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
