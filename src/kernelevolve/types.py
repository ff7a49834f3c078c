"""Plain data types that cross process boundaries: JSON-able, picklable, no tensors, no torch import.

`EvalResult` is the harness's verdict on one candidate. Field names are the JSON contract that
`kernelevolve eval --json` writes and later issues (search, store, registry) read.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

# Gate order. A rejected result names the stage that rejected it; an accepted one says "accepted".
STAGES = ("static", "load", "run", "correctness", "integrity", "timing", "accepted")


@dataclass
class TimingStats:
    """Summary of one timed function on one case, in milliseconds."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    n: int

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms


@dataclass
class CaseResult:
    name: str
    weight: float
    correct: bool | None = None
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    mismatch: str | None = None          # first mismatch, human-readable
    ref_ms: float | None = None          # eager reference median
    cand_ms: float | None = None         # candidate median
    compile_ms: float | None = None      # torch.compile(reference) median, with --baseline compile
    speedup: float | None = None         # ref_ms / cand_ms
    speedup_ci: tuple[float, float] | None = None  # bootstrap 95% interval of the speedup
    ref_timing: TimingStats | None = None
    cand_timing: TimingStats | None = None
    compile_timing: TimingStats | None = None
    held_out: bool = False               # derived by the harness, not declared by the problem
    # What ended the case's timing loop: "minimums" (the policy's reps and time), "tight" (its
    # interval reached the policy's `tight` width), "time cap" or "rep cap" (it did not).
    timing_stop: str | None = None
    # Speed of light (harness/protocol/roofline.py), None where not counted or not timed:
    bytes_moved: int | None = None       # reference's minimal traffic: inputs, params, outputs
    flops: int | None = None             # FlopCounterMode over one reference forward
    sol_ms: float | None = None          # max(bytes / bandwidth, flops / peak), measured figures
    sol_bound: str | None = None         # "memory" | "compute": which term sets sol_ms
    sol_fraction: float | None = None    # sol_ms / cand_ms (1.0: at the machine's limit)
    achieved_gbs: float | None = None    # bytes_moved / cand_ms
    achieved_gflops: float | None = None  # flops / cand_ms
    # Profiles over the timed batches, observed from outside each process (CPU time, page
    # faults, context switches per call; perf counters or why not): harness/worker/proc_profile.py,
    # read for prompts by harness/gates/profile_view.py. None where nothing trustworthy was measured.
    profile: dict[str, Any] | None = None      # the candidate's process
    ref_profile: dict[str, Any] | None = None  # the reference's process, the same way


@dataclass
class SandboxFacts:
    """What isolation a worker actually had; reported with every result."""

    method: str = "none"                 # bwrap | unshare | none
    network_isolated: bool = False
    filesystem_readonly: bool = False    # everything outside scratch and cache read-only
    memory_limit_bytes: int | None = None
    cpu_limit_s: int | None = None
    env_scrubbed: bool = False           # environment built from an allowlist
    scrubbed_vars: int = 0               # variables of the driver's environment left out
    warnings: list[str] = field(default_factory=list)
    syscall_filter: str = "none"         # notify (refused calls named) | kill | none
    landlock_abi: int = 0                # 0: Landlock unavailable
    pid_namespace: bool = False          # a job's leftovers die with one kill(-1)
    capabilities: str = "unknown"        # none | some (what the worker server kept)
    filter_profile: str = "strict"       # strict | device | jit: what candidate code could do

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "SandboxFacts":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known})


@dataclass
class EvalResult:
    accepted: bool
    stage: str
    reason: str
    speedup: float | None = None
    speedup_ci: tuple[float, float] | None = None  # bootstrap 95% interval of `speedup`
    fitness: float | None = 0.0
    measured: bool = False               # False when the platform cannot time this language
    compile_speedup: float | None = None  # candidate vs torch.compile, with --baseline compile
    compile_speedup_ci: tuple[float, float] | None = None  # its bootstrap 95% interval
    sol_fraction: float | None = None    # weighted geomean of the timed cases' sol_fraction
    cases: list[CaseResult] = field(default_factory=list)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    sandbox: SandboxFacts = field(default_factory=SandboxFacts)
    platform: str = "cpu"
    language: str = "unknown"
    problem: str = ""
    candidate: str = ""
    source_hash: str = ""
    baseline: str = "eager"
    wall_s: float = 0.0                  # total wall time of the evaluation
    measured_s: float = 0.0              # time spent inside timed reference and candidate runs
    integrity: dict[str, Any] = field(default_factory=dict)
    libraries: list[str] = field(default_factory=list)  # compiled kernels the candidate loaded
    # The driver's build log of those libraries: name, sha256 of the bytes, source_sha256 and
    # flags of the load_cpp call, compiler (what `kernelevolve promote` records and serves)
    builds: list[dict[str, Any]] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)  # tails of the workers' stdout/stderr
    # Which executor and node measured it (`fingerprint` describes that node's machine): executor,
    # hostname; with Ray also node_id, node_ip, actor_id and attempts (2+ after a re-queue).
    measured_on: dict[str, Any] = field(default_factory=dict)
    # A restricted evaluation (an agent's tool call; EvalOptions.only_cases / stop_after):
    # {"only_cases": [...], "stopped_after": "load" | "integrity" | None}. Empty for a full one.
    # `accepted` then means "passed every gate it ran", never a verdict on the whole problem.
    partial: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.stage not in STAGES:
            raise ValueError(f"unknown stage {self.stage!r}; expected one of {STAGES}")

    def to_dict(self) -> dict[str, Any]:
        return _clean(dataclasses.asdict(self))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EvalResult":
        """The inverse of `to_dict`, tolerant of results stored by older versions: unknown keys
        are dropped, missing ones take their defaults, an unknown stage reads as "run" (a
        rejection whose reason says what was stored)."""
        data = dict(data or {})
        cases = [_case(c) for c in data.pop("cases", None) or []]
        sandbox = SandboxFacts.from_dict(data.pop("sandbox", None) or {})
        for key in ("speedup_ci", "compile_speedup_ci"):
            data[key] = _pair(data.get(key))
        data = _known(cls, data)
        data.setdefault("accepted", False)
        data.setdefault("reason", "")
        if data.get("stage") not in STAGES:
            data["reason"] = f"stored with stage {data.get('stage')!r}: {data['reason']}"
            data["stage"], data["accepted"] = "run", False
        return cls(cases=cases, sandbox=sandbox, **data)


def _known(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _pair(value: Any) -> tuple[float, float] | None:
    return None if value is None else tuple(value)


def _case(data: dict[str, Any]) -> CaseResult:
    data = _known(CaseResult, dict(data))
    for key in ("ref_timing", "cand_timing", "compile_timing"):
        if data.get(key) is not None:
            data[key] = TimingStats(**_known(TimingStats, data[key]))
    data["speedup_ci"] = _pair(data.get("speedup_ci"))
    data.setdefault("name", "")
    data.setdefault("weight", 1.0)
    return CaseResult(**data)


def _clean(value: Any) -> Any:
    """Make a value strict-JSON safe: non-finite floats become None, tuples become lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value
