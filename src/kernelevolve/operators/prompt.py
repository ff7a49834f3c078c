"""Prompt synthesis for the universal operator: templates from files, filled from live context.

Sections, in order: the task (draft or improve), the candidate contract, the target (platform,
language, measuring machine), the problem (reference source, cases with weights, input shapes
and dtypes, tolerance), the parent (source and its full evaluation: stage, reason, per-case
errors and timings), the search memory, and the retrieved knowledge notes.
"""
from __future__ import annotations

import random
from pathlib import Path
from string import Template
from typing import Any

from kernelevolve.operators.base import ParentView, ProposalContext
from kernelevolve.problem import CaseBinder, Problem, import_module, load_problem

PROMPTS = Path(__file__).parent / "prompts"
_REASON_CHARS = 1800
_NOTE_CHARS = 900


def template(name: str) -> str:
    return (PROMPTS / f"{name}.md").read_text()


def describe_cases(problem: Problem) -> list[str]:
    """One line per case: weight, size globals, and the input shapes and dtypes it produces."""
    import numpy as np
    import torch

    module = import_module(problem.path)
    binder = CaseBinder(module, problem.cases)
    lines = []
    for case in problem.cases:
        binder.bind(case)
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        try:
            inputs = list(module.get_inputs())
            shapes = ", ".join(f"{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')}"
                               if isinstance(x, torch.Tensor) else repr(x) for x in inputs)
        except Exception as exc:  # noqa: BLE001 - describe what we can
            shapes = f"(could not build inputs: {type(exc).__name__})"
        sizes = ", ".join(f"{k}={v}" for k, v in case.bindings.items()) or "module defaults"
        lines.append(f"- `{case.name}` (weight {case.weight:g}; {sizes}): inputs {shapes}")
    return lines


class PromptBuilder:
    def __init__(self, problem_path: str, platform: str, language: str):
        self.problem = load_problem(problem_path)
        self.reference = Path(self.problem.path).read_text()
        self.platform, self.language = platform, language
        self.cases = describe_cases(self.problem)

    def build(self, ctx: ProposalContext, notes: list[Any]) -> tuple[str, str]:
        parent = ctx.parents[0] if ctx.parents else None
        task = template("improve" if parent else "draft")
        parts = [Template(task).safe_substitute(platform=self.platform, language=self.language),
                 template("contract"), self._target(ctx), self._problem()]
        if parent is not None:
            parts.append(self._parent(parent))
        if ctx.memory:
            parts.append("## What this run has tried so far\n" + ctx.memory)
        if notes:
            parts.append(self._notes(notes))
        return template("system"), "\n\n".join(p.strip() for p in parts) + "\n"

    def _target(self, ctx: ProposalContext) -> str:
        fp = ctx.fingerprint or {}
        machine = [f"platform `{self.platform}`, write {self.language}"]
        for key, label in (("device", "device"), ("threads", "threads"), ("cxx", "compiler"),
                           ("cuda", "CUDA"), ("torch", "torch"), ("triton", "triton")):
            if fp.get(key):
                machine.append(f"{label}: {fp[key]}")
        if fp.get("cpu_flags"):
            machine.append("CPU flags: " + ", ".join(fp["cpu_flags"]))
        return "## Target\n" + "; ".join(machine)

    def _problem(self) -> str:
        tol = self.problem.tolerance or "per output dtype: fp32 1e-4, fp16/bf16 1e-2, ints exact"
        return ("## Reference (the problem)\n```python\n" + self.reference.rstrip() + "\n```\n"
                "Cases (speedup is the weighted geometric mean over these; every one must be "
                "correct):\n" + "\n".join(self.cases) + f"\nTolerance (atol/rtol): {tol}")

    def _parent(self, parent: ParentView) -> str:
        fitness = "not measured" if parent.fitness is None else f"{parent.fitness:.3f}x"
        lines = [f"## Parent candidate (node {parent.node_id}, fitness {fitness})",
                 "```python", parent.source.rstrip(), "```", "### Its evaluation"]
        result = parent.result or {}
        stage = result.get("stage") or parent.stage or "not evaluated"
        reason = (result.get("reason") or parent.reason or "").strip()
        if len(reason) > _REASON_CHARS:
            reason = reason[:_REASON_CHARS] + " …"
        lines.append(f"stage reached: {stage}")
        if reason:
            lines.append("reason: " + reason)
        rows = [c for c in result.get("cases", []) if c.get("correct") is not None]
        if rows:
            lines.append("| case | correct | max abs err | eager ms | candidate ms | speedup |")
            lines.append("|---|---|---|---|---|---|")
            for c in rows:
                lines.append(f"| {c['name']} | {c.get('correct')} | {_num(c.get('max_abs_err'))} "
                             f"| {_num(c.get('ref_ms'))} | {_num(c.get('cand_ms'))} "
                             f"| {_num(c.get('speedup'))} |")
        lines.append("profile: not available on this platform" if self.platform == "cpu"
                     else "profile: not collected")
        return "\n".join(lines)

    @staticmethod
    def _notes(hits: list[Any]) -> str:
        out = ["## Knowledge notes (retrieved for this problem and target)"]
        for hit in hits:
            note = hit.note
            stale = f" (stale: {hit.why})" if getattr(hit, "stale", False) else ""
            body = note.body.strip()
            if len(body) > _NOTE_CHARS:
                body = body[:_NOTE_CHARS] + " …"
            out.append(f"### {note.title}{stale}\n{body}")
        return "\n\n".join(out)


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
