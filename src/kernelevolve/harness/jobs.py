"""Jobs that run inside a forked, sandboxed worker child.

- `fingerprint`: describe the machine and toolchain that measures.
- `reference`: run the problem's `Model` on seeded inputs; never loads candidate code.
- `check`: import the candidate, run `ModelNew` on the same seeded inputs, return the outputs.
- `measure`: time reference and candidate interleaved, then run the candidate on fresh inputs.

Inputs are generated from seeds before the candidate is imported, so candidate code cannot
influence them. Outputs leave as data (harness/wire.py); the comparison happens in the driver.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path
from typing import Any

from kernelevolve.harness import wire
from kernelevolve.harness.errors_fmt import format_exception
from kernelevolve.harness.timing import TimingPolicy, interleaved
from kernelevolve.problem import Case, CaseBinder, import_module


class JobFailure(Exception):
    def __init__(self, stage: str, reason: str, **extra: Any):
        super().__init__(reason)
        self.stage, self.reason, self.extra = stage, reason, extra


class Progress:
    """Tells the server which stage the child is in; the server enforces that stage's timeout."""

    def __init__(self, fd: int, timeouts: dict[str, float]):
        self.fd, self.timeouts = fd, timeouts

    def stage(self, name: str) -> None:
        os.write(self.fd, f"{name} {self.timeouts.get(name, 60)}\n".encode())


def seed_all(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


class Session:
    """The problem module, loaded in this child, and seeded access to its inputs and models."""

    def __init__(self, req: dict[str, Any]):
        from kernelevolve.platforms import get_platform

        self.req = req
        self.platform = get_platform(req["platform"])
        self.platform.setup_worker(int(req["threads"]))
        self.problem_path = req["problem"]
        self.module = import_module(self.problem_path)
        self.cases = [Case(c["name"], c["weight"], c["bindings"]) for c in req["cases"]]
        self.binder = CaseBinder(self.module, tuple(self.cases))
        self.init_seed = int(req["init_seed"])

    def inputs(self, case: Case, seed: int) -> list[Any]:
        self.binder.bind(case)
        seed_all(seed)
        values = list(self.module.get_inputs())
        return [self._to_device(v) for v in values]

    def build(self, cls: type, case: Case):
        self.binder.bind(case)
        seed_all(self.init_seed)
        init = list(self.module.get_init_inputs())
        seed_all(self.init_seed + 1)
        model = cls(*init)
        if hasattr(model, "to"):
            model = model.to(self.platform.device)
        return model

    def _to_device(self, value: Any) -> Any:
        import torch

        if isinstance(value, torch.Tensor):
            return value.to(self.platform.device)
        return value


def flatten_outputs(value: Any, where: str) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        out: list[Any] = []
        for item in value:
            out.extend(flatten_outputs(item, where))
        return out
    if isinstance(value, (bool, int, float)):
        return [torch.tensor(value)]
    raise JobFailure("run", f"{where} returned a {type(value).__name__}; forward must return "
                            "tensors (or a tuple/list of tensors)")


def digest(values: list[Any]) -> str:
    import torch

    h = hashlib.blake2b(digest_size=16)
    for v in values:
        if isinstance(v, torch.Tensor):
            t = v.detach().cpu().contiguous().reshape(-1)
            h.update(str((t.dtype, tuple(v.shape))).encode())
            if t.numel():
                h.update(t.view(torch.uint8).numpy().tobytes())
        else:
            h.update(repr(v).encode())
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------
def job_fingerprint(req: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from kernelevolve.platforms import get_platform

    platform = get_platform(req["platform"])
    platform.setup_worker(int(req["threads"]))
    return {"ok": True, "fingerprint": platform.fingerprint(int(req["threads"]))}


def job_reference(req: dict[str, Any], progress: Progress) -> dict[str, Any]:
    import torch

    progress.stage("problem")
    session = Session(req)
    result: dict[str, Any] = {}
    for case in session.cases:
        seeds = req["seeds"][case.name]
        try:
            model = session.build(session.module.Model, case)
            outputs, digests = [], []
            with torch.no_grad():
                for seed in seeds:
                    inputs = session.inputs(case, seed)
                    digests.append(digest(inputs))
                    outputs.append(flatten_outputs(model(*inputs), "Model.forward"))
            session.platform.synchronize()
        except JobFailure as exc:
            raise JobFailure("problem", f"case {case.name!r}: {exc.reason}") from None
        except Exception as exc:  # noqa: BLE001 - a broken reference is the problem's fault
            raise JobFailure("problem", f"the reference raised on case {case.name!r}: "
                                        f"{type(exc).__name__}: {exc}") from None
        result[case.name] = {"outputs": outputs, "digests": digests}
    return {"ok": True, "cases": result}


def _load_candidate(req: dict[str, Any], progress: Progress):
    progress.stage("load")
    try:
        from kernelevolve.runtime import triton_guard
    except ImportError:  # pragma: no cover - triton_guard ships with the package
        triton_guard = None
    if triton_guard is not None:
        triton_guard.install()
    path = req["candidate"]
    try:
        module = import_module(path, prefix="ke_candidate", wrap_errors=False)
    except Exception as exc:  # noqa: BLE001
        raise JobFailure("load", "importing the candidate failed:\n"
                         + format_exception(exc, path)) from None
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise JobFailure("load", "the candidate defines no class `ModelNew`")
    return module


def _build_candidate(session: Session, module, case: Case, path: str):
    try:
        return session.build(module.ModelNew, case)
    except Exception as exc:  # noqa: BLE001
        raise JobFailure("load", f"constructing ModelNew for case {case.name!r} failed:\n"
                         + format_exception(exc, path)) from None


def _run_candidate(model, inputs: list[Any], case: Case, trial: int, path: str, platform):
    import torch

    try:
        with torch.no_grad():
            out = model(*inputs)
        platform.synchronize()
    except Exception as exc:  # noqa: BLE001
        raise JobFailure("run", f"forward raised on case {case.name!r} (trial {trial}):\n"
                         + format_exception(exc, path), case=case.name) from None
    return flatten_outputs(out, "ModelNew.forward")


def job_check(req: dict[str, Any], progress: Progress) -> dict[str, Any]:
    progress.stage("problem")
    session = Session(req)
    prepared = {c.name: [session.inputs(c, s) for s in req["seeds"][c.name]] for c in session.cases}
    digests = {name: [digest(x) for x in sets] for name, sets in prepared.items()}
    module = _load_candidate(req, progress)
    path = req["candidate"]
    result: dict[str, Any] = {}
    for case in session.cases:
        progress.stage("load")
        model = _build_candidate(session, module, case, path)
        progress.stage("run")
        outputs = [_run_candidate(model, inputs, case, trial, path, session.platform)
                   for trial, inputs in enumerate(prepared[case.name])]
        result[case.name] = {"outputs": outputs, "digests": digests[case.name]}
    return {"ok": True, "cases": result}


def job_measure(req: dict[str, Any], progress: Progress) -> dict[str, Any]:
    import torch

    progress.stage("problem")
    session = Session(req)
    policy = TimingPolicy(**req["timing"])
    timer = session.platform.make_timer()
    refs, sets, fresh = {}, {}, {}
    for case in session.cases:
        refs[case.name] = session.build(session.module.Model, case)
        sets[case.name] = [session.inputs(case, s) for s in req["timing_seeds"][case.name]]
        fresh[case.name] = [session.inputs(case, s) for s in req["seeds"][case.name]]
    compiled = {}
    if req.get("baseline") == "compile":
        progress.stage("compile")
        for case in session.cases:
            fn = torch.compile(refs[case.name])
            with torch.no_grad():
                fn(*sets[case.name][0])  # compiles now, outside the timed region
            compiled[case.name] = fn
    module = _load_candidate(req, progress)
    path = req["candidate"]
    cands = {}
    for case in session.cases:
        progress.stage("load")
        cands[case.name] = _build_candidate(session, module, case, path)
    result: dict[str, Any] = {}
    for case in session.cases:
        progress.stage("timing")
        fns = [refs[case.name], cands[case.name]]
        if case.name in compiled:
            fns.append(compiled[case.name])
        try:
            with torch.no_grad():
                samples = interleaved(fns, sets[case.name], timer, policy)
        except Exception as exc:  # noqa: BLE001
            raise JobFailure("timing", f"while timing case {case.name!r}:\n"
                             + format_exception(exc, path), case=case.name) from None
        progress.stage("run")
        outputs = [_run_candidate(cands[case.name], inputs, case, trial, path, session.platform)
                   for trial, inputs in enumerate(fresh[case.name])]
        result[case.name] = {"ref_ms": samples[0], "cand_ms": samples[1],
                             "compile_ms": samples[2] if len(samples) > 2 else None,
                             "outputs": outputs,
                             "digests": [digest(x) for x in fresh[case.name]]}
    return {"ok": True, "cases": result}


JOBS = {"fingerprint": job_fingerprint, "reference": job_reference, "check": job_check,
        "measure": job_measure}


def main(jobdir: str, progress_fd: int) -> None:
    req = json.loads(Path(jobdir, "request.json").read_text())
    progress = Progress(progress_fd, req.get("stage_timeouts", {}))
    try:
        result = JOBS[req["job"]](req, progress)
    except JobFailure as exc:
        result = {"ok": False, "stage": exc.stage, "reason": exc.reason, **exc.extra}
    except Exception as exc:  # noqa: BLE001 - e.g. the problem module failed to import here
        result = {"ok": False, "stage": "problem", "reason": f"{type(exc).__name__}: {exc}"}
    data = wire.encode(result)
    tmp = Path(jobdir, "result.bin.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, Path(jobdir, "result.bin"))
