"""Job replies, worker -> driver: what each job returns, as frozen dataclasses.

A job writes `reply.to_wire()` to its result file (harness/protocol/codec.py: JSON plus tensor
bytes); the driver decodes the file and `reply_from_wire(job, data)` checks it field by field
(harness/driver/worker_handle.py), so the gates read attributes of known types. The worker shares
its sandbox with candidate code: every field is untrusted until decoded here, and a wrong one
raises `MessageError` naming the message and the field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from kernelevolve.harness.protocol.timing import STOP_REASONS
from kernelevolve.harness.protocol.fields import Fields, MessageError
from kernelevolve.harness.protocol.stages import JOB_REPORTED

FAILED_STAGES = ("problem", *JOB_REPORTED)
PROTOCOLS = ("outside", "inprocess")
_MAX_N = 1 << 40


def _tensors(f: Fields) -> Any:
    """One forward's outputs: a list of tensors."""
    import torch

    def check(value: Any, where: str) -> tuple[Any, ...]:
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(t, torch.Tensor) for t in value):
            raise f.fail(where, "expected a list of tensors")
        return tuple(value)
    return check


def _noise(f: Fields) -> Any:
    """A rounding-noise figure: a number (inf where the reference's float64 twin overflowed: the
    norm check is then skipped for that output, as for any noise above the limit) or None (NaN
    reads as None: either way the check applies)."""
    def check(v: Any, where: str) -> float | None:
        if v is None or (isinstance(v, float) and v != v):
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise f.fail(where, f"expected a number from 0 (inf allowed) or null, got {v!r}")
        return float(v)
    return check


def _objects(f: Fields) -> Any:
    def check(value: Any, where: str) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise f.fail(where, "expected an object")
        return dict(value)
    return check


@dataclass(frozen=True)
class Failed:
    """A job that failed for a reason it could name (`ok: false`)."""
    stage: str
    reason: str
    case: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"ok": False, "stage": self.stage, "reason": self.reason,
                **({"case": self.case} if self.case is not None else {})}

    @classmethod
    def from_wire(cls, data: Any) -> "Failed":
        f = Fields(cls.__name__, data)
        reason = f.str("reason", "")[:20000]
        return cls(stage=f.str("stage", "load", FAILED_STAGES),
                   reason=reason if reason.strip() else "the job failed without a reason",
                   case=f.str("case", None))


@dataclass(frozen=True)
class FingerprintReply:
    fingerprint: Mapping[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "fingerprint": dict(self.fingerprint)}

    @classmethod
    def from_wire(cls, data: Any) -> "FingerprintReply":
        return cls(fingerprint=Fields(cls.__name__, data).obj("fingerprint"))


@dataclass(frozen=True)
class MachineReply:
    machine: Mapping[str, Any]

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "machine": dict(self.machine)}

    @classmethod
    def from_wire(cls, data: Any) -> "MachineReply":
        return cls(machine=Fields(cls.__name__, data).obj("machine"))


@dataclass(frozen=True)
class ReferenceCase:
    """The reference on one case: outputs per seed, their inputs' digests, the rounding noise
    per output, the ATen ops it dispatched, its cost; or why a held-out case was skipped."""
    outputs: tuple[tuple[Any, ...], ...] = ()
    digests: tuple[str, ...] = ()
    noise: tuple[tuple[float | None, ...], ...] = ()
    ops: tuple[str, ...] = ()
    decomposed_ops: tuple[str, ...] = ()
    cost: Mapping[str, Any] | None = None
    skipped: str | None = None

    def to_wire(self) -> dict[str, Any]:
        if self.skipped is not None:
            return {"skipped": self.skipped}
        return {"outputs": [list(o) for o in self.outputs], "digests": list(self.digests),
                "noise": [list(n) for n in self.noise], "ops": list(self.ops),
                "decomposed_ops": list(self.decomposed_ops), "cost": self.cost}

    @classmethod
    def from_wire(cls, data: Any) -> "ReferenceCase":
        f = Fields(cls.__name__, data)
        skipped = f.str("skipped", None)
        if skipped is not None:
            return cls(skipped=skipped)
        outputs = f.list("outputs", _tensors(f))
        digests = f.list("digests", f.texts())
        noise = f.list("noise", f.each(_noise(f)), ())
        if noise and len(noise) != len(outputs):
            raise f.fail("noise", f"{len(noise)} entries for {len(outputs)} outputs")
        return cls(outputs=outputs, digests=digests, noise=noise, ops=f.list("ops", f.texts()),
                   decomposed_ops=f.list("decomposed_ops", f.texts(), ()),
                   cost=f.obj("cost", None))


@dataclass(frozen=True)
class ReferenceReply:
    cases: Mapping[str, ReferenceCase]

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "cases": {k: c.to_wire() for k, c in self.cases.items()}}

    @classmethod
    def from_wire(cls, data: Any) -> "ReferenceReply":
        f = Fields(cls.__name__, data)
        return cls(cases=f.table("cases", f.nested(ReferenceCase)))


@dataclass(frozen=True)
class CheckCase:
    """The candidate on one case: per trial its outputs, the same inputs' outputs again, the
    launches it counted; the ATen ops it dispatched; its inputs' digests; the neutered run."""
    outputs: tuple[tuple[Any, ...], ...]
    repeats: tuple[tuple[Any, ...], ...]
    launches: tuple[Mapping[str, int], ...]
    ops: tuple[str, ...]
    digests: tuple[str, ...]
    neutered: Mapping[str, Any]      # {"outputs": [...]} or {"error": "..."}
    neuter_digest: str

    def to_wire(self) -> dict[str, Any]:
        return {"outputs": [list(o) for o in self.outputs],
                "repeats": [list(o) for o in self.repeats],
                "launches": [dict(x) for x in self.launches], "ops": list(self.ops),
                "digests": list(self.digests), "neutered": dict(self.neutered),
                "neuter_digest": self.neuter_digest}

    @classmethod
    def from_wire(cls, data: Any) -> "CheckCase":
        f = Fields(cls.__name__, data)
        outputs = f.list("outputs", _tensors(f))
        for key in ("repeats", "launches", "digests"):
            got = f.list(key, lambda v, w: v)
            if len(got) != len(outputs):
                raise f.fail(key, f"{len(got)} entries for {len(outputs)} trials")
        neutered = f.obj("neutered")
        if "outputs" in neutered:
            neutered["outputs"] = _tensors(f)(neutered["outputs"], "neutered.outputs")
        elif not isinstance(neutered.get("error"), str):
            raise f.fail("neutered", "neither outputs nor an error")
        return cls(outputs=outputs, repeats=f.list("repeats", _tensors(f)),
                   launches=f.list("launches", f.mapping(f.ints(0, _MAX_N))), ops=f.list("ops", f.texts()),
                   digests=f.list("digests", f.texts()), neutered=neutered,
                   neuter_digest=f.str("neuter_digest"))


@dataclass(frozen=True)
class CheckReply:
    cases: Mapping[str, CheckCase]
    libraries: tuple[str, ...] = ()

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "cases": {k: c.to_wire() for k, c in self.cases.items()},
                "libraries": list(self.libraries)}

    @classmethod
    def from_wire(cls, data: Any) -> "CheckReply":
        f = Fields(cls.__name__, data)
        return cls(cases=f.table("cases", f.nested(CheckCase)),
                   libraries=f.list("libraries", f.texts(), ()))


@dataclass(frozen=True)
class MeasureCase:
    """One timed case: per-call samples (ms) of the reference, the candidate and torch.compile,
    the timing loop's own duration; from the outside protocol also the batch size, the sampled
    timed calls (checked, then dropped), the candidate's CPU and threads; profiles and the rest
    in `details` (harness/gates/profile_view.py checks them on arrival)."""
    ref_ms: tuple[float, ...]
    cand_ms: tuple[float, ...]
    loop_s: float
    compile_ms: tuple[float, ...] | None = None
    calls_per_batch: int | None = None
    samples: tuple[Mapping[str, Any], ...] | None = None
    cpu: Mapping[str, Any] | None = None
    threads: int | None = None       # the candidate process's threads after timing
    outputs: tuple[tuple[Any, ...], ...] | None = None  # in-process: fresh values re-checked
    digests: tuple[str, ...] | None = None              # ...and their inputs' digests
    stopped: str | None = None       # what ended the timing loop (protocol/timing.py StopRule)
    details: Mapping[str, Any] = field(default_factory=dict)

    TYPED = ("ref_ms", "cand_ms", "loop_s", "compile_ms", "calls_per_batch", "samples", "cpu",
             "threads", "outputs", "digests", "stopped")

    def to_wire(self) -> dict[str, Any]:
        out = {**self.details, "ref_ms": list(self.ref_ms), "cand_ms": list(self.cand_ms),
               "loop_s": self.loop_s, "compile_ms": None if self.compile_ms is None
               else list(self.compile_ms), "calls_per_batch": self.calls_per_batch,
               "cpu": None if self.cpu is None else dict(self.cpu), "threads": self.threads,
               "stopped": self.stopped}
        if self.samples is not None:
            out["samples"] = [dict(s) for s in self.samples]
        if self.outputs is not None:
            out["outputs"] = [list(o) for o in self.outputs]
            out["digests"] = list(self.digests or ())
        return out

    @classmethod
    def from_wire(cls, data: Any) -> "MeasureCase":
        f = Fields(cls.__name__, data)
        ms = f.floats(lo=0.0)
        ref, cand = f.list("ref_ms", ms), f.list("cand_ms", ms)
        if not ref or len(ref) != len(cand):
            raise f.fail("cand_ms", f"{len(cand)} samples for {len(ref)} of the reference")
        compile_ms = f.list("compile_ms", ms, None)
        if compile_ms is not None and len(compile_ms) not in (0, len(ref)):
            raise f.fail("compile_ms", f"{len(compile_ms)} samples for {len(ref)}")
        samples = f.list("samples", _objects(f), None)
        return cls(ref_ms=ref, cand_ms=cand, loop_s=f.float("loop_s", 0.0, lo=0.0),
                   compile_ms=compile_ms, calls_per_batch=f.int("calls_per_batch", None, 1,
                                                                 _MAX_N),
                   samples=samples, cpu=f.obj("cpu", None), threads=f.int("threads", None, 0, 1 << 20),
                   outputs=f.list("outputs", _tensors(f), None),
                   digests=f.list("digests", f.texts(), None),
                   stopped=f.str("stopped", None, STOP_REASONS),
                   details={k: v for k, v in dict(data).items() if k not in cls.TYPED})

    def scored(self) -> dict[str, Any]:
        """The case as the scoring and profile gates read it (harness/gates/scoring.py): its
        sampled calls (tensors, checked on arrival) left out."""
        out = self.to_wire()
        out.pop("samples", None)
        return out


@dataclass(frozen=True)
class MeasureReply:
    cases: Mapping[str, MeasureCase]
    protocol: str = "inprocess"
    compile_error: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {"ok": True, "protocol": self.protocol, "compile_error": self.compile_error,
                "cases": {k: c.to_wire() for k, c in self.cases.items()}}

    @classmethod
    def from_wire(cls, data: Any) -> "MeasureReply":
        f = Fields(cls.__name__, data)
        return cls(cases=f.table("cases", f.nested(MeasureCase)),
                   protocol=f.str("protocol", "inprocess", PROTOCOLS),
                   compile_error=f.str("compile_error", None))


REPLIES = {"fingerprint": FingerprintReply, "machine": MachineReply,
           "reference": ReferenceReply, "check": CheckReply, "measure": MeasureReply}


def reply_from_wire(job: str, data: Any) -> Any:
    """A job's decoded result: its reply when `ok` is true, `Failed` when false."""
    f = Fields("JobReply", data)
    if f.bool("ok"):
        if job not in REPLIES:
            raise MessageError("JobReply", "job", f"no reply is defined for {job[:40]!r}")
        return REPLIES[job].from_wire(data)
    return Failed.from_wire(data)


__all__ = ["CheckCase", "CheckReply", "Failed", "FingerprintReply", "MachineReply",
           "MeasureCase", "MeasureReply", "MessageError", "ReferenceCase", "ReferenceReply",
           "reply_from_wire"]
