"""Promote each hot spot's safe improvement and serve the kernels back into the model.

Promotion goes into WORKSPACE/registry as the default version under the problem's name; a run
already promoted (its run id in a version's provenance) is not promoted again. Serving: the
model is built again and outlined (graph.py: each region one submodule of the problem's
`Model` class, holding the model's own weights), then `kernelevolve.patch` maps every instance
of a promoted kind to its kernel, by path. The registry's dispatcher serves a call only inside
the validated region (shapes, dtypes, layout the problem's cases checked) and runs the region's
own PyTorch code otherwise, so the patched model falls back outside it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


def registry_dir(workspace: Path) -> Path:
    return Path(workspace) / "registry"


def promote_safe(workspace: Path, rows: list[dict[str, Any]],
                 spots: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One verdict per extracted hot spot: its search's outcome and, for a safe improvement,
    the registry name and version now serving it."""
    from kernelevolve.registry import Registry, RegistryError
    from kernelevolve.registry.promote import promote
    from kernelevolve.store import Store

    by_path = {r["path"]: r for r in rows}
    out = []
    with Store.open(workspace) as store, Registry.open(registry_dir(workspace)) as reg:
        for h in spots:
            if not h.get("problem"):
                out.append({"kind": h["kind"], "label": h["label"], "verdict": "not extracted",
                            "reason": h.get("error")})
                continue
            row = by_path.get(h["problem"], {})
            v = {"kind": h["kind"], "label": h["label"], "problem": h["problem"],
                 "run_id": row.get("run_id"), "status": row.get("status"),
                 "verdict": row.get("verdict") or row.get("status"),
                 "message": row.get("message") or row.get("reason"),
                 "safe": bool(row.get("safe")), "speedup": row.get("measured_speedup"),
                 "interval": row.get("interval"), "evals": row.get("evals"),
                 "served": None}
            if v["safe"] and row.get("run_id"):
                try:
                    v["served"] = _promoted(reg, row["run_id"]) or _promote(
                        promote, store, reg, row["run_id"], h["name"])
                    v["promoted"] = v["served"]  # kept when the in-place check unserves it
                except RegistryError as exc:
                    v["served"] = None
                    v["message"] = f"not promoted: {exc}"
            out.append(v)
    return out


def _promoted(reg: Any, run_id: str) -> dict[str, Any] | None:
    for name in reg.names():
        default, _ = reg.serving(name)
        if default is not None and default.entry.get("provenance", {}).get("run") == run_id:
            return {"name": default.name, "version": default.version}
    return None


def _promote(promote: Any, store: Any, reg: Any, run_id: str, name: str) -> dict[str, Any]:
    rec = promote(store, reg, run_id, name=name, state="default",
                  why="kernelevolve tune-model: a safe improvement of an extracted hot spot")
    return {"name": rec.name, "version": rec.version}


def patched_model(mf: Any, workspace: Path, spots: list[dict[str, Any]],
                  verdicts: list[dict[str, Any]], example: list) -> tuple[Any, Any]:
    """(the outlined model with promoted kernels patched in, the patch session or None)."""
    from kernelevolve.model.outline import find_regions

    outlined = find_regions(mf.build(), example)
    served = {v["kind"]: v["served"]["name"] for v in verdicts if v.get("served")}
    modules = {path: served[h["kind"]] for h in spots if h["kind"] in served
               for path in h["instances"]}
    if not modules:
        return outlined.module, None
    from kernelevolve.registry.patching import patch

    session = patch(outlined.module, registry_dir(workspace), modules=modules)
    return outlined.module, session


def tuned_model(model_file: str | Path, workspace: str | Path = ".kernelevolve") -> tuple[Any, Any]:
    """(the model with tune-model's kernels served, the patch session) for a model file that
    `kernelevolve tune-model` finished in `workspace` (its newest summary for that file)."""
    import json

    from kernelevolve.errors import UsageError
    from kernelevolve.model.workload import load_model_file

    path = Path(model_file).resolve()
    found = sorted((Path(workspace) / "models").glob(f"{path.stem}-*/summary.json"),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    for summary_path in found:
        summary = json.loads(summary_path.read_text())
        if Path(summary.get("model_path", "")) == path:
            mf = load_model_file(path)
            example = mf.inputs(mf.workload[0])
            return patched_model(mf, Path(workspace), summary["hot_spots"],
                                 summary["verdicts"], example)
    raise UsageError(f"{model_file}: no finished tune-model run for it in {workspace}; run "
                     f"`kernelevolve tune-model {model_file} --workspace {workspace}` first")
