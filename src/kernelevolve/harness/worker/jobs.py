"""Jobs that run inside a forked, sandboxed worker child.

- `fingerprint`: describe the machine and toolchain that measures.
- `machine`: measure its memory bandwidth and peak FLOP/s (platforms/machine_facts.py).
- `reference`: run the problem's `Model` on seeded inputs; never loads candidate code.
- `check`: import the candidate, run `ModelNew` on the same seeded inputs, return the outputs.
- `measure`: time reference and candidate (harness/worker/measure.py: from outside the candidate's
  process on CPU; harness/worker/measure_inprocess.py on devices).

Inputs are generated from seeds before the candidate is imported, so candidate code cannot
influence them. Outputs leave as data (harness/protocol/codec.py); the comparison happens in the driver.
Right before the candidate is imported, the job contains its own process (harness/worker/child.py:
the syscall filter on every thread); from then on `load_cpp` builds through the driver.
"""
from __future__ import annotations

from typing import Any

from kernelevolve.harness.protocol import codec as wire
from kernelevolve.harness.protocol.messages import JobRequest
from kernelevolve.harness.protocol.replies import (CheckCase, CheckReply, Failed,
                                                   FingerprintReply, MachineReply, ReferenceCase,
                                                   ReferenceReply)
from kernelevolve.harness.worker import candidate
from kernelevolve.harness.worker.context import JobContext
from kernelevolve.harness.worker.session import JobFailure, Session, digest, flatten_outputs


# ---------------------------------------------------------------------------------------------
def job_fingerprint(req: JobRequest, progress: JobContext) -> FingerprintReply:
    from kernelevolve.plugins import get_platform

    platform = get_platform(req.platform)
    platform.setup_worker(req.threads)
    from kernelevolve.plugins import fingerprint

    return FingerprintReply(fingerprint(req.platform, req.threads))


def job_machine(req: JobRequest, progress: JobContext) -> MachineReply:
    """Memory bandwidth and peak FLOP/s, measured here (the pool caches them per machine)."""
    from kernelevolve.plugins import get_platform

    platform = get_platform(req.platform)
    platform.setup_worker(req.threads)
    return MachineReply(platform.measure_machine(req.threads))


def job_reference(req: JobRequest, progress: JobContext) -> ReferenceReply:
    """Reference outputs (and the ATen compute ops the reference dispatches) per case."""
    import torch

    from kernelevolve.harness.worker.probe import OpRecorder, decomposed_ops

    progress.stage("problem")
    session = Session(req)
    result: dict[str, ReferenceCase] = {}
    held_out = {c.name for c in req.params.cases if c.held_out}
    for case in session.cases:
        try:
            model = session.build(session.module.Model, case)
            outputs, digests, noise, recorder = [], [], [], OpRecorder()
            with torch.no_grad():
                for i, seed in enumerate(req.params.seeds[case.name]):
                    inputs = session.inputs(case, seed)
                    digests.append(digest(inputs))
                    if i == 0:
                        with recorder:
                            out = model(*inputs)
                        decomposed = decomposed_ops(model, inputs)
                        first = (inputs, out)
                    else:
                        out = model(*inputs)
                    outputs.append(flatten_outputs(out, "Model.forward"))
                    noise.append(rounding_noise(model, inputs, outputs[-1]))
                cost = _cost(req, model, *first)  # after every seed: a stateful model's outputs
            session.platform.synchronize()        # stay what they would have been
        except Exception as exc:  # noqa: BLE001 - a broken reference is the problem's fault
            if case.name in held_out:  # a derived shape the problem does not support: drop it
                result[case.name] = ReferenceCase(skipped=f"{type(exc).__name__}: {exc}")
                continue
            why = exc.reason if isinstance(exc, JobFailure) else f"{type(exc).__name__}: {exc}"
            raise JobFailure("problem", f"the reference raised on case {case.name!r}: {why}") from None
        result[case.name] = ReferenceCase(
            outputs=tuple(map(tuple, outputs)), digests=tuple(digests),
            noise=tuple(map(tuple, noise)), ops=tuple(recorder.compute_ops()),
            decomposed_ops=tuple(decomposed), cost=cost)
    return ReferenceReply(result)


def _cost(req: JobRequest, model: Any, inputs: list[Any], out: Any) -> dict[str, Any] | None:
    """Bytes and FLOPs of one reference forward (harness/protocol/roofline.py), when the driver asks."""
    if not req.params.count_cost:
        return None
    from kernelevolve.harness.protocol.roofline import reference_cost

    try:
        return reference_cost(model, inputs, flatten_outputs(out, "Model.forward"))
    except Exception as exc:  # noqa: BLE001 - no speed of light is a fact, not a failure
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def rounding_noise(model, inputs: list[Any], outputs: list[Any]) -> list[float | None]:
    """Per output, how much of the reference is its own rounding error: ||ref - ref64|| over
    ||ref||, with ref64 the same model run in float64. Near 0 for a reference that carries
    signal; near 1 or above when the true result is (almost) zero and what the reference shows
    is noise. None where the model cannot run in float64."""
    import copy

    import torch

    try:
        model64 = copy.deepcopy(model).double()
        inputs64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                    for x in inputs]
        with torch.no_grad():
            out64 = flatten_outputs(model64(*inputs64), "Model.forward")
    except Exception:  # noqa: BLE001 - integer-only ops, dtype-bound kernels: no estimate
        return [None] * len(outputs)
    noise: list[float | None] = []
    for r, r64 in zip(outputs, out64):
        if not (r.is_floating_point() and r64.is_floating_point()) or r.shape != r64.shape:
            noise.append(None)
            continue
        ref = r.double()
        finite = torch.isfinite(ref) & torch.isfinite(r64)
        norm = float(torch.where(finite, ref, 0.0).norm())
        err = float(torch.where(finite, ref - r64, 0.0).norm())
        noise.append(err / norm if norm > 0 else None)
    return noise


def _probed_forward(model, inputs, case, trial, path, session, snapshot) -> dict[str, Any]:
    """One forward under every probe: launches, ATen ops, mutation, outputs, state, threads."""
    from kernelevolve.harness.worker.probe import (OpRecorder, copy_inputs, mutated_inputs,
                                            non_plain_outputs, python_threads)
    from kernelevolve.runtime import launches

    copies = copy_inputs(inputs)
    threads = python_threads()
    launches.reset_launch_counts()
    recorder = OpRecorder()
    with recorder:
        outputs = candidate.run_candidate(model, inputs, case, trial, path, session.platform)
    where = f"on case {case.name!r} (trial {trial + 1})"
    candidate.threads_idle(snapshot, f"after forward {where}")  # at once, before the harness's own work
    counts = launches.launch_counts()
    bad = non_plain_outputs(outputs)
    if bad:
        raise JobFailure("integrity", f"{bad[0]} {where}; return materialised tensors, not "
                                      "lazy or subclassed ones")
    changed = mutated_inputs(inputs, copies)
    if changed:
        raise JobFailure("integrity", f"forward modified input(s) {changed} in place {where}; "
                                      "inputs must be left untouched")
    extra = python_threads() - threads
    if extra:
        raise JobFailure("integrity", f"forward left {len(extra)} new Python thread(s) running "
                                      f"{where}; work must finish inside forward")
    candidate.snapshot_unchanged(snapshot, f"during forward {where}")
    return {"outputs": outputs, "launches": counts, "ops": recorder.compute_ops()}


def job_check(req: JobRequest, progress: JobContext) -> CheckReply:
    """Candidate outputs on the trial seeds, each forward run twice, under the probes."""
    from kernelevolve.harness.worker.probe import Snapshot, native_threads, warm_thread_pools
    from kernelevolve.runtime import launches
    from kernelevolve.runtime.cpp import loaded_libraries

    progress.stage("problem")
    session = Session(req)
    params = req.params
    prepared = {c.name: [session.inputs(c, s) for s in params.seeds[c.name]]
                for c in session.cases}
    neuter = {c.name: session.inputs(c, params.neuter_seeds[c.name]) for c in session.cases}
    digests = {name: [digest(x) for x in sets] for name, sets in prepared.items()}
    warm_thread_pools(req.helpers)
    harness_libraries = set(loaded_libraries())
    snapshot = Snapshot(session.module)
    snapshot.threads = native_threads()
    module = candidate.load_candidate(req, progress)
    candidate.guard(snapshot, "at import")
    path = params.candidate
    result: dict[str, CheckCase] = {}
    for case in session.cases:
        progress.stage("load")
        model = candidate.build_candidate(session, module, case, path)
        candidate.guard(snapshot, f"while constructing ModelNew for case {case.name!r}")
        progress.stage("run")
        runs, repeats = [], []
        for trial, inputs in enumerate(prepared[case.name]):
            runs.append(_probed_forward(model, inputs, case, trial, path, session, snapshot))
            # The same inputs again: results must agree (odd-call tricks, races, caching).
            repeats.append(_probed_forward(model, inputs, case, trial, path, session,
                                           snapshot)["outputs"])
        neutered: dict[str, Any]
        try:
            with launches.suppress_launches():
                out = candidate.run_candidate(model, neuter[case.name], case, 0, path, session.platform)
            neutered = {"outputs": out}
        except JobFailure as exc:
            neutered = {"error": exc.reason.splitlines()[0]}
        result[case.name] = CheckCase(
            outputs=tuple(tuple(r["outputs"]) for r in runs), repeats=tuple(map(tuple, repeats)),
            launches=tuple(dict(r["launches"]) for r in runs),
            ops=tuple(sorted(set().union(*(r["ops"] for r in runs)))),
            digests=tuple(digests[case.name]), neutered=neutered,
            neuter_digest=digest(neuter[case.name]))
    libraries = [p for p in loaded_libraries() if p not in harness_libraries]
    return CheckReply(result, tuple(libraries))


def job_measure(req: JobRequest, progress: JobContext) -> Any:
    """As the platform declares (`Platform.measurement`): "outside" the candidate's process
    (harness/worker/measure.py; the CPU), or "inprocess" with the platform's timer
    (harness/worker/measure_inprocess.py; devices: the outside protocol is not built for them)."""
    from kernelevolve.plugins import get_platform

    outside = get_platform(req.platform).measurement == "outside"
    if outside and req.params.measurement != "inprocess":
        from kernelevolve.harness.worker.measure import job_measure as outside

        return outside(req, progress)
    from kernelevolve.harness.worker.measure_inprocess import job_measure as inprocess

    return inprocess(req, progress)


JOBS = {"fingerprint": job_fingerprint, "machine": job_machine, "reference": job_reference,
        "check": job_check, "measure": job_measure}


def main(ctx: JobContext) -> None:
    from kernelevolve.runtime import cpp

    cpp.set_build_service(ctx.build)  # no compiler may run in a job; the driver builds
    req = ctx.request
    try:
        reply = JOBS[req.job](req, ctx)
    except JobFailure as exc:
        case = exc.extra.get("case")
        reply = Failed(exc.stage, exc.reason, case if isinstance(case, str) else None)
    except Exception as exc:  # noqa: BLE001 - e.g. the problem module failed to import here
        reply = Failed("problem", f"{type(exc).__name__}: {exc}")
    ctx.write_result(wire.encode(reply.to_wire()))
