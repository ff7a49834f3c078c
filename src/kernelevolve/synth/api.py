"""Entry points: `synthesize(problem, language)` and `explain_problem(problem)`."""
from __future__ import annotations

from kernelevolve.synth.capture import NotCovered, capture
from kernelevolve.synth.plan import Plan, explain, plan

LANGUAGES = ("cpp", "triton")


def make_plan(problem_path: str) -> Plan:
    """The fusion plan of a problem; raises NotCovered with the reason when there is none
    (including a `Model` whose source the emitters cannot reuse)."""
    from kernelevolve.synth.module import Reference

    p = plan(capture(str(problem_path)))
    Reference(str(problem_path))
    return p


def synthesize(problem_path: str, language: str = "cpp") -> tuple[str, Plan]:
    """(candidate source, plan) for `problem_path`; raises NotCovered when out of reach."""
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r}: the synthesizer writes {', '.join(LANGUAGES)}")
    p = make_plan(problem_path)
    text = explain(p)
    if language == "cpp":
        from kernelevolve.synth.cpp_module import emit_source
    else:
        from kernelevolve.synth.emit_triton import emit_source
    return emit_source(p, str(problem_path), text), p


def explain_problem(problem_path: str) -> str:
    """A coverage report: which ops fuse into which kernels, which stay in torch, or why not."""
    try:
        p = make_plan(problem_path)
    except NotCovered as exc:
        return f"not covered: {exc}"
    return explain(p)
