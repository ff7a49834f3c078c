"""`kernelevolve tune-model`: profile -> extract -> optimise -> promote -> patch -> measure.

State lives in WORKSPACE/models/<name>-<digest>/ (the digest covers the model file's bytes and
the extraction settings): analysis.json (the profiles, the hot spots, what was left out),
problems/*.py (the extracted problems), and the optimisation campaign in
WORKSPACE/benches/tune-<name>-<digest>.json, whose runs live in the workspace's store. Running
the same command again reuses the analysis and the problem files byte for byte, so the
campaign resumes: finished searches are kept, an interrupted one resumes from its store, and
promotion skips a run already promoted. Only the final whole-model measurement runs again.

Budget: `max_evals` per hot spot on average; the total (max_evals x hot spots) is spread by
each hot spot's Amdahl weight (its share of the time), at least 2 evaluations each.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kernelevolve import interrupts
from kernelevolve.errors import UsageError
from kernelevolve.model.cases import timed_cases

ANALYSIS_VERSION = 1


@dataclass
class TuneOptions:
    top: int = 5
    max_evals: int = 6
    min_share: float = 0.01        # a region below this share of the time is not extracted
    profile_reps: int = 5
    measure_reps: int = 15
    compile: bool = True
    in_situ: bool = True           # serve only the kernels that pay inside the model
    flags: dict[str, Any] = field(default_factory=dict)   # passed to every search

    def key(self) -> str:
        return json.dumps({"top": self.top, "min_share": self.min_share}, sort_keys=True)


def _atomic_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=1, default=str)
    os.replace(tmp, path)


def state_dir(workspace: Path, model_path: Path, opts: TuneOptions) -> Path:
    digest = hashlib.sha256(model_path.read_bytes() + opts.key().encode()).hexdigest()[:10]
    return Path(workspace) / "models" / f"{model_path.stem}-{digest}"


def analyse(mf: Any, out: Path, opts: TuneOptions, say: Callable[[str], None]) -> dict:
    """Profile the model by module, find its regions, profile those, extract the hot ones."""
    from kernelevolve.model.extract import hot_spots, record_calls
    from kernelevolve.model.outline import find_regions
    from kernelevolve.model.profile import profile
    from kernelevolve.model.write import write_problems

    cases = timed_cases(mf)
    say("profiling the model by module")
    model = mf.build()
    modules = profile(model, cases, reps=opts.profile_reps)
    say("capturing its graph and finding fusable regions")
    outlined = find_regions(model, cases[0][2]())
    say(f"profiling {len(outlined.regions)} region(s)")
    regions = profile(outlined.module, cases, reps=opts.profile_reps)
    spots = hot_spots(outlined, regions)
    hot = [h for h in spots if h.share >= opts.min_share][:opts.top]
    cold = [h for h in spots if h not in hot]
    say(f"extracting {len(hot)} hot spot(s)")
    records = record_calls(outlined.module, [p for h in hot for p in h.instances], cases)
    write_problems(hot, outlined, regions, records, [(n, w) for n, w, _ in cases],
                   out / "problems", mf.name)
    left = left_out(outlined, regions, cold)
    extracted = [h for h in hot if h.problem]
    return {
        "version": ANALYSIS_VERSION, "model": mf.name, "path": str(mf.path),
        "cases": [{"name": c.name, "weight": c.weight, "held_out": c.held_out}
                  for c in mf.cases],
        "profile": modules, "regions_profile": {k: v for k, v in regions.items()
                                                if k in ("timing", "hook_cost_us", "cases",
                                                         "total_ms", "hooked_total_ms")},
        "hot_spots": [h.to_dict() for h in hot],
        "left_out": left,
        "coverage": sum(h.share for h in extracted),
    }


def left_out(outlined: Any, prof: dict[str, Any], cold: list[Any]) -> list[dict[str, Any]]:
    """Everything the extracted problems do not cover, with its share and why."""
    total = prof["hooked_total_ms"] or 1.0
    region_paths = {s.name for s in outlined.regions}
    rows: dict[str, dict[str, Any]] = {}
    for inst in prof["instances"]:
        path = inst["path"]
        if path == "(model)":
            rows["inline"] = {"what": "ops between modules outside any region (matmul, cat, "
                                      "stack, shape glue)", "share": inst["excl_ms"] / total,
                              "why": "not fusable by the region rules (see out_of_reach)"}
            continue
        if path in region_paths or path.startswith(tuple(p + "." for p in region_paths)):
            continue
        key = inst["class"]
        row = rows.setdefault(key, {"what": f"{key} modules", "share": 0.0, "instances": 0,
                                    "why": _why_module(key, outlined)})
        row["share"] += inst["excl_ms"] / total
        row["instances"] += 1
    for h in cold:
        rows[f"cold {h.kind}"] = {"what": f"region {h.label}", "share": h.share,
                                  "why": "below the share or top-N cut"}
    for item in outlined.out_of_reach:
        if not any(item.get("what") == r.get("what") for r in rows.values()):
            rows[f"oor {item.get('what')}"] = {"what": item.get("what"), "share": None,
                                               "why": item.get("why")}
    return sorted(rows.values(), key=lambda r: -(r["share"] or 0.0))


def _why_module(cls: str, outlined: Any) -> str:
    for item in outlined.out_of_reach:
        if cls in str(item.get("what", "")):
            return str(item.get("why"))
    if cls in ("Linear", "Conv1d", "Conv2d", "Conv3d", "Bilinear"):
        return "a vendor GEMM / convolution (oneDNN, cuBLAS): stays eager"
    return "no region rule covers it"


def load_or_analyse(mf: Any, workspace: Path, opts: TuneOptions,
                    say: Callable[[str], None]) -> tuple[Path, dict]:
    out = state_dir(workspace, Path(mf.path), opts)
    path = out / "analysis.json"
    if path.is_file():
        try:
            data = json.loads(path.read_text())
            if data.get("version") == ANALYSIS_VERSION and all(
                    Path(h["problem"]).is_file() for h in data["hot_spots"] if h.get("problem")):
                say(f"reusing the analysis in {out}")
                return out, data
        except (ValueError, KeyError, TypeError):
            pass
    data = analyse(mf, out, opts, say)
    _atomic_json(path, data)
    return out, data


def budgets(spots: list[dict[str, Any]], max_evals: int) -> dict[str, int]:
    """Evaluations per extracted problem: max_evals x count, spread by share, >= 2 each."""
    live = [h for h in spots if h.get("problem")]
    total = max_evals * len(live)
    shares = sum(h["share"] for h in live) or 1.0
    return {h["problem"]: max(2, round(total * h["share"] / shares)) for h in live}


def optimise(workspace: Path, out: Path, analysis: dict[str, Any], opts: TuneOptions,
             say: Callable[[str, dict[str, Any]], None] | None = None,
             tell: Callable[[str], None] = lambda m: None) -> list[dict[str, Any]]:
    """The hot spots' searches as one resumable campaign; returns its rows. A resumed
    campaign keeps the settings and budgets it started with (its runs were made with them)."""
    from kernelevolve.bench.campaign import Campaign
    from kernelevolve.bench.runner import run_campaign

    problems = [Path(h["problem"]) for h in analysis["hot_spots"] if h.get("problem")]
    if not problems:
        return []
    flags = {"max_evals": opts.max_evals, "compile_figures": False, "time_compile": False,
             **{k: v for k, v in opts.flags.items() if v is not None}}
    camp, resumed = Campaign.open(workspace, f"tune-{out.name}", problems, flags)
    if resumed:
        stored = camp.data.get("settings", {})
        changed = sorted(k for k in set(stored) | set(flags) if stored.get(k) != flags.get(k))
        done = sum(1 for r in camp.rows if r["status"] in ("done", "failed", "skipped"))
        kept = ", ".join(f"{k}={stored.get(k)}" for k in changed)
        tell(f"resuming campaign {camp.name}: {done} of {len(camp.rows)} searches finished"
             + (f"; it keeps its first settings ({kept}); use another --workspace to start "
                "over with new ones" if changed else ""))
    per = budgets(analysis["hot_spots"], opts.max_evals)
    for row in camp.rows:
        row.setdefault("max_evals", per.get(row["path"], opts.max_evals))
    camp.save()
    run_campaign(camp, Path(workspace), camp.data["settings"], say=say)
    return camp.rows


def predicted_speedup(spots: list[dict[str, Any]], verdicts: list[dict[str, Any]]) -> float:
    """Amdahl: the model's speedup if each served kind ran at its kernel's measured speedup
    and everything else stayed as profiled."""
    by_kind = {v["kind"]: v for v in verdicts}
    saved = 0.0
    for h in spots:
        v = by_kind.get(h["kind"], {})
        k = v.get("speedup") if v.get("served") else None
        if k and k > 0:
            saved += h["share"] * (1.0 - 1.0 / k)
    return 1.0 / (1.0 - min(saved, 0.999999))


def measure(mf: Any, workspace: Path, analysis: dict[str, Any], verdicts: list[dict[str, Any]],
            opts: TuneOptions) -> dict[str, Any]:
    """Eager vs patched vs torch.compile on the workload's cases and the held-out ones."""
    from kernelevolve.model.measure import measure_model, pin_malloc
    from kernelevolve.model.serve import patched_model

    malloc = pin_malloc()

    from kernelevolve.registry.patching import coverage, reset_coverage

    inputs = [(c.name, c.weight, mf.inputs(c)) for c in mf.cases]
    eager = mf.build()
    reset_coverage()  # before patching: the dispatchers keep the counters they start with
    patched, session = patched_model(mf, workspace, analysis["hot_spots"], verdicts,
                                     inputs[0][2])
    variants: dict[str, Any] = {"eager": eager, "patched": patched}
    if opts.compile:
        import torch

        variants["compile"] = torch.compile(mf.build())
    try:
        figures = measure_model(variants, inputs, reps=opts.measure_reps)
        figures["coverage"] = coverage()
        figures["malloc"] = malloc
        figures["patch_report"] = session.report() if session is not None else []
    finally:
        if session is not None:
            session.unpatch()
    return figures


def model_summary(figures: dict[str, Any]) -> dict[str, Any]:
    """The `model` object of --json: the issue's named figures."""
    v, sp = figures.get("variants", {}), figures.get("speedup", {})
    eager = v.get("eager", {}).get("ms")
    patched = v.get("patched", {}).get("ms")
    compiled = v.get("compile", {}).get("ms")
    return {
        "eager_ms": eager, "patched_ms": patched, "compile_ms": compiled,
        "speedup": (sp.get("patched") or {}).get("value"),
        "interval": (sp.get("patched") or {}).get("interval"),
        "compile_speedup": (sp.get("compile") or {}).get("value"),
        "speedup_over_compile": (figures.get("over", {}).get("patched_over_compile")
                                 or {}).get("value"),
        "interval_over_compile": (figures.get("over", {}).get("patched_over_compile")
                                  or {}).get("interval"),
        "max_abs_err": (figures.get("max_abs_err") or {}).get("patched"),
        "outputs_match": (figures.get("outputs_match") or {}).get("patched"),
        "compile_failed": (figures.get("failed") or {}).get("compile"),
    }


def tune_model(path: Path, workspace: Path, opts: TuneOptions,
               say: Callable[[str], None] = lambda m: None,
               on_row: Callable[[str, dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """The whole loop; returns the summary (see model_summary and the CLI's --json)."""
    from kernelevolve.model.serve import promote_safe
    from kernelevolve.model.workload import load_model_file

    mf = load_model_file(path)
    out, analysis = load_or_analyse(mf, Path(workspace), opts, say)
    if not any(h.get("problem") for h in analysis["hot_spots"]):
        raise UsageError(f"{path}: nothing hot enough to extract (no region above "
                         f"{opts.min_share:.0%} of the time could be rebuilt); see "
                         "`kernelevolve profile` for where the time goes")
    rows = optimise(Path(workspace), out, analysis, opts, on_row, say)
    interrupts.check()  # a SIGTERM swallowed by a finalizer stops between the phases
    verdicts = promote_safe(Path(workspace), rows, analysis["hot_spots"])
    if opts.in_situ:
        from kernelevolve.model.insitu import check_in_place

        verdicts = check_in_place(mf, Path(workspace), analysis["hot_spots"], verdicts, say=say)
    interrupts.check()
    say("measuring the whole model: eager, patched" + (", torch.compile" if opts.compile else ""))
    figures = measure(mf, Path(workspace), analysis, verdicts, opts)
    model = model_summary(figures)
    model["predicted_speedup"] = predicted_speedup(analysis["hot_spots"], verdicts)
    lo = (model.get("interval") or [None])[0]
    safe = bool(model["outputs_match"]) and lo is not None and lo > 1.0 and any(
        v.get("served") for v in verdicts)
    summary = {"model_path": str(mf.path), "state": str(out), "workspace": str(workspace),
               "hot_spots": analysis["hot_spots"], "verdicts": verdicts,
               "left_out": analysis["left_out"], "coverage": analysis["coverage"],
               "profile": analysis["profile"], "model": model, "measurement": figures,
               "safe": safe}
    _atomic_json(out / "summary.json", summary)
    return summary
