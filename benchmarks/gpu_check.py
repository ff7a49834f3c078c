"""GPU check: evaluate the Triton examples on a real GPU with real timing, print one table.

Meant for a session that is lent a GPU (and for anyone with one):

    python benchmarks/gpu_check.py [--platform cuda|rocm] [--baseline eager|compile]

Each example's `candidate_triton.py` goes through the full harness (static, load, run,
correctness, integrity, timing) on the device; the table shows per-case eager and candidate
medians and the weighted speedup, and the fingerprint line says what measured it. A second
table checks containment on the device: the syscall filter's profile each result ran under
(Triton on a GPU: `jit`), Landlock, and a Triton candidate that opens a socket at import
(static rules off), which the filter must stop at `load`.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", default="cuda")
    ap.add_argument("--baseline", default="eager")
    args = ap.parse_args()

    from kernelevolve.errors import KernelevolveError
    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator

    console = Console(width=140)
    table = Table(title=f"Triton examples on {args.platform}")
    for col in ("problem", "case", "eager ms", "compile ms", "triton ms", "speedup", "verdict"):
        table.add_column(col, justify="left" if col in ("problem", "case", "verdict") else "right")
    try:
        ev = Evaluator(args.platform, options=EvalOptions(baseline=args.baseline))
    except KernelevolveError as exc:
        console.print(f"[red]error:[/] {exc}")
        return 2
    fingerprint = {}
    failures = 0
    with ev:
        for problem in sorted(ROOT.glob("examples/*/problem.py")):
            cand = problem.parent / "candidate_triton.py"
            if not cand.exists():
                continue
            result = ev.evaluate(problem, cand)
            fingerprint = result.fingerprint
            failures += not result.accepted
            for case in result.cases:
                table.add_row(problem.parent.name, case.name, _f(case.ref_ms), _f(case.compile_ms),
                              _f(case.cand_ms), _f(case.speedup, "x"),
                              "accepted" if result.accepted else f"{result.stage}")
            table.add_row(problem.parent.name, "[b]weighted[/b]", "", "", "",
                          _f(result.speedup, "x"), result.reason.splitlines()[0][:60])
    console.print(table)
    failures += _containment(ev_args=(args.platform,), console=console)
    console.print(f"device: {fingerprint.get('device')} x{fingerprint.get('device_count')}, driver "
                  f"{fingerprint.get('driver')}, cuda {fingerprint.get('cuda')}, torch "
                  f"{fingerprint.get('torch')}, triton {fingerprint.get('triton')}")
    return 1 if failures else 0


SOCKET_PROBE = "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_STREAM)\n"


def _containment(ev_args: tuple, console: Console) -> int:
    import tempfile
    from dataclasses import replace

    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator

    table = Table(title="containment on the device")
    for col in ("candidate", "profile", "filter", "landlock", "verdict"):
        table.add_column(col)
    failures = 0
    problem = ROOT / "examples" / "softmax" / "problem.py"
    triton = problem.parent / "candidate_triton.py"
    with tempfile.TemporaryDirectory() as tmp, Evaluator(*ev_args) as ev:
        probe = Path(tmp) / "socket_probe.py"
        probe.write_text(SOCKET_PROBE + triton.read_text())
        for name, cand, opts, want in (
                ("softmax triton", triton, EvalOptions(), "accepted"),
                ("socket at import", probe, replace(EvalOptions(), static_rules=False), "load")):
            result = ev.evaluate(problem, cand, options=opts)
            ok = result.stage == want and (want != "load" or "syscall filter" in result.reason)
            failures += not ok
            table.add_row(name, result.sandbox.filter_profile, result.sandbox.syscall_filter,
                          str(result.sandbox.landlock_abi),
                          ("ok: " if ok else "UNEXPECTED: ") + result.reason.splitlines()[0][:70])
    console.print(table)
    return failures


def _f(value, unit: str = "") -> str:
    return "-" if value is None else f"{value:.4f}{unit}" if not unit else f"{value:.2f}{unit}"


if __name__ == "__main__":
    sys.exit(main())
