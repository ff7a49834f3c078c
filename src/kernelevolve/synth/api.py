"""Entry points: `synthesize(problem, language)` and `explain_problem(problem)`."""
from __future__ import annotations

from kernelevolve.synth.capture import NotCovered, capture
from kernelevolve.synth.plan import Plan, explain, plan


def languages() -> tuple[str, ...]:
    """The languages the synthesizer writes: every registered one that names an emitter
    (`Language.synthesizer`), in the registry's order (the first is the default)."""
    from kernelevolve.plugins import languages as registered

    return tuple(lang.name for lang in registered() if lang.synthesizer)


def make_plan(problem_path: str) -> Plan:
    """The fusion plan of a problem; raises NotCovered with the reason when there is none
    (including a `Model` whose source the emitters cannot reuse)."""
    from kernelevolve.synth.module import Reference

    p = plan(capture(str(problem_path)))
    Reference(str(problem_path))
    return p


def synthesize(problem_path: str, language: str = "cpp") -> tuple[str, Plan]:
    """(candidate source, plan) for `problem_path`; raises NotCovered when out of reach."""
    import importlib

    from kernelevolve.plugins import get_language

    if language not in languages():
        raise ValueError(f"language {language!r}: the synthesizer writes "
                         f"{', '.join(languages())}")
    p = make_plan(problem_path)
    text = explain(p)
    emitter = importlib.import_module(get_language(language).synthesizer)
    return emitter.emit_source(p, str(problem_path), text), p


def explain_problem(problem_path: str) -> str:
    """A coverage report: which ops fuse into which kernels, which stay in torch, or why not."""
    try:
        p = make_plan(problem_path)
    except NotCovered as exc:
        return f"not covered: {exc}"
    return explain(p)
