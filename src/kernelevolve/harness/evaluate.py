"""`evaluate()`: run one candidate through the gates and return an `EvalResult`.

Order: static (driver, source only) -> reference job (a worker that never loads the candidate)
-> check job (candidate outputs on the same seeded inputs) -> correctness (driver compares) ->
integrity -> measure job (interleaved timing, then fresh inputs re-checked) -> accepted.
"""
from __future__ import annotations

import hashlib
import random
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from kernelevolve.errors import CandidateError, PlatformError, ProblemError, UsageError
from kernelevolve.harness.compare import compare_outputs
from kernelevolve.harness.pool import JobOutcome, Limits, WorkerPool
from kernelevolve.harness.static import check_static
from kernelevolve.harness.timing import (TimingPolicy, speedup_interval, summarize,
                                         weighted_geomean)
from kernelevolve.platforms import get_platform
from kernelevolve.problem import Problem, load_problem
from kernelevolve.types import CaseResult, EvalResult

BASELINES = ("eager", "compile")


@dataclass
class EvalOptions:
    trials: int = 3                 # correctness trials per case, each with fresh inputs
    post_trials: int = 2            # fresh-input trials re-checked after timing
    timing_sets: int = 3            # rotating input sets per case during timing
    seed: int | None = None         # None: fresh random seeds every evaluation
    baseline: str = "eager"
    static_rules: bool = True       # tests turn the static integrity rules off to prove that
                                    # the runtime defences hold on their own
    timing: TimingPolicy = field(default_factory=TimingPolicy)

    def validate(self) -> None:
        if self.trials < 3:
            raise UsageError(f"--trials {self.trials}: at least 3 correctness trials are required")
        if self.baseline not in BASELINES:
            raise UsageError(f"--baseline {self.baseline!r}: choose one of {', '.join(BASELINES)}")


class Evaluator:
    """Evaluates candidates on one platform with one worker pool (reused across calls)."""

    def __init__(self, platform: str = "cpu", *, workers: int = 1, pool: WorkerPool | None = None,
                 limits: Limits | None = None, sandbox_mode: str | None = None,
                 options: EvalOptions | None = None):
        self.platform = get_platform(platform)
        reason = self.platform.unavailable_reason()
        if reason:
            raise PlatformError(reason)
        self.options = options or EvalOptions()
        self.options.validate()
        self._own_pool = pool is None
        self.pool = pool or WorkerPool(self.platform, workers, limits=limits,
                                       sandbox_mode=sandbox_mode)

    def close(self) -> None:
        if self._own_pool:
            self.pool.close()

    def __enter__(self) -> "Evaluator":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -----------------------------------------------------------------------------------------
    def evaluate(self, problem: str | Path | Problem, candidate: str | Path,
                 progress: Callable[[str], None] | None = None,
                 options: EvalOptions | None = None) -> EvalResult:
        opts = options or self.options
        opts.validate()
        say = progress or (lambda _msg: None)
        started = time.monotonic()
        prob = problem if isinstance(problem, Problem) else load_problem(problem)
        cand_path = Path(candidate)
        if not cand_path.is_file():
            raise CandidateError(f"{cand_path}: no such candidate file; pass the path of a .py "
                                 "module that defines ModelNew")
        source = cand_path.read_text(errors="replace")
        result = EvalResult(accepted=False, stage="static", reason="", platform=self.platform.name,
                            problem=prob.path, candidate=str(cand_path.resolve()),
                            source_hash=hashlib.sha256(source.encode()).hexdigest(),
                            baseline=opts.baseline,
                            cases=[CaseResult(c.name, c.weight, held_out=c.held_out)
                                   for c in prob.cases])
        run = _Run(self, prob, cand_path, opts, result, say)
        try:
            run.execute(source)
        finally:
            result.wall_s = time.monotonic() - started
        return result


class _Run:
    """One evaluation's state; each gate either passes or fills in the rejection."""

    def __init__(self, ev: Evaluator, prob: Problem, cand: Path, opts: EvalOptions,
                 result: EvalResult, say: Callable[[str], None]):
        self.ev, self.prob, self.cand, self.opts, self.result, self.say = ev, prob, cand, opts, result, say
        rng = random.Random(opts.seed) if opts.seed is not None else random.SystemRandom()
        draw = lambda n: {c.name: [rng.randrange(1, 2**31) for _ in range(n)] for c in prob.cases}  # noqa: E731
        self.init_seed = rng.randrange(1, 2**31)
        self.seeds = draw(opts.trials)
        self.post_seeds = draw(opts.post_trials)
        self.timing_seeds = draw(opts.timing_sets)
        self.params = {"problem": prob.path, "candidate": str(cand.resolve()),
                       "init_seed": self.init_seed,
                       "cases": [{"name": c.name, "weight": c.weight, "bindings": c.bindings}
                                 for c in prob.cases]}

    def reject(self, stage: str, reason: str) -> None:
        self.result.accepted, self.result.stage, self.result.reason = False, stage, reason
        self.result.fitness = 0.0

    def execute(self, source: str) -> None:
        ev, result = self.ev, self.result
        self.say("static gate")
        report = check_static(source, self.cand.name, ev.platform.name, ev.platform.languages,
                              rules=self.opts.static_rules)
        result.language = report.language
        if not report.ok:
            return self.reject("static", report.reason)
        result.fingerprint = ev.pool.fingerprint()
        result.sandbox = ev.pool.sandbox_facts
        self.say("reference outputs")
        reference = self._reference()
        self.say("candidate outputs")
        check = ev.pool.run("check", {**self.params, "seeds": self.seeds})
        if check.status != "ok":
            return self.reject(*self._failure(check))
        self.say("correctness")
        if not self._correct(check.result["cases"], reference, self.seeds, "correctness",
                             record=True):
            return
        if not ev.platform.measures(result.language):
            result.accepted, result.stage, result.measured = True, "accepted", False
            result.speedup, result.fitness = None, None
            result.reason = (f"accepted: correct on {len(self.prob.cases)} case(s) x "
                             f"{self.opts.trials} trials; not timed, since the "
                             f"{ev.platform.name} platform cannot time {result.language} "
                             "candidates for real (Triton runs in the interpreter on CPU)")
            return
        self.say("timing")
        measure = ev.pool.run("measure", {**self.params, "seeds": self.post_seeds,
                                          "timing_seeds": self.timing_seeds,
                                          "timing": asdict(self.opts.timing),
                                          "baseline": self.opts.baseline})
        if measure.status != "ok":
            stage, reason = self._failure(measure)
            return self.reject("timing" if stage in ("load", "run") else stage, reason)
        cases = measure.result["cases"]
        if not self._correct(cases, reference, self.post_seeds, "correctness", record=False,
                             when="on fresh inputs after timing"):
            return
        self._score(cases)

    # ---- gates ---------------------------------------------------------------------------------
    def _reference(self) -> dict[str, Any]:
        seeds = {name: self.seeds[name] + self.post_seeds[name] for name in self.seeds}
        out = self.ev.pool.run("reference", {**self.params, "seeds": seeds})
        if out.status == "ok":
            return out.result["cases"]
        if out.status == "failed":
            raise ProblemError(self.prob.path, out.result["reason"].splitlines()[0])
        raise ProblemError(self.prob.path, "running the reference failed: " + out.describe())

    def _failure(self, out: JobOutcome) -> tuple[str, str]:
        if out.status == "failed":
            stage = out.result.get("stage", "run")
            if stage == "problem":
                raise ProblemError(self.prob.path, out.result["reason"].splitlines()[0])
            return stage, out.result["reason"]
        stage = out.stage if out.stage in ("load", "run", "timing") else "load"
        reason = out.describe()
        tail = out.stderr_tail.strip()
        if tail and out.status == "crashed":
            reason += "\nlast output:\n" + "\n".join(tail.splitlines()[-8:])
        return stage, reason

    def _correct(self, cases: dict[str, Any], reference: dict[str, Any],
                 seeds: dict[str, list[int]], stage: str, record: bool, when: str = "") -> bool:
        offset = 0 if seeds is self.seeds else self.opts.trials
        for case_result, case in zip(self.result.cases, self.prob.cases):
            ref, got = reference[case.name], cases[case.name]
            n = len(seeds[case.name])
            ref_digests = ref["digests"][offset:offset + n]
            if got["digests"] != ref_digests:
                raise ProblemError(self.prob.path, f"get_inputs() is not deterministic under a "
                                                   f"fixed seed (case {case.name!r}); seed all "
                                                   "randomness through torch")
            for trial in range(n):
                cmp = compare_outputs(ref["outputs"][offset + trial], got["outputs"][trial],
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

    def _score(self, cases: dict[str, Any]) -> None:
        result = self.result
        speedups, weights, compile_speedups, measured_ms = [], [], [], 0.0
        for case_result in result.cases:
            data = cases[case_result.name]
            ref, cand = summarize(data["ref_ms"]), summarize(data["cand_ms"])
            case_result.ref_timing, case_result.cand_timing = ref, cand
            case_result.ref_ms, case_result.cand_ms = ref.median_ms, cand.median_ms
            case_result.speedup = ref.median_ms / cand.median_ms
            case_result.speedup_ci = speedup_interval(data["ref_ms"], data["cand_ms"])
            measured_ms += sum(data["ref_ms"]) + sum(data["cand_ms"])
            if data.get("compile_ms"):
                comp = summarize(data["compile_ms"])
                case_result.compile_timing, case_result.compile_ms = comp, comp.median_ms
                compile_speedups.append(comp.median_ms / cand.median_ms)
                measured_ms += sum(data["compile_ms"])
            speedups.append(case_result.speedup)
            weights.append(case_result.weight)
        result.measured = True
        result.measured_s = measured_ms / 1e3
        result.speedup = weighted_geomean(speedups, weights)
        if len(compile_speedups) == len(speedups):
            result.compile_speedup = weighted_geomean(compile_speedups, weights)
        result.accepted, result.stage, result.fitness = True, "accepted", result.speedup
        result.reason = (f"accepted: {result.speedup:.3f}x weighted speedup over eager PyTorch "
                         f"across {len(speedups)} case(s)")
        if result.compile_speedup is not None:
            result.reason += f"; {result.compile_speedup:.3f}x over torch.compile"


def evaluate(problem: str | Path, candidate: str | Path, *, platform: str = "cpu",
             trials: int = 3, seed: int | None = None, baseline: str = "eager",
             sandbox: str | None = None, limits: Limits | None = None) -> EvalResult:
    """Evaluate one candidate against one problem with a fresh worker pool."""
    options = EvalOptions(trials=trials, seed=seed, baseline=baseline)
    options.validate()
    prob = load_problem(problem)
    with Evaluator(platform, options=options, sandbox_mode=sandbox, limits=limits) as ev:
        return ev.evaluate(prob, candidate)
