"""Job requests, driver -> worker: one frozen dataclass per job, decoded once, field by field.

The driver's caller (harness/driver/evaluate.py) builds a job's parameters (`ReferenceJob`,
`CheckJob`, `MeasureJob`, or the bare `FingerprintJob` / `MachineJob`); the worker handle
(harness/driver/worker_handle.py) wraps them in a `JobRequest` with what every job needs (the
platform, threads, stage limits, containment, prebuilt helpers) and writes its `to_wire()` as
the job's request file. The job child reads it with `JobRequest.from_wire` (harness/worker/child.py)
and the jobs read attributes. A wrong field raises `MessageError` naming the message and field.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields as dc_fields
from typing import Any, ClassVar, Mapping

from kernelevolve.harness.protocol.fields import INT32, Fields, MessageError

JOBS = ("fingerprint", "machine", "reference", "check", "measure")
FILTER_PROFILES = ("strict", "device", "jit")
BASELINES = ("eager", "compile")     # a measure job's "compile": time torch.compile too
MEASUREMENTS = ("outside", "inprocess")
SEED = (0, INT32)

__all__ = ["BASELINES", "CaseSpec", "CheckJob", "Containment", "FingerprintJob", "JOBS",
           "JobParams", "JobRequest", "MachineJob", "MeasureJob", "MessageError",
           "ReferenceJob", "RunJob", "params_from_wire"]


@dataclass(frozen=True)
class CaseSpec:
    """One case of the problem: its name, weight, bindings of the problem's size names."""
    name: str
    weight: float = 1.0
    bindings: Mapping[str, Any] = field(default_factory=dict)
    held_out: bool = False

    def to_wire(self) -> dict[str, Any]:
        return {"name": self.name, "weight": self.weight, "bindings": dict(self.bindings),
                "held_out": self.held_out}

    @classmethod
    def from_wire(cls, data: Any) -> "CaseSpec":
        f = Fields("CaseSpec", data)
        return cls(name=f.str("name"), weight=f.float("weight", 1.0, lo=0.0),
                   bindings=f.obj("bindings", {}), held_out=f.bool("held_out", False))


@dataclass(frozen=True)
class Containment:
    """How the job child confines itself (harness/worker/child.py, context.py)."""
    seccomp: bool = True
    landlock: bool = True
    profile: str = "strict"
    devices: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {"seccomp": self.seccomp, "landlock": self.landlock, "profile": self.profile,
                "devices": list(self.devices), "readable": list(self.readable)}

    @classmethod
    def from_wire(cls, data: Any) -> "Containment":
        f = Fields("Containment", data)
        return cls(seccomp=f.bool("seccomp", True), landlock=f.bool("landlock", True),
                   profile=f.str("profile", "strict", FILTER_PROFILES),
                   devices=f.list("devices", f.texts(), ()),
                   readable=f.list("readable", f.texts(), ()))


@dataclass(frozen=True, kw_only=True)
class JobParams:
    """What every job's caller may set: how the job is confined and limited."""
    job: ClassVar[str] = ""
    syscall_filter: bool = True
    filter_profile: str | None = None   # None: the platform's
    interpreted: bool = False           # longer stage limits (harness/driver/stage_limits.py)
    inspect_libraries: bool = True

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"job": self.job}
        for f in dc_fields(self):
            value = getattr(self, f.name)
            out[f.name] = _wire_value(value)
        return out

    @classmethod
    def _base(cls, f: Fields) -> dict[str, Any]:
        profile = f.str("filter_profile", None)
        if profile is not None and profile not in FILTER_PROFILES:
            raise f.fail("filter_profile", f"{profile[:40]!r} is not one of "
                                           f"{', '.join(FILTER_PROFILES)}")
        return {"syscall_filter": f.bool("syscall_filter", True), "filter_profile": profile,
                "interpreted": f.bool("interpreted", False),
                "inspect_libraries": f.bool("inspect_libraries", True)}

    @classmethod
    def from_wire(cls, data: Any) -> "JobParams":
        return cls(**cls._base(Fields(cls.__name__, data)))


def _wire_value(value: Any) -> Any:
    if hasattr(value, "to_wire"):
        return value.to_wire()
    if isinstance(value, tuple):
        return [_wire_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _wire_value(v) for k, v in value.items()}
    return value


@dataclass(frozen=True, kw_only=True)
class FingerprintJob(JobParams):
    job: ClassVar[str] = "fingerprint"


@dataclass(frozen=True, kw_only=True)
class MachineJob(JobParams):
    job: ClassVar[str] = "machine"


@dataclass(frozen=True, kw_only=True)
class RunJob(JobParams):
    """A job that imports the problem: its cases, and the seeds of each case's inputs. In the
    driver `problem` is a path and the candidate its file name with its text
    (`candidate_source`); on the wire the problem's name with its source as text, and the path
    of the candidate's text written into the job's folder."""
    problem: str
    candidate: str = ""
    candidate_source: str = ""
    problem_source: str = ""
    init_seed: int
    cases: tuple[CaseSpec, ...]
    seeds: Mapping[str, tuple[int, ...]]

    @classmethod
    def _base(cls, f: Fields) -> dict[str, Any]:
        cases = f.list("cases", f.nested(CaseSpec))
        seeds = f.table("seeds", f.int_lists(*SEED))
        missing = [c.name for c in cases if c.name not in seeds]
        if missing:
            raise f.fail("seeds", f"no seeds for case {missing[0][:40]!r}")
        return {**super()._base(f), "problem": f.str("problem"),
                "candidate": f.str("candidate", ""),
                "candidate_source": f.str("candidate_source", ""),
                "problem_source": f.str("problem_source", ""),
                "init_seed": f.int("init_seed", lo=SEED[0], hi=SEED[1]), "cases": cases,
                "seeds": seeds}


@dataclass(frozen=True, kw_only=True)
class ReferenceJob(RunJob):
    job: ClassVar[str] = "reference"
    count_cost: bool = False  # count the reference's bytes and FLOPs (harness/protocol/roofline.py)

    @classmethod
    def from_wire(cls, data: Any) -> "ReferenceJob":
        f = Fields(cls.__name__, data)
        return cls(**cls._base(f), count_cost=f.bool("count_cost", False))


@dataclass(frozen=True, kw_only=True)
class CheckJob(RunJob):
    job: ClassVar[str] = "check"
    neuter_seeds: Mapping[str, int]  # per case: the inputs run with launches suppressed

    @classmethod
    def from_wire(cls, data: Any) -> "CheckJob":
        f = Fields(cls.__name__, data)
        base = cls._base(f)
        neuter = f.table("neuter_seeds", f.ints(*SEED))
        missing = [c.name for c in base["cases"] if c.name not in neuter]
        if missing:
            raise f.fail("neuter_seeds", f"no seed for case {missing[0][:40]!r}")
        return cls(**base, neuter_seeds=neuter)


@dataclass(frozen=True, kw_only=True)
class MeasureJob(RunJob):
    job: ClassVar[str] = "measure"
    timing_seeds: Mapping[str, tuple[int, ...]]
    timing: Mapping[str, Any]       # harness/protocol/timing.py TimingPolicy's fields
    baseline: str = "eager"
    measurement: str = "outside"

    @classmethod
    def from_wire(cls, data: Any) -> "MeasureJob":
        from kernelevolve.harness.protocol.timing import TimingPolicy

        f = Fields(cls.__name__, data)
        timing = f.obj("timing", {})
        known = {x.name for x in dc_fields(TimingPolicy)}
        unknown = [k for k in timing if k not in known]
        if unknown:
            raise f.fail("timing", f"unknown setting {str(unknown[0])[:40]!r}")
        return cls(**cls._base(f), timing_seeds=f.table("timing_seeds", f.int_lists(*SEED)),
                   timing=timing, baseline=f.str("baseline", "eager", BASELINES),
                   measurement=f.str("measurement", "outside", MEASUREMENTS))

    def timing_policy(self) -> Any:
        from kernelevolve.harness.protocol.timing import TimingPolicy

        return TimingPolicy(**self.timing)


PARAMS: dict[str, type[JobParams]] = {c.job: c for c in (
    FingerprintJob, MachineJob, ReferenceJob, CheckJob, MeasureJob)}


def params_from_wire(job: Any, data: Any) -> JobParams:
    """A job's parameters from their wire form (or a caller's plain dict)."""
    if job not in PARAMS:
        raise MessageError("JobRequest", "job", f"{str(job)[:40]!r} is not one of "
                                                f"{', '.join(JOBS)}")
    return PARAMS[job].from_wire(data)


@dataclass(frozen=True, kw_only=True)
class JobRequest:
    """What a job child reads: its parameters and what the worker handle adds."""
    params: JobParams
    platform: str
    threads: int
    stage_timeouts: Mapping[str, float]
    helpers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    containment: Containment = field(default_factory=Containment)

    @property
    def job(self) -> str:
        return self.params.job

    def to_wire(self) -> dict[str, Any]:
        return {"params": self.params.to_wire(), "platform": self.platform,
                "threads": self.threads, "stage_timeouts": dict(self.stage_timeouts),
                "helpers": {k: dict(v) for k, v in self.helpers.items()},
                "containment": self.containment.to_wire()}

    @classmethod
    def from_wire(cls, data: Any) -> "JobRequest":
        f = Fields(cls.__name__, data)
        raw = f.obj("params")
        try:
            params = params_from_wire(raw.get("job"), raw)
        except MessageError as exc:
            raise f.fail(f"params.{exc.field}", exc.why) from None
        return cls(params=params, platform=f.str("platform"),
                   threads=f.int("threads", lo=1, hi=1 << 16),
                   stage_timeouts=f.table("stage_timeouts", f.floats(lo=0.0)),
                   helpers=f.table("helpers", f.mapping(f.texts()), {}),
                   containment=f.nested(Containment)(f.obj("containment", {}), "containment"))

