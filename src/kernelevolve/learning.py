"""What a run teaches the next one: learned knowledge notes with full provenance.

At the end of a run (and of a resumed run) two kinds of notes are written to the workspace's
learned-notes folder: the winning transformation with its measured gain and cases, and each
recurring failure (a gate that rejected three or more candidates for the same reason). The
next run's index includes that folder, so its prompts can cite them; notes whose provenance
no longer matches the machine are ranked lower and flagged for revalidation.
"""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from kernelevolve.harness.protocol.text import REASON_LABEL, fence, quoted
from kernelevolve.search.graph import ROOT, SearchGraph
from kernelevolve.types import EvalResult

_OP_CLASSES = (
    (("softmax", "log_softmax"), ("softmax", "reduction")),
    (("layer_norm", "rms_norm", "rsqrt", "native_layer_norm", "group_norm"), ("norm", "reduction")),
    (("sum", "mean", "amax", "amin", "max", "min", "var", "std", "prod"), ("reduction",)),
    (("mm", "addmm", "bmm", "matmul", "linear", "baddbmm"), ("matmul",)),
    (("convolution", "conv2d", "conv1d", "conv3d"), ("conv",)),
    (("embedding", "embedding_bag", "index_select", "gather"), ("gather",)),
    (("cumsum", "cumprod"), ("scan",)),
)
RECURRING = 3


def op_tags(ops: list[str]) -> list[str]:
    tags: list[str] = []
    for op in ops:
        name = op.strip("_")
        found = [t for names, ts in _OP_CLASSES if name in names for t in ts]
        tags.extend(found or ["pointwise"])
    return sorted(set(tags))


def _reference_ops(result: EvalResult | None) -> list[str]:
    ops = (result.integrity.get("reference_ops") if result else None) or {}
    return sorted({op for case_ops in ops.values() for op in case_ops})


def _language(result: EvalResult | None, default: str) -> str:
    """The result's language; `default` where it recorded none ("unknown": EvalResult's own)."""
    known = result.language if result is not None else ""
    return default if known in ("", "unknown") else known


def _provenance(fp: dict[str, Any], result: EvalResult | None) -> dict[str, Any]:
    from kernelevolve.plugins import library_keys

    return {"device": fp.get("device"), "driver": fp.get("driver"), "compiler": fp.get("cxx"),
            "libraries": {lib: fp.get(lib) for lib in ("torch", *library_keys())},
            "shapes": [c.name for c in (result.cases if result else []) if not c.held_out]}


def _pattern(reason: str) -> str:
    """A reason's first line with numbers and quoted names abstracted: what recurs."""
    line = next((ln.strip() for ln in reason.splitlines() if ln.strip()), "")
    line = re.sub(r"'[^']*'", "'…'", line)
    return re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "N", line)[:200]


def learn_from_run(run: Any, graph: SearchGraph, outcome: dict[str, Any], fp: dict[str, Any],
                   folder: Path) -> list[Path]:
    from kernelevolve.knowledge.learn import write_learned_note

    store, cfg = run.store, run.config
    problem = Path(run.record.problem_path)
    name = problem.parent.name if problem.stem == "problem" else problem.stem
    paths: list[Path] = []
    node_id = outcome.get("node_id")
    if outcome.get("safe", outcome.get("kind") == "improved") and node_id is not None:
        result = store.evaluation(run.id, node_id)
        language = _language(result, "python")
        chain, node = [], graph.get(node_id)
        while node.id != ROOT:
            chain.append(f"- node {node.id} ({node.operator}): {node.rationale[:300]}")
            node = graph.get(node.parents[0]) if node.parents else graph.get(ROOT)
        cases = "\n".join(f"- {c.name}: eager {c.ref_ms:.4g} ms, kernel "
                          f"{c.cand_ms:.4g} ms, {c.speedup:.2f}x"
                          for c in (result.cases if result else []) if c.speedup)
        lo, hi = outcome.get("interval") or (None, None)
        body = (f"On problem `{name}` ({', '.join(_reference_ops(result)) or 'ops unknown'}), "
                f"a {language} kernel reached {outcome['speedup']:.2f}x over eager PyTorch "
                f"(95% interval {lo:.2f}-{hi:.2f}, re-measured paired with the baseline).\n\n"
                "How it got there (newest first):\n" + "\n".join(chain[:8]) +
                "\n\nMeasured per case:\n" + cases +
                f"\n\nThe winning source is node {node_id} of run {run.id}.")
        paths.append(write_learned_note(
            folder, title=f"{name}: {outcome['speedup']:.2f}x with {language} on {cfg.platform}",
            body=body, platforms=[cfg.platform], languages=[language],
            tags=op_tags(_reference_ops(result)) + ["learned-win"],
            provenance=_provenance(fp, result), confidence=0.6))
    failures: dict[tuple[str, str], list[int]] = defaultdict(list)
    for node in graph.evaluated():
        if node.buggy:
            failures[(node.stage or "?", _pattern(node.meta.get("reason", "")))].append(node.id)
    for (stage, pattern), ids in failures.items():
        if len(ids) < RECURRING:
            continue
        example = store.evaluation(run.id, ids[-1])
        # Notes reach later prompts: what a candidate printed stays fenced and labelled, with no
        # blank line, so the block stays one paragraph (knowledge/sections.py splits on them).
        latest = "\n".join(ln for ln in (example.reason if example else "").splitlines()[:12]
                           if ln.strip())
        body = (f"On problem `{name}`, {len(ids)} candidates were rejected at the `{stage}` "
                f"gate for the same reason:\n\n{fence(pattern, 'text')}\n\nThe latest one in "
                f"full, {quoted(latest, REASON_LABEL)}"
                + f"\n\nNodes: {', '.join(map(str, ids[:12]))} of run {run.id}. Avoid this "
                "pattern, or fix its cause before anything else.")
        paths.append(write_learned_note(
            folder, title=f"{name}: recurring {stage} failure", body=body,
            platforms=[cfg.platform], languages=[_language(example, "any")],
            tags=op_tags(_reference_ops(example)) + ["learned-failure", stage],
            provenance=_provenance(fp, example), confidence=0.5))
    return paths
