"""The `synth` operator: in the draft phase, one synthesized candidate per language.

It proposes from the root only (ctx.parents empty): the `tune` operator then explores each
draft's TUNABLES. It is exhaustible: once its drafts are in the graph (their hashes are in
ctx.seen_hashes), or when the problem is not covered, it returns [].
"""
from __future__ import annotations

import hashlib
import logging

from kernelevolve.operators.base import Draft, ProposalContext
from kernelevolve.synth.api import languages as synth_languages, synthesize
from kernelevolve.synth.capture import NotCovered
from kernelevolve.target import TargetLike, as_target

log = logging.getLogger(__name__)


def default_languages(platform: TargetLike) -> list[str]:
    """The platform's default language, when the synthesizer writes it; else none."""
    default = as_target(platform).platform.default_language
    return [default] if default in synth_languages() else []


class SynthOperator:
    name = "synth"
    exhaustible = True
    repairs = False

    def __init__(self, problem_path: str, platform: TargetLike,
                 languages: list[str] | None = None):
        self.problem_path = str(problem_path)
        self.platform = as_target(platform).name
        self.languages = list(languages or default_languages(platform))
        self._cache: dict[str, tuple[str, str, str] | None] = {}
        self.not_covered: str | None = None

    def _draft(self, language: str) -> tuple[str, str, str] | None:
        if language not in self._cache:
            try:
                source, plan = synthesize(self.problem_path, language)
                from kernelevolve.synth.plan import explain

                self._cache[language] = (source, plan.summary(), explain(plan))
            except NotCovered as exc:
                self.not_covered = str(exc)
                log.info("synth: %s (%s)", exc, language)
                self._cache[language] = None
        return self._cache[language]

    async def propose(self, context: ProposalContext) -> list[Draft]:
        if context.parents:
            return []
        drafts = []
        for language in self.languages:
            made = self._draft(language)
            if made is None:
                if self.not_covered:  # say why in the run's events: the report shows it
                    context.report("synth_not_covered", {"language": language,
                                                         "reason": self.not_covered})
                continue
            source, summary, text = made
            if hashlib.sha256(source.encode()).hexdigest() in context.seen_hashes:
                continue
            drafts.append(Draft(source=source, parents=(), operator=self.name,
                                rationale=f"synthesized {language} fused kernel(s) from the "
                                          f"reference graph: {summary}\n{text}",
                                meta={"synth_plan": summary, "synth_language": language}))
        return drafts
