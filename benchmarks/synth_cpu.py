"""Synthesized C++ kernels, tuned, against eager PyTorch and torch.compile on this CPU.

For each problem in benchmarks/synth_problems/ (or those named with --problems):

1. the built-in synthesizer writes a C++ draft from the reference alone
   (`kernelevolve.synth.api.synthesize(problem, "cpp") -> (source, plan)`), in a
   subprocess with a time limit, so a synthesizer crash or hang costs one row, not the run;
2. the `tune` operator searches the draft's TUNABLES through the real harness
   (`kernelevolve.optimize(problem, seeds=[draft], max_evals=--evals)`, which also
   re-measures the finalists);
3. the best candidate of that search is evaluated once more by the harness with
   `baseline="compile"`: eager reference, candidate and `torch.compile(reference)` timed
   interleaved in the same sandboxed worker, after the full correctness and integrity gates.

Reported per problem: median time per case of the tuned kernel, eager and torch.compile, and
the weighted geometric mean speedup over cases against each; at the end the geometric means
over the problems that produced a result. A problem the synthesizer does not cover, a draft
the harness rejects, or any other failure is a row with its reason, never a crash.

torch.compile is the default mode (inductor) with static shapes: automatic dynamic shapes is
switched off (TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES=0) because the harness compiles every case
from the same `forward`, and dynamo would otherwise compile the second case's shape as a
dynamic-shape kernel, a weaker baseline than torch.compile on one fixed shape.

    python benchmarks/synth_cpu.py [--problems NAME_OR_PATH ...] [--evals 6] [--json out.json]

It takes several minutes (about one to three per problem on a 2-core machine): each problem
costs `--evals` harness evaluations, the finalists' re-measurement and one compile-baseline
evaluation (inductor compiles each case once).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synth_report import (CaseRow, ProblemRow, machine, render, row_dict,  # noqa: E402
                          times, totals_of)

HERE = Path(__file__).resolve().parent
PROBLEMS_DIR = HERE / "synth_problems"
SYNTH_TIMEOUT_S = 300        # one synthesizer call (graph capture, planning, emission)
DEFAULT_EVALS = 6
DEFAULT_MAX_TIME_S = 600.0   # search budget per problem, on top of the --evals budget
STATIC_COMPILE_ENV = {"TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES": "0"}


# ---- the synthesizer, in a child process ---------------------------------------------------------

def synth_child(problem: str, out_dir: str) -> int:
    """`--_synth-child PROBLEM OUT_DIR`: write OUT_DIR/draft.py and OUT_DIR/synth.json."""
    out = Path(out_dir)
    info: dict[str, Any] = {}
    try:
        from kernelevolve.synth.api import synthesize
    except Exception as exc:  # noqa: BLE001 - not there yet, or broken at import
        info = {"status": "not covered",
                "reason": f"synthesizer not importable ({type(exc).__name__}: {exc})"}
    else:
        try:
            result = synthesize(problem, "cpp")
            source, plan = result if isinstance(result, tuple) else (result, None)
            if not isinstance(source, str) or not source.strip():
                info = {"status": "not covered", "reason": "the synthesizer returned no source",
                        "plan": _plan_data(plan)}
            else:
                (out / "draft.py").write_text(source)
                info = {"status": "ok", "plan": _plan_data(plan), "kernels": _plan_brief(plan)}
        except Exception as exc:  # noqa: BLE001
            info = {"status": _synth_failure_status(exc),
                    "reason": f"{type(exc).__name__}: {_first_line(str(exc))}",
                    "traceback": traceback.format_exc()[-4000:]}
    (out / "synth.json").write_text(json.dumps(info, default=str))
    return 0


def _synth_failure_status(exc: Exception) -> str:
    """An exception that says the problem is outside the covered classes is "not covered";
    anything else is a synthesizer bug ("synth error")."""
    words = f"{type(exc).__name__} {exc}".lower()
    if any(w in words for w in ("cover", "unsupported", "not supported", "notimplemented",
                                "cannot synthesize", "can't synthesize")):
        return "not covered"
    return "synth error"


def _plan_data(plan: Any) -> Any:
    """The plan as JSON-able data, whatever shape the synthesizer gives it."""
    if plan is None:
        return None
    for attr in ("to_dict", "as_dict"):
        fn = getattr(plan, attr, None)
        if callable(fn):
            try:
                return json.loads(json.dumps(fn(), default=str))
            except Exception:  # noqa: BLE001
                pass
    if isinstance(plan, (dict, list, str, int, float)):
        return json.loads(json.dumps(plan, default=str))
    # A method, or a function next to the plan's class (kernelevolve.synth.plan.explain).
    home = sys.modules.get(type(plan).__module__)
    for attr in ("explain", "describe", "summary"):
        for fn in (getattr(plan, attr, None), getattr(home, attr, None)):
            if callable(fn):
                try:
                    return str(fn() if fn is getattr(plan, attr, None) else fn(plan))
                except Exception:  # noqa: BLE001
                    pass
    return str(plan)[:4000]


def _plan_brief(plan: Any) -> str:
    """A few words for the table: how many kernels, what stayed in torch."""
    if plan is None:
        return ""
    summary = getattr(plan, "summary", None)
    if callable(summary):
        try:
            return str(summary())
        except Exception:  # noqa: BLE001
            pass
    kernels = getattr(plan, "kernels", None)
    if kernels is None and isinstance(plan, dict):
        kernels = plan.get("kernels")
    in_torch = getattr(plan, "torch_ops", None)
    if in_torch is None:
        in_torch = getattr(plan, "in_torch", None)
    if in_torch is None and isinstance(plan, dict):
        in_torch = plan.get("torch_ops") or plan.get("in_torch")
    parts = []
    if isinstance(kernels, (list, tuple)):
        kinds = []
        for k in kernels:
            kind = getattr(k, "kind", None) or (k.get("kind") if isinstance(k, dict) else None)
            kinds.append(str(kind) if kind else "kernel")
        parts.append(f"{len(kernels)} kernel{'s' if len(kernels) != 1 else ''}"
                     + (f" ({', '.join(kinds)})" if any(k != "kernel" for k in kinds) else ""))
    if isinstance(in_torch, (list, tuple)) and in_torch:
        parts.append("torch: " + ", ".join(str(op) for op in in_torch[:3]))
    return "; ".join(parts)


def run_synthesizer(problem: Path, work: Path) -> tuple[Path | None, dict[str, Any]]:
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_synth-child", str(problem), str(work)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SYNTH_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, {"status": "synth error",
                      "reason": f"the synthesizer ran past {SYNTH_TIMEOUT_S} s"}
    info_path = work / "synth.json"
    if not info_path.exists():
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        return None, {"status": "synth error",
                      "reason": f"the synthesizer process exited {proc.returncode}"
                                + (": " + " | ".join(tail) if tail else "")}
    info = json.loads(info_path.read_text())
    draft = work / "draft.py"
    return (draft if info.get("status") == "ok" and draft.exists() else None), info


# ---- search and final measurement --------------------------------------------------------------

def search(problem: Path, draft: Path, work: Path, evals: int, max_time: float,
           row: ProblemRow) -> Path | None:
    """Tune the draft; returns the best accepted candidate's file, or None (row says why)."""
    import kernelevolve

    run = kernelevolve.optimize(str(problem), seeds=[str(draft)], workspace=str(work / "ws"),
                                operators=["tune"], max_evals=evals, max_time=max_time)
    summary = run.summary()
    row.run_id, row.evals = run.id, summary.evaluations
    outcome = summary.outcome or {}
    row.search_speedup = outcome.get("speedup")
    seed_nodes = [n for n in summary.nodes if n["operator"] == "seed"]
    if seed_nodes and seed_nodes[0]["stage"] == "accepted":
        row.draft_speedup = seed_nodes[0]["speedup"]
    best = summary.best
    if not best or not summary.best_source:
        row.status = "rejected"
        reason = outcome.get("message") or "no candidate was accepted"
        if seed_nodes:
            result = run.store.evaluation(run.id, seed_nodes[0]["id"])
            if result is not None and result.reason:
                reason = f"draft rejected at {result.stage}: {result.reason}"
        row.reason = _first_lines(reason, 3)
        return None
    row.best_node = best["node_id"]
    path = work / "best.py"
    path.write_text(summary.best_source)
    return path


def measure(problem: Path, candidate: Path, row: ProblemRow) -> None:
    """One harness evaluation with the compile baseline; fills the row's cases and speedups."""
    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
    from kernelevolve.harness.protocol.timing import TimingPolicy

    options = EvalOptions(baseline="compile",
                          timing=TimingPolicy(min_reps=30, min_time_s=1.0, max_time_s=5.0))
    saved = {k: os.environ.get(k) for k in STATIC_COMPILE_ENV}
    os.environ.update(STATIC_COMPILE_ENV)  # read by the worker the pool starts below
    try:
        with Evaluator("cpu", options=options) as ev:
            result = ev.evaluate(str(problem), str(candidate))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    if not result.accepted:
        row.status = "rejected"
        row.reason = _first_lines(f"best candidate rejected at {result.stage} in the final "
                                  f"measurement: {result.reason}", 3)
        return
    row.cases = [CaseRow(c.name, c.weight, c.cand_ms, c.ref_ms, c.compile_ms, c.speedup,
                         (c.compile_ms / c.cand_ms) if c.compile_ms and c.cand_ms else None)
                 for c in result.cases if not c.held_out]
    row.speedup, row.compile_speedup = result.speedup, result.compile_speedup
    error = result.integrity.get("compile_baseline_error")
    if error:
        row.compile_note = _first_line(error)
    row.status, row.reason = "ok", ""


def bench_problem(name: str, problem: Path, work: Path, args: argparse.Namespace,
                  stand_in: Path | None) -> ProblemRow:
    row = ProblemRow(name=name, path=str(problem))
    started = time.monotonic()
    try:
        work.mkdir(parents=True, exist_ok=True)
        from kernelevolve.problem import load_problem

        load_problem(problem)  # a broken problem file is this row's failure, said plainly
        if stand_in is not None:
            row.draft = "stand-in"
            draft = work / "draft.py"
            shutil.copyfile(stand_in, draft)
            row.kernels = f"stand-in {stand_in.name}"
        else:
            draft, info = run_synthesizer(problem, work / "synth")
            row.plan, row.kernels = info.get("plan"), info.get("kernels") or ""
            if draft is None:
                row.status, row.reason = info.get("status", "synth error"), info.get("reason", "")
                return row
        best = search(problem, draft, work, args.evals, args.max_time, row)
        if best is not None:
            measure(problem, best, row)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - one problem's failure is one row
        row.status = "error"
        row.reason = f"{type(exc).__name__}: {_first_line(str(exc))}"
        if args.verbose:
            traceback.print_exc()
    finally:
        row.elapsed_s = time.monotonic() - started
    return row


# ---- problems and options ------------------------------------------------------------------

def resolve_problems(names: list[str] | None) -> list[tuple[str, Path]]:
    """Names of files in synth_problems/ (without .py), or paths of problem files."""
    if not names:
        return [(p.stem, p) for p in sorted(PROBLEMS_DIR.glob("*.py")) if not p.name.startswith("_")]
    out = []
    for name in names:
        path = Path(name)
        if not path.suffix:
            path = PROBLEMS_DIR / f"{name}.py"
        if not path.is_file():
            known = ", ".join(p.stem for p in sorted(PROBLEMS_DIR.glob("*.py")))
            raise SystemExit(f"--problems {name}: no such problem (known: {known}; or pass the "
                             "path of a problem .py file)")
        label = path.parent.name if path.stem == "problem" else path.stem
        out.append((label, path.resolve()))
    return out


def parse_stand_ins(items: list[str]) -> dict[str, Path]:
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not Path(path).is_file():
            raise SystemExit(f"--candidate-for {item}: expected NAME=PATH of an existing file")
        out[name] = Path(path).resolve()
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_synth-child"]:
        return synth_child(argv[1], argv[2])
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", nargs="+", metavar="NAME",
                    help="problems to run: names in benchmarks/synth_problems/ or problem file "
                         "paths (default: all of synth_problems/)")
    ap.add_argument("--evals", type=int, default=DEFAULT_EVALS,
                    help=f"harness evaluations per tune search, the draft's included "
                         f"(default {DEFAULT_EVALS})")
    ap.add_argument("--max-time", type=float, default=DEFAULT_MAX_TIME_S,
                    help=f"search time limit per problem in seconds (default {DEFAULT_MAX_TIME_S:.0f})")
    ap.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    ap.add_argument("--workspace", metavar="DIR",
                    help="keep drafts, searches and best candidates under DIR (default: a "
                         "temporary directory, removed at the end)")
    ap.add_argument("--verbose", action="store_true", help="print tracebacks of failures")
    # Hidden: use a hand-written candidate instead of the synthesizer for one problem, to test
    # the pipeline (or to compare against a hand-tuned kernel). Repeatable.
    ap.add_argument("--candidate-for", action="append", default=[], metavar="NAME=PATH",
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.evals < 1:
        ap.error("--evals must be at least 1")
    problems = resolve_problems(args.problems)
    stand_ins = parse_stand_ins(args.candidate_for)
    unknown = set(stand_ins) - {name for name, _ in problems}
    if unknown:
        ap.error(f"--candidate-for names a problem not being run: {', '.join(sorted(unknown))}")

    # Piped output (a log, a CI job) gets a wide table rather than rich's 80 columns.
    console = Console() if sys.stdout.isatty() else Console(width=180)
    started = time.monotonic()
    tmp = None
    if args.workspace:
        root = Path(args.workspace).resolve()
        root.mkdir(parents=True, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="synth-cpu-")
        root = Path(tmp.name)
    rows: list[ProblemRow] = []
    try:
        for i, (name, path) in enumerate(problems, 1):
            console.print(f"[{i}/{len(problems)}] {name} ...", highlight=False)
            row = bench_problem(name, path, root / name, args, stand_ins.get(name))
            rows.append(row)
            summary = (f"{times(row.speedup)} vs eager, {times(row.compile_speedup)} vs torch.compile"
                       if row.status == "ok" else f"{row.status}: {row.reason}")
            console.print(f"    {summary} ({row.elapsed_s:.0f} s)", highlight=False)
    except KeyboardInterrupt:
        console.print("interrupted; reporting the problems finished so far")
    finally:
        if tmp is not None:
            tmp.cleanup()
    elapsed = time.monotonic() - started
    totals = totals_of(rows)
    render(rows, totals, args, console)
    import kernelevolve

    console.print(f"kernelevolve from {Path(kernelevolve.__file__).parent}; machine: "
                  + ", ".join(f"{k} {v}" for k, v in machine().items()), highlight=False)
    console.print(f"took {elapsed:.0f} s ({elapsed / 60:.1f} min) for {len(rows)} problem(s)")
    if args.json:
        data = {"benchmark": "synth_cpu", "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "machine": machine(), "kernelevolve": str(Path(kernelevolve.__file__).parent),
                "evals": args.evals, "elapsed_s": elapsed,
                "compile_baseline": "torch.compile(Model) default mode, static shapes "
                                    "(TORCH_DYNAMO_AUTOMATIC_DYNAMIC_SHAPES=0), timed "
                                    "interleaved with eager and the candidate by the harness",
                "totals": totals,
                "problems": [row_dict(r) for r in rows]}
        Path(args.json).write_text(json.dumps(data, indent=2, default=str))
        console.print(f"wrote {args.json}")
    return 0


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0]


def _first_lines(text: str, n: int) -> str:
    return " ".join(text.strip().splitlines()[:n])


if __name__ == "__main__":
    sys.exit(main())
