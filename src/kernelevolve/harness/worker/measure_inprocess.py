"""Measurement inside the candidate's process, for device platforms (CUDA, ROCm).

The outside protocol (harness/worker/measure.py) needs the candidate's outputs in host memory the
reference process can read, and its work finished when it answers; on a GPU neither holds
without trusting the candidate's own synchronisation, and no GPU was lent to build and test a
device variant. So on devices the reference and the candidate are still timed here, in one
process, with the platform's event timer and L2 flush, interleaved over rotating input sets,
and the candidate is re-checked on fresh values written into the timed tensors. Verdicts on
devices therefore still rest partly on this process (docs/SECURITY.md says which).
"""
from __future__ import annotations

from typing import Any

from kernelevolve import knobs
from kernelevolve.harness.worker.context import JobContext
from kernelevolve.harness.worker.errors_fmt import format_exception
from kernelevolve.harness.worker import candidate
from kernelevolve.harness.worker.session import JobFailure, Session, digest
from kernelevolve.harness.protocol.messages import JobRequest
from kernelevolve.harness.protocol.replies import MeasureCase, MeasureReply
from kernelevolve.harness.protocol.timing import interleaved
from kernelevolve.runtime import cpp


def _refill(targets: list[Any], values: list[Any]) -> None:
    """Copy new input values into existing input tensors (same storage, same pointers)."""
    import torch

    with torch.no_grad():
        for i, (dst, src) in enumerate(zip(targets, values)):
            if isinstance(dst, torch.Tensor):
                dst.copy_(src)
            else:
                targets[i] = src


def _references_and_inputs(session: Session, req: JobRequest) -> tuple[dict, dict, dict]:
    """Per case: the reference model, its timing input sets and its fresh re-check inputs."""
    refs, sets, fresh = {}, {}, {}
    for case in session.cases:
        refs[case.name] = session.build(session.module.Model, case)
        sets[case.name] = [session.inputs(case, s) for s in req.params.timing_seeds[case.name]]
        fresh[case.name] = [session.inputs(case, s) for s in req.params.seeds[case.name]]
    return refs, sets, fresh


def job_measure(req: JobRequest, progress: JobContext) -> MeasureReply:
    import time

    import torch

    from kernelevolve.harness.worker.probe import Snapshot, native_threads, warm_thread_pools

    clock = time.perf_counter  # bound before candidate code exists
    progress.stage("problem")
    session = Session(req)
    policy = req.params.timing_policy()
    timer = session.platform.make_timer()
    refs, sets, fresh = _references_and_inputs(session, req)
    compiled, compile_error = {}, None
    if req.params.baseline == "compile":
        progress.stage("compile")
        compiled, compile_error = _compile_baselines(session, refs, sets)
    warm_thread_pools(req.helpers)
    snapshot = Snapshot(session.module, models=list(refs.values()) + list(compiled.values()))
    snapshot.threads = native_threads()
    module = candidate.load_candidate(req, progress)
    candidate.guard(snapshot, "at import")
    path = req.params.candidate
    cands = {}
    for case in session.cases:
        progress.stage("load")
        cands[case.name] = candidate.build_candidate(session, module, case, path)
    candidate.guard(snapshot, "while constructing ModelNew")
    cpp.stop_counting()  # a timing job: no launch count is read here
    result: dict[str, Any] = {}
    for case in session.cases:
        progress.stage("load")  # its first call, untimed: a library built lazily is built here
        _first_call(cands[case.name], sets[case.name][0], case, path, session.platform)
        progress.stage("timing")
        fns = [refs[case.name], cands[case.name]]
        if case.name in compiled:
            fns.append(compiled[case.name])
        started = clock()
        try:
            with torch.no_grad():
                samples, stopped = interleaved(fns, sets[case.name], timer, policy,
                                      _fresh_each_rep(session, case, req))
        except Exception as exc:  # noqa: BLE001
            raise JobFailure("timing", f"while timing case {case.name!r}:\n"
                             + format_exception(exc, path), case=case.name) from None
        loop_s = clock() - started
        candidate.guard(snapshot, f"while timing case {case.name!r}")
        progress.stage("run")
        result[case.name] = {"ref_ms": samples[0], "cand_ms": samples[1],
                             "compile_ms": samples[2] if len(samples) > 2 else None,
                             "loop_s": loop_s, "stopped": stopped, "profile_unavailable": INPROCESS_NO_PROFILE,
                             **_recheck_on_timed(session, case, cands[case.name], sets, fresh,
                                                 path)}
        if session.platform.profile_kinds and device_profile_on():
            result[case.name]["profile"] = _device_profiles(
                session.platform, fns, sets[case.name][0])
    return MeasureReply({name: MeasureCase.from_wire(data) for name, data in result.items()},
                        protocol="inprocess", compile_error=compile_error)


def _first_call(cand, args: list[Any], case, path: str, platform) -> None:
    """One candidate call before the case is timed (as the outside protocol makes one): what
    forward does once, a library it builds with load_cpp or load_inline, is not timed."""
    import torch

    try:
        with torch.no_grad():
            cand(*args)
        platform.synchronize()
    except Exception as exc:  # noqa: BLE001
        raise JobFailure("timing", f"forward raised on its first call (untimed) of case "
                         f"{case.name!r}:\n" + format_exception(exc, path),
                         case=case.name) from None


def _fresh_each_rep(session: Session, case, req: JobRequest):
    """New values in the timed tensors before every repetition (outside the timed region): a
    result cache keyed by tensor version, pointer or content then never hits while timed, so
    the candidate is timed doing the work (bad_cache_version reached 48x for a 0.3x kernel
    when three input sets rotated unchanged). A pointer-keyed cache still hits, and the
    re-check on fresh values after timing rejects it."""
    base = 104729 * (1 + max(req.params.timing_seeds[case.name], default=0))

    def refresh(rep: int, args: list[Any]) -> None:
        _refill(args, session.inputs(case, base + rep))

    return refresh


def _compile_baselines(session: Session, refs: dict, sets: dict) -> tuple[dict, str | None]:
    """torch.compile of each case's reference, compiled now, outside the timed region."""
    import torch

    compiled = {}
    try:
        for case in session.cases:
            fn = torch.compile(refs[case.name])
            with torch.no_grad():
                fn(*sets[case.name][0])
            compiled[case.name] = fn
    except Exception as exc:  # noqa: BLE001 - the baseline's failure is not the candidate's
        return {}, f"torch.compile failed: {type(exc).__name__}: {exc}"
    return compiled, None


def _recheck_on_timed(session: Session, case, cand, sets: dict, fresh: dict,
                      path: str) -> dict[str, Any]:
    """Re-check on fresh values written INTO the tensors that were just timed: a cache keyed
    by tensor identity, pointer or shape now returns a stale result and fails."""
    outputs = []
    for trial, values in enumerate(fresh[case.name]):
        timed = sets[case.name][trial % len(sets[case.name])]
        _refill(timed, values)
        outputs.append(candidate.run_candidate(cand, timed, case, trial, path, session.platform))
    return {"outputs": outputs, "digests": [digest(x) for x in fresh[case.name]]}


INPROCESS_NO_PROFILE = ("in-process timing: the candidate runs in the process that times it, "
                        "so no CPU, fault or switch count can be read from outside it for its "
                        "calls alone")


def device_profile_on() -> bool:
    """The torch.profiler kernel table is opt-in until it has run under the device syscall
    profile on a real GPU (Kineto/CUPTI must not make a call the filter refuses): set
    KERNELEVOLVE_DEVICE_PROFILE=1 and pass it on with KERNELEVOLVE_WORKER_ENV."""
    
    return knobs.device_profile()


def _device_profiles(platform, fns: list[Any], args: list[Any]) -> dict[str, Any]:
    """torch.profiler kernel lists of one reference call and one candidate call, in this
    process: self-reported (harness/worker/gpu_profile.py)."""
    from kernelevolve.harness.worker.gpu_profile import NCU_IN_JOB, ncu_unavailable, profile_call

    out = {}
    for side, fn in (("reference", fns[0]), ("candidate", fns[1])):
        prof = profile_call(fn, args, platform.synchronize, kinds=platform.profile_kinds)
        prof["self_reported"] = True
        prof["ncu"] = {"unavailable": ncu_unavailable() or NCU_IN_JOB}
        out[side] = prof
    return out
