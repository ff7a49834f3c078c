"""The kernel registry end to end: search, promote, patch a live model, and time it.

On the recommendation model of examples/recsys/ (RecModel: two RMSNorm+SiLU blocks, 16
embedding bags, one Bi-Interaction), on this machine:

1. search: for each recsys problem (norm_act, embedding_bag, fm_interaction),
   `kernelevolve optimize PROBLEM --max-evals N --no-compile-figures --json summary.json` in a
   subprocess (built-in synthesizer, then tune; no LLM), then `promote(..., state="default")`
   into WORKSPACE/registry. With --workspace, a completed run of the same problem (same file
   hash, a safe improvement) that is already there is reused instead of searched again, and a
   default version promoted from that run is reused instead of promoted again;
2. end to end: `make_model()` and `make_inputs(--batch)`, eager outputs, then
   `kernelevolve.patch(model, registry=...)` on a second instance with the same weights. The
   patch report says which module path got which kernel and version. The patched outputs must
   match eager (torch.allclose, atol = rtol = 1e-4; the max abs diff is printed). Then the whole
   forward is timed, eager vs patched vs `torch.compile(model)` (inductor, default mode; its
   first call, the compile, is reported separately and the row is skipped with a one-line
   reason if it fails): warmup, then --reps repeats interleaved (the three in turn, the order
   rotated every repeat), medians. Everything runs under torch.inference_mode(): with autograd
   on, the dispatchers fall back to the original modules;
3. dispatcher overhead: one norm_act module alone, eager vs patched, at a batch OUTSIDE the
   validated region (--tiny-batch, default 4: every call falls back, counted under "shape") and
   at the smallest batch INSIDE it (the region's lower bound, 333), where the kernel serves. Per
   call: many calls per round, --rounds rounds interleaved, median of the rounds. Also timed at
   333: the bound kernel called directly, without the dispatcher.

Allocator: eager PyTorch's large temporaries (the embedding gather is (B, 20, 64) fp32, 5 MiB
at batch 1024) come from glibc malloc, whose mmap and trim thresholds adapt to what the process
freed before. The same eager model then runs at about 20 ms or about 45 ms per forward at batch
1024 on this machine depending on that history (unpinned, eager stays at about 43 ms here even
though patching now builds the kernel modules on the meta device and frees nothing large), the
slow state paying some 15000 minor page faults per forward. So by default the thresholds are
pinned once at start (mallopt M_MMAP_THRESHOLD 32 MiB, M_TRIM_THRESHOLD 256 MiB; what
MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ do), the same for every variant;
`--malloc default` leaves glibc's adaptive behaviour. The page faults per forward are printed
next to the times.

How to read it:

- `speedup` is eager median / variant median for the whole model's forward (>1 is faster);
  the kernels cover only the patched modules (2 norms, 16 bags, 1 interaction), the Linear
  layers, stack and cat stay eager.
- `overhead, out of region` = patched - eager at the tiny batch: the price of the region test
  and the fallback on a call the kernel does not serve (pure cost, nothing gained).
- `dispatch cost, in region` = patched - direct kernel at 333: what the dispatcher adds on top
  of the kernel it serves. `patched slower than eager at 333` says whether the patched module
  lost to eager in the median or in any single round at the smallest in-region shape.
- the coverage counters are `kernelevolve.coverage()` after the end-to-end part and after the
  overhead part (calls, served, fallbacks by reason, estimated time saved).

    python benchmarks/registry_e2e.py [--max-evals 6] [--batch 1024] [--reps 30] [--rounds 21]
        [--tiny-batch 4] [--workspace DIR] [--no-compile] [--cold-compile]
        [--malloc pinned|default] [--json out.json]

About three to five minutes on a 2-core CPU from scratch (three searches of about a minute, one
inductor compile of the model, 5-20 s); well under a minute with --workspace holding the runs
of an earlier pass. Exit status 0 when every step worked and the outputs matched, else 1.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
RECSYS = HERE.parent / "examples" / "recsys"
PROBLEMS = ("norm_act", "embedding_bag", "fm_interaction")
ATOL = RTOL = 1e-4
SEARCH_TIMEOUT_S = 1800

console = Console()
if not console.is_terminal:
    console.width = 120


class Failure(Exception):
    """An expected failure: reported as one line, never a traceback."""


def _first_line(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return (lines[0] if lines else "")[:limit]


def _last_lines(text: str, n: int = 2) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])[:400]


def _cli() -> list[str]:
    exe = shutil.which("kernelevolve")
    if exe:
        return [exe]
    return [sys.executable, "-c", "from kernelevolve.cli import main; main()"]


def _load_model_module():
    name = "recsys_model"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, RECSYS / "model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def pin_malloc() -> str:
    """Fixed glibc malloc thresholds (see the module docstring); says what was done."""
    from kernelevolve.model.measure import pin_malloc as pin

    return pin()


def _minflt() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


# ---- 1. search and promote ------------------------------------------------------------------

def _reusable_run(ws: Path, problem: Path) -> Any:
    """A completed run of this very problem file with a safe improvement, newest first."""
    if not (ws / "kernelevolve.db").exists():
        return None
    from kernelevolve.store import Store

    from kernelevolve.store import StoreError

    digest = hashlib.sha256(problem.read_bytes()).hexdigest()
    try:
        store = Store.open(ws)
    except StoreError as exc:
        raise Failure(f"workspace {ws}: {_first_line(str(exc))}") from None
    with store:
        for run in store.list_runs():
            outcome = run.outcome or {}
            try:
                same = Path(run.problem_path or "").resolve() == problem.resolve()
            except OSError:
                same = False
            if (same and run.status == "completed" and run.problem_hash == digest
                    and outcome.get("safe") and outcome.get("node_id") is not None):
                return run
    return None


def search(problem: str, ws: Path, max_evals: int) -> dict[str, Any]:
    """Runs (or reuses) the search; returns {"run_id", "verdict", "reused", "search_s"}."""
    path = RECSYS / f"{problem}.py"
    old = _reusable_run(ws, path)
    console.print(f"{problem}: " + (f"reusing completed run {old.id}" if old is not None else
                                    f"searching (--max-evals {max_evals}) ..."))
    if old is not None:
        return {"run_id": old.id, "verdict": (old.outcome or {}).get("message", ""),
                "reused": True, "search_s": None}
    logs = ws / "e2e_logs"
    logs.mkdir(parents=True, exist_ok=True)
    summary_path = logs / f"{problem}.summary.json"
    summary_path.unlink(missing_ok=True)
    cmd = [*_cli(), "optimize", str(path), "--max-evals", str(max_evals), "--workspace",
           str(ws), "--no-compile-figures", "--json", str(summary_path)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SEARCH_TIMEOUT_S,
                              cwd=str(ws))
    except subprocess.TimeoutExpired:
        raise Failure(f"search ran past {SEARCH_TIMEOUT_S} s") from None
    except OSError as exc:
        raise Failure(f"cannot start kernelevolve: {exc}") from None
    elapsed = time.monotonic() - t0
    (logs / f"{problem}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    if not summary_path.exists():
        raise Failure(f"optimize exited {proc.returncode} without a summary: "
                      f"{_last_lines(proc.stderr or proc.stdout)}")
    summary = json.loads(summary_path.read_text())
    outcome = summary.get("outcome") or {}
    if proc.returncode != 0 or not outcome.get("safe"):
        raise Failure(f"optimize exited {proc.returncode}: "
                      f"{outcome.get('message') or _last_lines(proc.stderr or proc.stdout)} "
                      f"(run {summary.get('run_id')})")
    return {"run_id": summary["run_id"], "verdict": outcome.get("message", ""),
            "reused": False, "search_s": elapsed}


def promote_default(ws: Path, registry_dir: Path, run_id: str) -> dict[str, Any]:
    """Promotes the run's verdict node as the default version (or finds it already there)."""
    from kernelevolve.registry import Registry, RegistryError
    from kernelevolve.registry.promote import promote
    from kernelevolve.store import Store, StoreError

    try:
        with Store.open(ws) as store, Registry.open(registry_dir) as reg:
            for name in reg.names():
                default, _ = reg.serving(name)
                if default is not None and \
                        default.entry.get("provenance", {}).get("run") == run_id:
                    return {"name": default.name, "version": default.version,
                            "promoted": False, "speedup": _ev_speedup(default)}
            rec = promote(store, reg, run_id, state="default",
                          why="benchmarks/registry_e2e.py")
            return {"name": rec.name, "version": rec.version, "promoted": True,
                    "speedup": _ev_speedup(rec)}
    except (RegistryError, StoreError) as exc:
        raise Failure(f"promote {run_id}: {_first_line(str(exc))}") from None


def _ev_speedup(rec: Any) -> float | None:
    return rec.entry.get("evaluation", {}).get("speedup")


# ---- timing helpers ---------------------------------------------------------------------------

def interleaved(fns: dict[str, Callable[[], Any]], reps: int, warmup: int = 3
                ) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Seconds per call of each fn (warmup calls, then `reps` rounds of one call each, the
    order rotated every round), and the minor page faults per call of each."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    names = list(fns)
    out: dict[str, list[float]] = {n: [] for n in names}
    faults = {n: 0 for n in names}
    for r in range(reps):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            f0 = _minflt()
            t0 = time.perf_counter()
            fns[n]()
            out[n].append(time.perf_counter() - t0)
            faults[n] += _minflt() - f0
    return out, {n: faults[n] / reps for n in names}


def per_call(fns: dict[str, Callable[[], Any]], rounds: int, round_s: float = 0.02
             ) -> dict[str, list[float]]:
    """Seconds per call of each fn, one figure per round: each round makes as many calls as
    fit in about `round_s` (calibrated per fn), the fns in turn, the order rotated."""
    counts = {}
    for name, fn in fns.items():
        for _ in range(20):
            fn()
        t0 = time.perf_counter()
        for _ in range(50):
            fn()
        each = (time.perf_counter() - t0) / 50
        counts[name] = max(20, min(20000, int(round_s / max(each, 1e-9))))
    names = list(fns)
    out: dict[str, list[float]] = {n: [] for n in names}
    for r in range(rounds):
        k = r % len(names)
        for n in names[k:] + names[:k]:
            fn, calls = fns[n], counts[n]
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            out[n].append((time.perf_counter() - t0) / calls)
    return out


def med(xs: list[float]) -> float:
    return statistics.median(xs)


# ---- 2. the whole model -------------------------------------------------------------------------

def end_to_end(registry_dir: Path, batch: int, reps: int, compile_: bool) -> dict[str, Any]:
    import torch

    import kernelevolve
    from kernelevolve.registry import RegistryError

    m = _load_model_module()
    inputs = m.make_inputs(batch, seed=0)
    eager_model = m.make_model(seed=0)
    patched_model = m.make_model(seed=0)
    res: dict[str, Any] = {"batch": batch, "reps": reps}
    with torch.inference_mode():
        eager_out = eager_model(*inputs)
        try:
            session = kernelevolve.patch(patched_model, registry=registry_dir)
        except RegistryError as exc:
            raise Failure(f"patch: {_first_line(str(exc))}") from None
        report = session.report()
        res["patch_report"] = [{k: v for k, v in r.items() if k != "at"} for r in report]
        _print_report(report)
        if not session.dispatchers:
            raise Failure("patch matched no module of the model")
        patched_out = patched_model(*inputs)
        diff = (patched_out - eager_out).abs().max().item()
        ok = bool(torch.allclose(patched_out, eager_out, atol=ATOL, rtol=RTOL))
        res["max_abs_diff"], res["allclose"] = diff, ok
        console.print(f"patched vs eager outputs {tuple(eager_out.shape)}: max abs diff "
                      f"{diff:.3g}, allclose(atol={ATOL:g}, rtol={RTOL:g}) "
                      + ("[green]ok[/green]" if ok else "[red]FAILED[/red]"))

        fns: dict[str, Callable[[], Any]] = {
            "eager": lambda: eager_model(*inputs),
            "patched": lambda: patched_model(*inputs),
        }
        res["compile"] = None
        if compile_:
            res["compile"] = _compile(m, inputs, eager_out)
            if res["compile"].get("fn") is not None:
                fns["torch.compile"] = res["compile"].pop("fn")
        console.print(f"timing the whole forward at batch {batch}: {reps} interleaved repeats "
                      f"of {', '.join(fns)} ...")
        times, faults = interleaved(fns, reps)
        res["coverage"] = kernelevolve.coverage()
    eager_ms = med(times["eager"]) * 1e3
    res["ms"] = {n: med(t) * 1e3 for n, t in times.items()}
    res["min_ms"] = {n: min(t) * 1e3 for n, t in times.items()}
    res["page_faults_per_call"] = faults
    res["speedup"] = {n: eager_ms / v for n, v in res["ms"].items()}
    if "torch.compile" in res["ms"]:
        res["patched_vs_compile"] = res["ms"]["torch.compile"] / res["ms"]["patched"]
    res["session"] = session
    return res


def _compile(m: Any, inputs: list[Any], eager_out: Any) -> dict[str, Any]:
    import torch

    model = m.make_model(seed=0)
    console.print("torch.compile(model) (inductor, default mode): compiling on the first "
                  "call ...")
    t0 = time.monotonic()
    try:
        compiled = torch.compile(model)
        out = compiled(*inputs)
    except Exception as exc:  # noqa: BLE001 - inductor needs a compiler; a failure is a row
        why = f"{type(exc).__name__}: {_first_line(str(exc), 200)}"
        console.print(f"[yellow]torch.compile skipped: {why}[/yellow]")
        return {"ok": False, "why": why}
    compile_s = time.monotonic() - t0
    diff = (out - eager_out).abs().max().item()
    cold = os.environ.get("TORCHINDUCTOR_FORCE_DISABLE_CACHES") == "1"
    console.print(f"torch.compile: first call (compile) {compile_s:.1f} s "
                  + ("(caches off)" if cold else "(inductor's on-disk caches on: a repeat run "
                                                  "compiles faster; --cold-compile)")
                  + f"; max abs diff vs eager {diff:.3g}")
    return {"ok": True, "compile_s": compile_s, "max_abs_diff": diff, "caches_off": cold,
            "fn": lambda: compiled(*inputs)}


def _print_report(report: list[dict[str, Any]]) -> None:
    table = Table(title="patch report: kernelevolve.patch(model, registry=...)")
    for col in ("module path", "kernel", "version", "state", "note"):
        table.add_column(col)
    for r in report:
        d = r.get("default") or {}
        note = r.get("skipped") or d.get("refused") or ""
        if r.get("trial"):
            note = (note + "; " if note else "") + f"trial v{r['trial']['version']} " \
                                                   f"{r['trial']['state']}"
        table.add_row(r["path"], r["name"], f"v{d['version']}" if d else "-",
                      d.get("state", "-") if d else "-", note)
    console.print(table)


# ---- 3. dispatcher overhead --------------------------------------------------------------------

def overhead(registry_dir: Path, tiny: int, rounds: int) -> dict[str, Any]:
    import torch
    import torch.nn as nn

    import kernelevolve
    from kernelevolve.registry import RegistryError

    m = _load_model_module()
    norm_act = m.norm_act
    torch.manual_seed(1)
    eager = norm_act.Model(m.HIDDEN, m.EPS).eval()
    holder = nn.ModuleList([norm_act.Model(m.HIDDEN, m.EPS)]).eval()
    holder[0].load_state_dict(eager.state_dict())
    patched = holder[0]
    try:
        session = kernelevolve.patch(holder, registry=registry_dir, names=["norm_act"])
    except RegistryError as exc:
        raise Failure(f"patch norm_act: {_first_line(str(exc))}") from None
    if not session.dispatchers or session.dispatchers[0].default is None:
        raise Failure("the norm_act module was not patched (no default version)")
    d = session.dispatchers[0]
    bound = d.default
    if bound.refusal is not None:
        raise Failure(f"norm_act v{bound.record.version} refuses this module: {bound.refusal[1]}")
    batch_dim = bound.region.data["args"][0]["dims"][0]
    small = int(batch_dim["min"])
    res: dict[str, Any] = {"tiny_batch": tiny, "small_batch": small, "rounds": rounds,
                           "region_batch": [batch_dim["min"], batch_dim["max"]]}
    g = torch.Generator().manual_seed(0)
    x_tiny = torch.randn(tiny, m.HIDDEN, generator=g) * 2.0 + 0.5
    x_small = torch.randn(small, m.HIDDEN, generator=g) * 2.0 + 0.5
    tiny_in = bound.why_not((x_tiny,))
    small_in = bound.why_not((x_small,))
    res["tiny_fallback_reason"], res["small_reason"] = tiny_in, small_in
    if tiny_in is None:
        console.print(f"[yellow]note: batch {tiny} is inside the region; it does not measure "
                      "the fallback path[/yellow]")
    if small_in is not None:
        raise Failure(f"batch {small} is outside the region ({small_in}); nothing to compare")
    before = kernelevolve.coverage("norm_act")
    with torch.inference_mode():
        for x in (x_tiny, x_small):
            diff = (patched(x) - eager(x)).abs().max().item()
            if diff > ATOL * 10:
                raise Failure(f"patched norm_act differs from eager by {diff:.3g} at {x.shape}")
        console.print(f"dispatcher overhead: norm_act alone, batch {tiny} (outside the region, "
                      f"falls back) and {small} (inside), {rounds} interleaved rounds ...")
        t = per_call({
            "eager_tiny": lambda: eager(x_tiny),
            "patched_tiny": lambda: patched(x_tiny),
            "eager_small": lambda: eager(x_small),
            "patched_small": lambda: patched(x_small),
            "kernel_small": lambda: bound.call(x_small),
        }, rounds)
    after = kernelevolve.coverage("norm_act")
    session.unpatch()
    us = {k: med(v) * 1e6 for k, v in t.items()}
    res["us"] = us
    res["min_us"] = lo = {k: min(v) * 1e6 for k, v in t.items()}
    res["min_based"] = {"overhead_out_of_region_us": lo["patched_tiny"] - lo["eager_tiny"],
                        "dispatch_cost_in_region_us": lo["patched_small"] - lo["kernel_small"]}
    res["overhead_out_of_region_us"] = us["patched_tiny"] - us["eager_tiny"]
    res["overhead_in_region_vs_eager_us"] = us["patched_small"] - us["eager_small"]
    res["dispatch_cost_in_region_us"] = us["patched_small"] - us["kernel_small"]
    res["small_speedup"] = us["eager_small"] / us["patched_small"]
    slower_rounds = sum(p > e for p, e in zip(t["patched_small"], t["eager_small"]))
    res["patched_slower_median"] = us["patched_small"] > us["eager_small"]
    res["patched_slower_rounds"] = slower_rounds
    res["coverage_delta"] = {
        "calls": after.get("calls", 0) - before.get("calls", 0),
        "served": after.get("served", 0) - before.get("served", 0),
        "fallbacks": {k: v - before.get("fallbacks", {}).get(k, 0)
                      for k, v in after.get("fallbacks", {}).items()
                      if v - before.get("fallbacks", {}).get(k, 0)}}
    return res


# ---- output -----------------------------------------------------------------------------------

def _print_coverage(cov: dict[str, Any], title: str) -> None:
    table = Table(title=title)
    for col in ("kernel", "calls", "served", "fallbacks", "errors", "est. saved ms"):
        table.add_column(col, justify="left" if col in ("kernel", "fallbacks") else "right")
    for name, c in cov.items():
        fb = ", ".join(f"{k} {v}" for k, v in c.get("fallbacks", {}).items() if v) or "-"
        table.add_row(name, str(c["calls"]), str(c["served"]), fb, str(len(c.get("errors", []))),
                      f"{c.get('time_saved_ms', 0.0):.1f}")
    console.print(table)


def _print_overhead(o: dict[str, Any]) -> None:
    table = Table(title=f"norm_act alone, µs per call over {o['rounds']} interleaved rounds")
    for col in ("batch", "where", "stat", "eager", "patched", "kernel direct", "patched - eager",
                "patched - kernel"):
        table.add_column(col, justify="left" if col in ("where", "stat") else "right")
    for stat, us in (("median", o["us"]), ("fastest", o["min_us"])):
        table.add_row(str(o["tiny_batch"]), f"outside ({o['tiny_fallback_reason'] or 'inside!'})",
                      stat, f"{us['eager_tiny']:.1f}", f"{us['patched_tiny']:.1f}", "-",
                      f"{us['patched_tiny'] - us['eager_tiny']:+.1f}", "-")
    for stat, us in (("median", o["us"]), ("fastest", o["min_us"])):
        table.add_row(str(o["small_batch"]), "inside (smallest validated)", stat,
                      f"{us['eager_small']:.1f}", f"{us['patched_small']:.1f}",
                      f"{us['kernel_small']:.1f}",
                      f"{us['patched_small'] - us['eager_small']:+.1f}",
                      f"{us['patched_small'] - us['kernel_small']:+.1f}")
    console.print(table)
    console.print(f"patched slower than eager at batch {o['small_batch']}: "
                  f"{'YES' if o['patched_slower_median'] else 'no'} in the median, in "
                  f"{o['patched_slower_rounds']} of {o['rounds']} rounds; coverage of these calls: "
                  f"{o['coverage_delta']}")


def _summary(results: dict[str, Any]) -> None:
    table = Table(title="registry end to end: summary")
    table.add_column("what")
    table.add_column("figure", justify="right")
    for p in results["problems"]:
        if p.get("error"):
            table.add_row(f"{p['problem']}", f"[red]{p['error'][:90]}[/red]")
        else:
            how = "reused run" if p["reused"] else f"searched {p['search_s']:.0f} s"
            table.add_row(f"{p['problem']} -> {p['name']} v{p['version']} ({how})",
                          f"{p['speedup']:.2f}x" if p.get("speedup") else "-")
    e = results.get("e2e")
    if e:
        table.add_row(f"model batch {e['batch']}: eager ms", f"{e['ms']['eager']:.2f}")
        table.add_row("patched ms (speedup vs eager)",
                      f"{e['ms']['patched']:.2f} ({e['speedup']['patched']:.2f}x)")
        if "torch.compile" in e["ms"]:
            table.add_row("torch.compile ms (speedup vs eager)",
                          f"{e['ms']['torch.compile']:.2f} ({e['speedup']['torch.compile']:.2f}x)")
            table.add_row("patched vs torch.compile", f"{e['patched_vs_compile']:.2f}x")
            table.add_row("torch.compile compile time s", f"{e['compile']['compile_s']:.1f}")
        elif e.get("compile"):
            table.add_row("torch.compile", f"skipped: {e['compile']['why'][:80]}")
        table.add_row("patched vs eager max abs diff",
                      f"{e['max_abs_diff']:.3g} ({'ok' if e['allclose'] else 'NOT allclose'})")
    o = results.get("overhead")
    if o:
        lo = o["min_based"]
        table.add_row(f"overhead out of region (batch {o['tiny_batch']}) µs/call, median "
                      "(fastest round)", f"{o['overhead_out_of_region_us']:+.1f} "
                      f"({lo['overhead_out_of_region_us']:+.1f})")
        table.add_row(f"dispatch cost in region (batch {o['small_batch']}) µs/call, median "
                      "(fastest round)", f"{o['dispatch_cost_in_region_us']:+.1f} "
                      f"({lo['dispatch_cost_in_region_us']:+.1f})")
        table.add_row(f"patched vs eager at batch {o['small_batch']}",
                      f"{o['small_speedup']:.2f}x, slower in {o['patched_slower_rounds']}/"
                      f"{o['rounds']} rounds")
    for err in results.get("errors", []):
        table.add_row("[red]error[/red]", f"[red]{err[:90]}[/red]")
    console.print(table)


def _load() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# ---- main -------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-evals", type=int, default=6, help="evaluations per search (6)")
    ap.add_argument("--batch", type=int, default=1024, help="model batch (1024)")
    ap.add_argument("--reps", type=int, default=30, help="timed repeats of the model (30)")
    ap.add_argument("--rounds", type=int, default=21,
                    help="rounds of the dispatcher-overhead timing (21)")
    ap.add_argument("--tiny-batch", type=int, default=4,
                    help="out-of-region batch of the overhead timing (4)")
    ap.add_argument("--workspace", type=Path, default=None,
                    help="workspace to use and reuse (default: a temporary one, removed after)")
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--cold-compile", action="store_true",
                    help="torch.compile with inductor's caches off (the compile time of a "
                         "first run)")
    ap.add_argument("--malloc", choices=("pinned", "default"), default="pinned",
                    help="glibc malloc thresholds: pinned at start (default) or glibc's "
                         "adaptive ones (see the docstring)")
    ap.add_argument("--json", type=Path, metavar="PATH", help="also write the results here")
    args = ap.parse_args()

    if args.cold_compile:
        os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"
        warnings.filterwarnings("ignore", message=".*force_disable_caches")
    tmp = args.workspace is None
    try:
        ws = Path(tempfile.mkdtemp(prefix="registry_e2e_")) if tmp else args.workspace.resolve()
        ws.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        console.print(f"[red]workspace {args.workspace}: {exc.strerror or exc}[/red]")
        return 2
    registry_dir = ws / "registry"
    results: dict[str, Any] = {"workspace": str(ws), "registry": str(registry_dir),
                               "args": {k: str(v) if isinstance(v, Path) else v
                                        for k, v in vars(args).items()},
                               "problems": [], "errors": []}
    results["malloc"] = pin_malloc() if args.malloc == "pinned" else "glibc default (adaptive)"
    results["load_before"] = _load()
    console.print(f"workspace {ws}" + (" (temporary)" if tmp else "")
                  + f"; load average {results['load_before']}; malloc {results['malloc']}")
    try:
        for problem in PROBLEMS:
            row: dict[str, Any] = {"problem": problem}
            results["problems"].append(row)
            try:
                row.update(search(problem, ws, args.max_evals))
                row.update(promote_default(ws, registry_dir, row["run_id"]))
                console.print(f"  run {row['run_id']}: {row['verdict']}; "
                              f"{'promoted' if row['promoted'] else 'already'} "
                              f"{row['name']} v{row['version']} default")
            except Failure as exc:
                row["error"] = str(exc)
                console.print(f"[red]  {problem}: {exc}[/red]")
        if not any("error" not in r for r in results["problems"]):
            raise Failure("no kernel was promoted; nothing to patch")

        import torch

        results["torch"] = torch.__version__
        results["threads"] = torch.get_num_threads()
        try:
            e2e = end_to_end(registry_dir, args.batch, args.reps, not args.no_compile)
            e2e.pop("session").unpatch()
            results["e2e"] = e2e
            table = Table(title=f"whole model forward, batch {args.batch}, median of "
                                f"{args.reps} interleaved repeats")
            for col in ("variant", "median ms", "min ms", "speedup vs eager",
                        "page faults/call"):
                table.add_column(col, justify="left" if col == "variant" else "right")
            for name, ms in e2e["ms"].items():
                table.add_row(name, f"{ms:.2f}", f"{e2e['min_ms'][name]:.2f}",
                              f"{e2e['speedup'][name]:.2f}x",
                              f"{e2e['page_faults_per_call'][name]:.0f}")
            console.print(table)
            _print_coverage(e2e["coverage"], "kernelevolve.coverage() after the model timing")
        except Failure as exc:
            results["errors"].append(f"end to end: {exc}")
            console.print(f"[red]end to end: {exc}[/red]")
        if any(r.get("name") == "norm_act" for r in results["problems"]):
            try:
                results["overhead"] = overhead(registry_dir, args.tiny_batch, args.rounds)
                _print_overhead(results["overhead"])
                import kernelevolve

                results["coverage_final"] = kernelevolve.coverage()
                _print_coverage(results["coverage_final"],
                                "kernelevolve.coverage() at the end")
            except Failure as exc:
                results["errors"].append(f"overhead: {exc}")
                console.print(f"[red]overhead: {exc}[/red]")
    except Failure as exc:
        results["errors"].append(str(exc))
        console.print(f"[red]{exc}[/red]")
    except KeyboardInterrupt:
        console.print("[red]interrupted[/red]")
        return 130
    finally:
        if tmp:
            shutil.rmtree(ws, ignore_errors=True)
    results["load_after"] = _load()
    _summary(results)
    console.print(f"load average before {results['load_before']}, after "
                  f"{results['load_after']} on {os.cpu_count()} cores (other processes make "
                  "the timings noisy; the fastest-round figures are the least affected)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str) + "\n")
        console.print(f"wrote {args.json}")
    ok = not results["errors"] and not any(r.get("error") for r in results["problems"]) \
        and results.get("e2e", {}).get("allclose", False)
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
