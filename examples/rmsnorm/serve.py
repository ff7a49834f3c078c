"""Use a promoted RMSNorm kernel in a model: patch, compare, count, time.

After `kernelevolve optimize examples/rmsnorm/problem.py` and `kernelevolve promote RUN_ID`,
run `python3 examples/rmsnorm/serve.py` from the same folder (the registry is
`.kernelevolve/registry`; `--registry DIR` for another). It builds a small model around the
problem's own `Model` class, patches it with `kernelevolve.patch`, checks the patched output
against the original, times both, and prints the live coverage counters. A freshly promoted
kernel is in `shadow`: every call runs the original (served) and the kernel, and compares them,
so the patched time is the cost of checking; `kernelevolve registry set-state NAME default`
serves the kernel.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn

import kernelevolve
from kernelevolve.errors import KernelevolveError
from kernelevolve.registry.serving_text import forward_line

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("rmsnorm_problem", HERE / "problem.py")
problem = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(problem)


class Block(nn.Module):
    """A transformer-style block's norm and projection; `norm` is the problem's Model."""

    def __init__(self, dim: int = 1024):
        super().__init__()
        self.norm = problem.Model(dim, problem.EPS)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(self.norm(x))


def _median_ms(fn, x, reps: int = 30) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn(x)
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--registry", default=None, help="Registry folder (.kernelevolve/registry).")
    parser.add_argument("--batch", type=int, default=512)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(args.batch, 1024)
    with torch.inference_mode():
        want = model(x)
        eager_ms = _median_ms(model, x)
        try:
            session = kernelevolve.patch(model, registry=args.registry)
        except KernelevolveError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        for row in session.report():
            print("patched:", json.dumps(row))
        for line in session.explain():  # in shadow: the original and the kernel both run
            print(line)
        got = model(x)
        patched_ms = _median_ms(model, x)
        model(torch.randn(4, 1024))  # outside the validated region: the original runs
    print(f"max abs difference: {(got - want).abs().max().item():.2e}")
    print(forward_line(session, eager_ms, patched_ms))  # says what a shadowed time means
    print("coverage:", json.dumps(kernelevolve.coverage(), indent=1))
    session.flush()  # `kernelevolve registry stats` shows these counters
    return 0


if __name__ == "__main__":
    sys.exit(main())
