"""The model loop end to end on every example model, and side by side with the hand-written
path on examples/recsys.

For each model file (examples/models/gpt_block.py, dlrm.py, conv_block.py and
examples/recsys/workload.py) it runs the real command,

    kernelevolve tune-model MODEL --workspace WS --max-evals N --top 5 --json OUT

(built-in synthesizer and tune, no LLM) and prints, per model: the hot-spot table (top 5 with
time shares and Amdahl bounds), the extracted problems and their verdicts, the share of the
time the problems cover and what was left out, and the whole model's speedup over eager and
over torch.compile with its interval, outputs compared.

Then, for recsys (unless --no-hand): the hand-written path of benchmarks/registry_e2e.py
(search and promote examples/recsys/{norm_act,embedding_bag,fm_interaction}.py into a registry
of its own, patch a RecModel by class) and the tune-model path (the regions it extracted, served
by path into the outlined model) are measured in ONE interleaved measurement with eager and
torch.compile, on the same inputs (model/measure.py: paired reps, rotated order, bootstrap
intervals, pinned malloc thresholds), so the two patched speedups are comparable.

    python benchmarks/model_loop.py [--models gpt_block,dlrm,conv_block,recsys]
        [--workspace DIR] [--max-evals 6] [--reps 15] [--no-hand] [--json out.json]

With --workspace holding an earlier pass, finished searches are reused (tune-model resumes;
the hand path reuses completed runs). From scratch on a 2-core CPU: about 5 minutes a model.
Exit status 0 when every model's loop ran and its outputs matched, else 1.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
MODELS = {"gpt_block": ROOT / "examples" / "models" / "gpt_block.py",
          "dlrm": ROOT / "examples" / "models" / "dlrm.py",
          "conv_block": ROOT / "examples" / "models" / "conv_block.py",
          "recsys": ROOT / "examples" / "recsys" / "workload.py"}

console = Console()
if not console.is_terminal:
    console.width = 160


def tune(name: str, ws: Path, max_evals: int, reps: int) -> tuple[int, dict | None, str]:
    out = ws / f"{name}.summary.json"
    out.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "kernelevolve.cli", "tune-model", str(MODELS[name]),
           "--workspace", str(ws / name), "--max-evals", str(max_evals), "--top", "5",
           "--reps", str(reps), "--json", str(out)]
    console.print(f"[bold]{name}[/bold]: {' '.join(cmd[2:])}")
    proc = subprocess.run(cmd, capture_output=True, text=True)
    (ws / f"{name}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
    print(proc.stdout)
    data = json.loads(out.read_text()) if out.is_file() else None
    last = proc.stderr.strip().splitlines()
    return proc.returncode, data, last[-1] if last else ""


def _registry_e2e() -> Any:
    spec = importlib.util.spec_from_file_location("registry_e2e", HERE / "registry_e2e.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def side_by_side(ws: Path, tune_summary: dict, max_evals: int, reps: int) -> dict[str, Any]:
    """eager, hand-patched, tune-patched and torch.compile in one interleaved measurement."""
    import torch

    import kernelevolve
    from kernelevolve.model.measure import measure_model, pin_malloc
    from kernelevolve.model.serve import patched_model
    from kernelevolve.model.workload import load_model_file

    malloc = pin_malloc()
    e2e = _registry_e2e()
    hand_ws, hand_reg = ws / "hand", ws / "hand" / "registry"
    hand_ws.mkdir(parents=True, exist_ok=True)
    for problem in e2e.PROBLEMS:
        found = e2e.search(problem, hand_ws, max_evals)
        e2e.promote_default(hand_ws, hand_reg, found["run_id"])
    mf = load_model_file(MODELS["recsys"])
    inputs = [(c.name, c.weight, mf.inputs(c)) for c in mf.cases]
    hand = mf.build()
    hand_session = kernelevolve.patch(hand, registry=hand_reg)
    tuned, tune_session = patched_model(mf, Path(tune_summary["workspace"]),
                                        tune_summary["hot_spots"], tune_summary["verdicts"],
                                        inputs[0][2])
    variants = {"eager": mf.build(), "hand": hand, "tune": tuned,
                "compile": torch.compile(mf.build())}
    try:
        figures = measure_model(variants, inputs, reps=reps)
    finally:
        hand_session.unpatch()
        if tune_session is not None:
            tune_session.unpatch()
    figures["malloc"] = malloc
    return figures


def _line(name: str, rc: int, data: dict | None, why: str) -> dict[str, Any]:
    if data is None:
        return {"model": name, "exit": rc, "error": why}
    m = data["model"]
    return {"model": name, "exit": rc, "coverage": data["coverage"],
            "hot_spots": [(h["label"], round(h["share"], 3), round(h["amdahl_2x"], 3),
                           round(h["amdahl_free"], 3)) for h in data["hot_spots"]],
            "verdicts": [(v["label"], v.get("verdict"), v.get("speedup"),
                          bool(v.get("served"))) for v in data["verdicts"]],
            "left_out": [(r["what"], r.get("share")) for r in data["left_out"]],
            "speedup": m["speedup"], "interval": m["interval"], "eager_ms": m["eager_ms"],
            "patched_ms": m["patched_ms"], "compile_ms": m["compile_ms"],
            "speedup_over_compile": m["speedup_over_compile"],
            "predicted": m["predicted_speedup"], "outputs_match": m["outputs_match"],
            "max_abs_err": m["max_abs_err"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--workspace", type=Path, default=None)
    ap.add_argument("--max-evals", type=int, default=6)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--no-hand", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        print(f"unknown model(s) {', '.join(unknown)}; known: {', '.join(MODELS)}",
              file=sys.stderr)
        return 2
    ws = args.workspace or Path(tempfile.mkdtemp(prefix="ke-model-loop-"))
    ws.mkdir(parents=True, exist_ok=True)
    rows, ok, summaries = [], True, {}
    for name in names:
        rc, data, why = tune(name, ws, args.max_evals, args.reps)
        rows.append(_line(name, rc, data, why))
        summaries[name] = data
        ok &= data is not None and bool(data["model"]["outputs_match"])
    result: dict[str, Any] = {"workspace": str(ws), "models": rows}
    if "recsys" in names and not args.no_hand and summaries.get("recsys"):
        console.print("[bold]recsys side by side[/bold]: hand-written problems vs tune-model, "
                      "one interleaved measurement")
        fig = side_by_side(ws, summaries["recsys"], args.max_evals, args.reps)
        result["recsys_side_by_side"] = {k: fig[k] for k in ("speedup", "over", "outputs_match",
                                                              "max_abs_err", "failed")}
        result["recsys_side_by_side"]["ms"] = {k: v["ms"] for k, v in fig["variants"].items()}
        for k, v in [*fig["speedup"].items(), ("tune/hand", fig["over"]["tune_over_hand"])]:
            console.print(f"  {k:9s} {v['value']:.2f}x "
                          f"{'over eager ' if '/' not in k else ''}"
                          f"[{v['interval'][0]:.2f}, {v['interval'][1]:.2f}]")
        ok &= all(fig["outputs_match"].values())
    console.print_json(json.dumps(rows, default=str))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
