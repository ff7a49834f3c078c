"""`promote`: a run's accepted kernel into the registry, with everything serving must check.

The entry records, from the run's store (what trusted processes wrote, never what the kernel's
process said about itself):

- the kernel's source and the compiled libraries it loaded, from the driver's build log: the
  bytes' sha256, the source hash and flags of each `load_cpp` call, the compiler;
- the problem (its source, digest, and the digest of its `Model` class, which is how `patch`
  recognises the modules it may replace);
- the validated region (region.py) and the init inputs and module signature of each validated
  case (binding.py), computed from the problem's cases, held-out one included;
- the tolerance, the evaluation (speedup and interval, per case ms and interval), the
  fingerprint of the machine that measured it, the harness that measured it (version and a
  hash of its source), and provenance (run, node, operator, model, workspace).

A node is promotable when it passed every gate; one that is not a safe win (its interval does
not clear 1.0x) needs `force`, since promoting it would ship a kernel that may be slower.
"""
from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from typing import Any

from kernelevolve.registry.db import KernelRecord, Registry, RegistryError
from kernelevolve.store import Store
from kernelevolve.version import __version__, harness_hash


def class_digest(source: str, class_name: str = "Model", as_name: str | None = None
                 ) -> str | None:
    """A digest of a top-level class's definition that ignores formatting, comments and line
    numbers (and its name, read as `as_name`, when given)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            node.name = as_name or node.name
            return hashlib.sha256(ast.dump(node, annotate_fields=False).encode()).hexdigest()
    return None


def promote(store: Store, registry: Registry, run_id: str, *, node: int | None = None,
            name: str | None = None, state: str = "shadow", force: bool = False,
            who: str | None = None, why: str = "") -> KernelRecord:
    run = store.get_run(run_id)  # `last`: the newest run that evaluated something
    run_id = run.id
    node_id = _pick_node(run, node)
    rec = store.node(run_id, node_id)
    stored = store.evaluation(run_id, node_id)  # the registry records it as JSON
    result = stored.to_dict() if stored is not None else {}
    if not rec.accepted or not result.get("accepted"):
        raise RegistryError(f"node {node_id} of run {run_id} was not accepted (stage "
                            f"{rec.stage}); only a kernel that passed every gate can be promoted")
    evaluation = _evaluation(run, node_id, result)
    low = (evaluation.get("interval") or [None])[0]
    if not force and (low is None or low <= 1.0):
        raise RegistryError(f"node {node_id} of run {run_id} is not a safe win (speedup interval "
                            f"{_fmt_interval(evaluation.get('interval'))}); pass --force to "
                            "promote it anyway")
    problem_src = _problem_source(run)
    source = store.source(run_id, node_id)
    from kernelevolve.registry.validated import validated_cases

    checked = {c["name"] for c in result.get("cases", []) if c.get("correct")}
    region, binding = validated_cases(run.problem_path, run.platform or "cpu", checked)
    entry = {
        "source": {"file": "kernel.py", "sha256": hashlib.sha256(source.encode()).hexdigest(),
                   "object": registry.objects.put(source)},
        "libraries": _libraries(store, registry, run_id, node_id, result),
        "problem": {"name": Path(run.problem_path).parent.name
                    if Path(run.problem_path).stem == "problem" else Path(run.problem_path).stem,
                    "path": run.problem_path, "sha256": run.problem_hash,
                    "object": registry.objects.put(problem_src),
                    "model_digest": class_digest(problem_src.decode(errors="replace"))},
        "region": region, "binding": binding,
        "tolerance": _tolerance(problem_src),
        "evaluation": evaluation,
        "fingerprint": result.get("fingerprint") or run.fingerprint,
        "platform": run.platform or "cpu", "language": result.get("language", "unknown"),
        "harness": {"version": __version__, "source_sha256": harness_hash()},
        "provenance": {"run": run_id, "node": node_id, "operator": rec.operator,
                       "model": (run.config or {}).get("llm"), "workspace": str(Path(store.workspace).resolve()),
                       "rationale": rec.rationale[:300]},
    }
    name = name or _default_name(entry["problem"]["name"])
    return registry.add(name, entry, state=state, who=who,
                        why=why or f"promoted from run {run_id} node {node_id}")


def _pick_node(run: Any, node: int | None) -> int:
    if node is not None:
        return node
    outcome = run.outcome or {}
    if outcome.get("node_id") is None or not outcome.get("safe"):
        raise RegistryError(f"run {run.id} has no safe improvement to promote "
                            f"({outcome.get('message') or run.status}); pass --node N to pick "
                            "a node yourself")
    return int(outcome["node_id"])


def _evaluation(run: Any, node_id: int, result: dict[str, Any]) -> dict[str, Any]:
    final = next((f for f in (run.outcome or {}).get("finalists", [])
                  if f.get("node_id") == node_id), None)
    cases = [{"name": c["name"], "weight": c.get("weight"), "ref_ms": c.get("ref_ms"),
              "cand_ms": c.get("cand_ms"), "speedup": c.get("speedup"),
              "sol_fraction": c.get("sol_fraction"), "held_out": c.get("held_out", False),
              "speedup_ci": c.get("speedup_ci"), "timing_stop": c.get("timing_stop")}
             for c in result.get("cases", [])]
    if final is not None:
        speedup, interval, when = final.get("speedup"), final.get("interval"), "final"
    else:
        speedup, interval, when = result.get("speedup"), result.get("speedup_ci"), "search"
    return {"speedup": speedup, "interval": interval, "measured": when,
            "baseline": result.get("baseline", "eager"), "cases": cases,
            "sol_fraction": result.get("sol_fraction")}


def _problem_source(run: Any) -> bytes:
    path = Path(run.problem_path or "")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise RegistryError(f"the run's problem {path} cannot be read ({exc.strerror}); the "
                            "registry needs the exact problem the kernel was checked on") from None
    if hashlib.sha256(data).hexdigest() != run.problem_hash:
        raise RegistryError(f"{path} changed since run {run.id} checked the kernel against it; "
                            "restore it or optimise the new version")
    return data


def _libraries(store: Store, registry: Registry, run_id: str, node_id: int,
               result: dict[str, Any]) -> list[dict[str, Any]]:
    builds = result.get("builds")
    if result.get("libraries") and not builds:
        raise RegistryError(f"node {node_id} of run {run_id} loaded compiled libraries but its "
                            "evaluation has no build record (an older kernelevolve); evaluate "
                            "it again with this version")
    out = []
    for b in builds or []:
        data = store.artifact(run_id, node_id, "library", b["file"])
        if hashlib.sha256(data).hexdigest() != b["sha256"]:
            raise RegistryError(f"the stored library {b['file']} of node {node_id} does not match "
                                "the hash the build service recorded; the workspace is damaged")
        out.append({**b, "object": registry.objects.put(data)})
    return out


def _tolerance(problem_src: bytes) -> dict[str, float] | None:
    """The problem's TOLERANCE literal (None: the harness's per-dtype defaults)."""
    try:
        tree = ast.parse(problem_src)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "TOLERANCE"
                                                for t in node.targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                return None
            return {k: float(v) for k, v in value.items()} if isinstance(value, dict) else None
    return None


def _default_name(problem_name: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", problem_name).strip("_.-") or "kernel"
    return name if name[0].isalpha() else f"k_{name}"[:64]


def _fmt_interval(interval: Any) -> str:
    if not interval or interval[0] is None:
        return "unknown"
    return f"{interval[0]:.3f}-{interval[1]:.3f}x"
