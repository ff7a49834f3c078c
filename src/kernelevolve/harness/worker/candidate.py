"""The candidate inside a job: loaded (its language's launch guards installed, the process
contained first), its `ModelNew` built per case, its forward run, and the integrity guards checked
after each step (threads still working, harness-visible state changed). Shared by the check job
(jobs.py), the candidate's timed process (candidate_proc.py) and the in-process device protocol
(measure_inprocess.py); the call sites go through this module's attributes."""
from __future__ import annotations

from typing import Any

from kernelevolve.harness.protocol.messages import JobRequest
from kernelevolve.harness.worker.context import JobContext
from kernelevolve.harness.worker.errors_fmt import format_exception
from kernelevolve.harness.worker.session import JobFailure, Session, flatten_outputs
from kernelevolve.problem import Case, import_module


def load_candidate(req: JobRequest, progress: JobContext):
    progress.stage("load")
    from kernelevolve.plugins import get_language, get_platform

    for name in get_platform(req.platform).languages:  # each counts its launches
        get_language(name).install_guard()
    from kernelevolve.runtime import launch

    launch.use_prebuilt(req.helpers.get("ke_launch"))  # the driver's build, not a compiler here
    path = req.params.candidate
    progress.contain()
    try:
        module = import_module(path, prefix="ke_candidate", wrap_errors=False)
    except Exception as exc:  # noqa: BLE001
        raise JobFailure("load", "importing the candidate failed:\n"
                         + format_exception(exc, path)) from None
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise JobFailure("load", "the candidate defines no class `ModelNew`")
    return module


def build_candidate(session: Session, module, case: Case, path: str):
    try:
        return session.build(module.ModelNew, case)
    except Exception as exc:  # noqa: BLE001
        raise JobFailure("load", f"constructing ModelNew for case {case.name!r} failed:\n"
                         + format_exception(exc, path)) from None


def run_candidate(model, inputs: list[Any], case: Case, trial: int, path: str, platform):
    import torch

    try:
        with torch.no_grad():
            out = model(*inputs)
        platform.synchronize()
    except Exception as exc:  # noqa: BLE001
        raise JobFailure("run", f"forward raised on case {case.name!r} (trial {trial + 1}):\n"
                         + format_exception(exc, path), case=case.name) from None
    return flatten_outputs(out, "ModelNew.forward")


_THREAD_WORK_S = 0.0005  # CPU other threads may use in the 10 ms window (an idle team: ~0)


def threads_idle(snapshot, when: str) -> None:
    """Threads the candidate started may exist (an OpenMP team of its own size); they must not
    be working once forward (or import, or construction) has returned."""
    from kernelevolve.harness.worker.probe import cpu_of_new_threads, native_threads

    baseline = getattr(snapshot, "threads", None)
    if baseline is None:
        return
    extra = native_threads() - baseline
    if extra:
        used = cpu_of_new_threads(baseline)
        if used > _THREAD_WORK_S:
            raise JobFailure("integrity", f"native threads started by candidate code were still "
                             f"working {when}: {1e3 * used:.1f} ms of CPU in the 10 ms after it "
                             f"returned ({len(extra)} thread(s) beyond the warmed pools); work "
                             "must be finished before forward returns, or it escapes timing. "
                             "Idle threads (an OpenMP team waiting for its next region) are fine")


def guard(snapshot, when: str) -> None:
    threads_idle(snapshot, when)
    snapshot_unchanged(snapshot, when)


def snapshot_unchanged(snapshot, when: str) -> None:
    changes = [c for c in snapshot.changes() if not benign(c)]
    if changes:
        raise JobFailure("integrity", f"candidate code changed harness-visible state {when}: "
                         + "; ".join(changes[:5]) + ". Candidates must not patch torch, timers, "
                         "the problem module or global torch settings")


def benign(change: str) -> bool:
    # torch.compile, used legitimately inside a candidate, installs its own wrappers once.
    return change.startswith("torch.nn.Module.") and change.endswith("was replaced") and \
        replaced_by_torch_internals(change)


def replaced_by_torch_internals(change: str) -> bool:
    import torch

    name = change.split()[0].rsplit(".", 1)[1]
    value = vars(torch.nn.Module).get(name)
    return getattr(value, "__module__", "").startswith(("torch._dynamo", "torch._inductor"))
