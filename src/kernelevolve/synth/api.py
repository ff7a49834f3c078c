"""Entry points: `synthesize(problem, language)` and `explain_problem(problem)`."""
from __future__ import annotations

from kernelevolve.synth.capture import NotCovered, capture
from kernelevolve.synth.plan import Plan, explain, plan


# What to do when the synthesizer cannot draft a problem: the user's two other ways in.
NEXT_STEP = ("the built-in synthesizer cannot draft this problem yet; start from a kernel of your "
             "own (--seed-candidate FILE) or let an LLM draft one (--llm)")


def not_covered_text(exc: NotCovered) -> str:
    """The refusal as `synth` prints it: the part the synthesizer stops at, then what to do."""
    return f"not covered: {exc}\n{NEXT_STEP}"


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
    """A coverage report: which ops fuse into which kernels, which stay in torch, or why not
    (and what to do instead)."""
    try:
        p = make_plan(problem_path)
    except NotCovered as exc:
        return not_covered_text(exc)
    return explain(p)
