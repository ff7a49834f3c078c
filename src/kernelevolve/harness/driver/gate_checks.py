"""The correctness and integrity gates of one evaluation, over the jobs' typed replies
(harness/protocol/replies.py): the candidate's outputs against the reference's, the probes'
facts, and the outside measurement's sampled calls and CPU. Mixed into evaluate.py's `_Run`,
whose state (cases, reference, result, reject) they read."""
from __future__ import annotations

from typing import Any, Mapping

from kernelevolve.errors import ProblemError
from kernelevolve.harness.gates.compare import compare_outputs
from kernelevolve.harness.gates.integrity import (fallback_problem, idle_cpu_problem,
                                                  launch_problem, neutered_problem,
                                                  norm_ratio_problem, sampled_calls_problem)
from kernelevolve.harness.protocol.replies import CheckCase, MeasureCase, ReferenceCase
from kernelevolve.problem import Case

NOT_DETERMINISTIC = ("get_inputs() is not deterministic under a fixed seed{where}; seed all "
                     "randomness through torch")


class GateChecks:
    """Needs `self.cases`, `self.reference` (ReferenceCase per case), `self.result`, `self.prob`,
    `self.seeds`, `self.opts` and `self.reject(stage, reason)`."""

    cases: list[Case]
    reference: Mapping[str, ReferenceCase]
    result: Any
    prob: Any
    opts: Any
    seeds: dict[str, list[int]]

    def reject(self, stage: str, reason: str) -> None:  # pragma: no cover - _Run's
        raise NotImplementedError

    def _correct(self, cases: Mapping[str, CheckCase | MeasureCase], key: str,
                 seeds: dict[str, list[int]], offset: int, record: bool, when: str = "",
                 stage: str = "correctness") -> bool:
        for case_result, case in zip(self.result.cases, self.cases):
            ref, got = self.reference[case.name], cases[case.name]
            n = len(seeds[case.name])
            if tuple(got.digests or ()) != ref.digests[offset:offset + n]:
                raise ProblemError(self.prob.path, NOT_DETERMINISTIC.format(
                    where=f" (case {case.name!r})"))
            outputs = getattr(got, key) or ()
            for trial in range(n):
                cmp = compare_outputs(list(ref.outputs[offset + trial]), list(outputs[trial]),
                                      self.prob.tolerance)
                if record:
                    case_result.max_abs_err = max(case_result.max_abs_err or 0.0, cmp.max_abs_err)
                    case_result.max_rel_err = max(case_result.max_rel_err or 0.0, cmp.max_rel_err)
                if not cmp.ok:
                    case_result.correct = False
                    case_result.mismatch = cmp.mismatch
                    where = f" {when}" if when else ""
                    self.reject(stage, f"wrong result on case {case.name!r} (trial {trial + 1} of "
                                       f"{n}){where}: {cmp.reason}")
                    return False
            if record:
                case_result.correct = True
        return True

    def _integrity(self, cases: Mapping[str, CheckCase]) -> bool:
        if not self._correct(cases, "repeats", self.seeds, 0, record=False, stage="integrity",
                             when="when forward ran a second time on the same inputs "
                                  "(state kept between calls?)"):
            return False
        for case in self.cases:
            found = self._case_integrity(case, self.reference[case.name], cases[case.name])
            if found:
                self.reject("integrity", found)
                return False
        return True

    def _case_integrity(self, case: Case, ref: ReferenceCase, got: CheckCase) -> str | None:
        policy, facts = self.opts.integrity, self.result.integrity
        launches = [dict(x) for x in got.launches]
        facts.setdefault("launches", {})[case.name] = launches
        facts.setdefault("candidate_ops", {})[case.name] = list(got.ops)
        facts.setdefault("reference_ops", {})[case.name] = list(ref.ops)
        facts.setdefault("reference_decomposed_ops", {})[case.name] = list(ref.decomposed_ops)
        n = len(self.seeds[case.name])
        problems = [norm_ratio_problem(list(ref.outputs[t]), list(got.outputs[t]),
                                       list(ref.noise[t]) if ref.noise else None)
                    for t in range(n)]
        problems += [launch_problem(case.name, launches, policy),
                     fallback_problem(case.name, list(ref.ops), list(got.ops), policy,
                                      list(ref.decomposed_ops))]
        if got.neuter_digest != ref.digests[-1]:
            raise ProblemError(self.prob.path, NOT_DETERMINISTIC.format(where=""))
        if not policy.allow_no_kernel:
            problems.append(neutered_problem(case.name, list(ref.outputs[-1]),
                                             dict(got.neutered), self.prob.tolerance))
        return next((p for p in problems if p), None)

    def _outside_checks(self, timed_cases: list[Case], cases: Mapping[str, MeasureCase]) -> bool:
        """Sampled timed calls and the candidate's CPU outside its batches
        (harness/worker/measure.py)."""
        facts = self.result.integrity.setdefault("outside", {})
        for case in timed_cases:
            data = cases[case.name]
            facts[case.name] = {"calls_per_batch": data.calls_per_batch,
                                "sampled_calls": len(data.samples or ()),
                                "cpu": None if data.cpu is None else dict(data.cpu),
                                "threads": data.threads}
            samples = None if data.samples is None else [dict(s) for s in data.samples]
            wrong = sampled_calls_problem(case.name, samples, self.prob.tolerance)
            if wrong:
                self.reject("correctness", wrong)
                return False
            busy = idle_cpu_problem(case.name, None if data.cpu is None else dict(data.cpu))
            if busy:
                self.reject("integrity", busy)
                return False
        return True
