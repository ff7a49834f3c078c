"""`EvalOptions`: how one evaluation runs (trials, seeds, baseline, the defences tests switch
off, restricted evaluations for the LLM agent's tools), validated before any job starts."""
from __future__ import annotations

from dataclasses import dataclass, field

from kernelevolve.errors import UsageError
from kernelevolve.harness.gates.integrity import IntegrityPolicy
from kernelevolve.harness.protocol.timing import TimingPolicy
from kernelevolve.problem import Problem, derive_held_out

BASELINES = ("eager", "compile")
# Where a restricted evaluation may stop: after the candidate compiled and loaded (the check
# job imports it; the reference job is skipped), or after the integrity gate (no timing).
STOP_AFTER = ("load", "integrity")


@dataclass
class EvalOptions:
    trials: int = 3                 # correctness trials per case, each with fresh inputs
    post_trials: int = 2            # fresh-input trials re-checked after timing
    timing_sets: int = 3            # rotating input sets per case during timing
    seed: int | None = None         # None: fresh random seeds every evaluation
    baseline: str = "eager"         # what fitness is relative to
    time_compile: bool = False      # also time torch.compile (always with baseline "compile");
                                    # its speedup is its own figure, never fitness unless it is
                                    # the baseline
    static_rules: bool = True       # tests turn the static integrity rules off to prove that
                                    # the runtime defences hold on their own
    inspect_libraries: bool = True  # ...and the compiled-library inspection (native_inspect.py)
    syscall_filter: bool = True     # ...and the syscall filter (seccomp.py), leaving the sandbox
    measurement: str = "outside"    # CPU: timed from outside the candidate's process
                                    # (harness/worker/measure.py); "inprocess" is the earlier protocol,
                                    # kept for devices and for benchmarks/protocol_compare.py
    held_out: bool = True           # derive an odd-sized case when the problem declares none
    integrity: IntegrityPolicy = field(default_factory=IntegrityPolicy)
    timing: TimingPolicy = field(default_factory=TimingPolicy)
    # Restricted evaluations (the LLM agent's tools): only these cases (names from the problem's
    # CASES, or the derived held-out case), and/or stop after a gate. Their results carry
    # `partial` and never become search nodes.
    only_cases: tuple[str, ...] = ()
    stop_after: str | None = None

    @property
    def times_compile(self) -> bool:
        return self.baseline == "compile" or self.time_compile

    def validate(self) -> None:
        if self.trials < 3:
            raise UsageError(f"--trials {self.trials}: at least 3 correctness trials are required")
        if self.baseline not in BASELINES:
            raise UsageError(f"--baseline {self.baseline!r}: choose one of {', '.join(BASELINES)}")
        if self.measurement not in ("outside", "inprocess"):
            raise UsageError(f"measurement {self.measurement!r}: choose outside or inprocess")
        if self.stop_after is not None and self.stop_after not in STOP_AFTER:
            raise UsageError(f"stop_after {self.stop_after!r}: choose one of "
                             f"{', '.join(STOP_AFTER)} (or none, for the whole evaluation)")
        if isinstance(self.only_cases, str) or not all(
                isinstance(c, str) and c for c in self.only_cases):
            raise UsageError(f"only_cases {self.only_cases!r}: a tuple of case names")

    def check_cases(self, problem: Problem) -> None:
        """Every name in only_cases must be one of the problem's cases (or the held-out one)."""
        if not self.only_cases:
            return
        held = derive_held_out(problem) if self.held_out else None
        known = [c.name for c in problem.cases] + ([held.name] if held else [])
        unknown = [c for c in self.only_cases if c not in known]
        if unknown:
            raise UsageError(f"only_cases: unknown case {unknown[0]!r}; the problem's cases: "
                             f"{', '.join(known)}")
