"""Synthesized C++ kernels of single element-wise ops against eager PyTorch on this CPU.

For each op: a one-op problem (forward applies the op to a (4096, 1024) float32 input, or two
for binary ops, each drawn from the op's domain) is written to a temporary folder, the built-in
synthesizer writes its C++ draft (default tunables: FAST_EXP=1, the prelude's vectorised
math), the draft's module is imported (compiling the kernel with the flags the harness uses),
its output is checked against eager's with the harness's comparison (float32 tolerance), and
eager and kernel forwards are timed interleaved, --reps rounds of one call each (both
allocate their output, as in a model). Reported: the best time of each, and the speedup as
the median over rounds of eager / kernel within the round (a paired ratio, steadier than a
ratio of bests when other processes load the machine).

    python benchmarks/synth_math_speed.py [--ops sin log1p ...] [--rows 4096 --cols 1024]
                                          [--reps 20] [--json out.json]

The goal (issue 16) is no covered op slower than eager. Timings on a shared machine move with
the other processes' load: interleaving and the paired median make the comparison fair, not
the figures stable, so run it on an idle machine for numbers to quote (--threads 1 needs only
one idle core).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

# name: (forward expression over x (and y), x's domain, y's domain or None)
OPS = {
    "exp": ("torch.exp(x)", "normal", None), "exp2": ("torch.exp2(x)", "normal", None),
    "expm1": ("torch.expm1(x)", "normal", None), "log": ("torch.log(x)", "pos", None),
    "log2": ("torch.log2(x)", "pos", None), "log10": ("torch.log10(x)", "pos", None),
    "log1p": ("torch.log1p(x)", "pos", None), "sin": ("torch.sin(x)", "normal", None),
    "cos": ("torch.cos(x)", "normal", None), "tan": ("torch.tan(x)", "normal", None),
    "asin": ("torch.asin(x)", "unit", None), "acos": ("torch.acos(x)", "unit", None),
    "atan": ("torch.atan(x)", "normal", None), "sinh": ("torch.sinh(x)", "normal", None),
    "cosh": ("torch.cosh(x)", "normal", None), "asinh": ("torch.asinh(x)", "normal", None),
    "acosh": ("torch.acosh(x)", "ge1", None), "atanh": ("torch.atanh(x)", "unit", None),
    "erf": ("torch.erf(x)", "normal", None), "erfc": ("torch.erfc(x)", "normal", None),
    "tanh": ("torch.tanh(x)", "normal", None), "sigmoid": ("torch.sigmoid(x)", "normal", None),
    "round": ("torch.round(x)", "normal", None), "trunc": ("torch.trunc(x)", "normal", None),
    "frac": ("torch.frac(x)", "normal", None), "isnan": ("torch.isnan(x)", "normal", None),
    "isinf": ("torch.isinf(x)", "normal", None),
    "softplus": ("F.softplus(x)", "normal", None), "mish": ("F.mish(x)", "normal", None),
    "elu": ("F.elu(x)", "normal", None), "selu": ("F.selu(x)", "normal", None),
    "celu": ("F.celu(x, 0.7)", "normal", None), "silu": ("F.silu(x)", "normal", None),
    "gelu": ("F.gelu(x)", "normal", None), "hardswish": ("F.hardswish(x)", "normal", None),
    "hardsigmoid": ("F.hardsigmoid(x)", "normal", None),
    "logit": ("torch.logit(x, 1e-6)", "prob", None),
    "atan2": ("torch.atan2(x, y)", "normal", "normal"),
    "hypot": ("torch.hypot(x, y)", "normal", "normal"),
    "fmod": ("torch.fmod(x, y)", "normal", "normal"),
    "fmod_const": ("torch.fmod(x, 0.7)", "normal", None),
    "remainder": ("torch.remainder(x, y)", "normal", "normal"),
    "remainder_const": ("torch.remainder(x, 0.7)", "normal", None),
    "floor_divide": ("torch.floor_divide(x, y)", "normal", "normal"),
    "copysign": ("torch.copysign(x, y)", "normal", "normal"),
    "nextafter": ("torch.nextafter(x, y)", "normal", "normal"),
    "xlogy": ("torch.xlogy(x, y)", "normal", "pos"),
    "logical_xor": ("torch.logical_xor(x, y)", "normal", "normal"),
    "clamp_tensor": ("torch.clamp(x, y, y + 1.0)", "normal", "normal"),
}
DOMAINS = {"normal": "torch.randn(R, C) * 2", "pos": "torch.rand(R, C) * 10 + 0.01",
           "unit": "torch.rand(R, C) * 1.98 - 0.99", "ge1": "torch.rand(R, C) * 10 + 1",
           "prob": "torch.rand(R, C)"}

PROBLEM = '''import torch
import torch.nn as nn
import torch.nn.functional as F

R, C = {rows}, {cols}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, {args}):
        return {expr}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
'''


def problem_source(name: str, rows: int, cols: int) -> str:
    expr, dx, dy = OPS[name]
    args, inputs = ("x, y", f"{DOMAINS[dx]}, {DOMAINS[dy]}") if dy else ("x", DOMAINS[dx])
    return PROBLEM.format(rows=rows, cols=cols, args=args, expr=expr, inputs=inputs)


def _import(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def timed_rounds(fns: list, inputs: list, reps: int) -> list[list[float]]:
    """Wall times (ms) of each function over `reps` interleaved rounds: [round][function]."""
    for f in fns:
        f(*inputs)                      # warm up (first-touch, caches, OpenMP team)
    rounds = []
    for _ in range(reps):
        row = []
        for f in fns:
            t = time.perf_counter()
            f(*inputs)
            row.append((time.perf_counter() - t) * 1e3)
        rounds.append(row)
    return rounds


def measure(name: str, rows: int, cols: int, reps: int, work: Path) -> dict:
    import torch

    from kernelevolve.harness.gates.compare import compare_outputs
    from kernelevolve.synth import synthesize
    from kernelevolve.synth.capture import NotCovered

    problem = work / f"op_{name}.py"
    problem.write_text(problem_source(name, rows, cols))
    try:
        source, plan = synthesize(str(problem), "cpp")
    except NotCovered as exc:
        return {"op": name, "error": f"not covered: {exc}"}
    if plan.kept:
        kept = sorted({plan.graph.values[k].op for k in plan.kept})
        note = "torch keeps " + ", ".join(kept)
    else:
        note = ""
    cand_path = work / f"cand_{name}.py"
    cand_path.write_text(source)
    ref, cand = _import(problem, f"ref_{name}"), _import(cand_path, f"cand_{name}")
    torch.manual_seed(0)
    inputs = list(ref.get_inputs())
    eager, kernel = ref.Model(), cand.ModelNew()
    with torch.no_grad():
        check = compare_outputs([eager(*inputs)], [kernel(*inputs)])
        rounds = timed_rounds([eager, kernel], inputs, reps)
    ratios = sorted(e / k for e, k in rounds)
    return {"op": name, "eager_ms": min(r[0] for r in rounds),
            "kernel_ms": min(r[1] for r in rounds), "speedup": ratios[len(ratios) // 2],
            "correct": check.ok, "note": note if check.ok else check.reason}


def render(rows: list[dict], meta: dict) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"synthesized C++ vs eager, {meta['shape']} float32, {meta['reps']} "
                        f"rounds, {meta['threads']} thread(s)")
    for col, just in (("op", "left"), ("eager ms (best)", "right"),
                      ("kernel ms (best)", "right"), ("speedup (median)", "right"),
                      ("correct", "center"), ("note", "left")):
        table.add_column(col, justify=just)
    for r in rows:
        if "error" in r:
            table.add_row(r["op"], "", "", "", "", r["error"][:80])
            continue
        colour = "green" if r["speedup"] >= 1 else "red"
        table.add_row(r["op"], f"{r['eager_ms']:.3f}", f"{r['kernel_ms']:.3f}",
                      f"[{colour}]{r['speedup']:.2f}x[/{colour}]",
                      "yes" if r["correct"] else "[red]NO[/red]", r["note"][:80])
    console = Console()
    console.print(table)
    done = [r for r in rows if "speedup" in r]
    slower = [r["op"] for r in done if r["speedup"] < 1]
    console.print(f"{len(done)} ops timed; slower than eager: {', '.join(slower) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", nargs="+", default=list(OPS), metavar="OP")
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=None,
                    help="threads for eager and the kernels (default: torch's and OpenMP's)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows here")
    args = ap.parse_args(argv)
    unknown = [o for o in args.ops if o not in OPS]
    if unknown:
        print(f"error: unknown op(s) {', '.join(unknown)}; known: {', '.join(OPS)}",
              file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="synth-math-speed-"))
    os.environ.setdefault("KERNELEVOLVE_CACHE_DIR", str(work / "cache"))
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)   # before any OpenMP runtime starts
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        rows = [measure(name, args.rows, args.cols, args.reps, work) for name in args.ops]
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta = {"shape": f"{args.rows}x{args.cols}", "reps": args.reps,
            "threads": torch.get_num_threads(), "cpu": _cpu()}
    render(rows, meta)
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    return 0


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
