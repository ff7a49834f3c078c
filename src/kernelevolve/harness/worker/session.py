"""A job's view of the problem inside the worker: the module, seeded inputs, seeded models.

The problem arrives as source text in the request (harness/driver/worker_handle.py) and is imported from it:
its folder does not exist in the sandbox.

Every job (reference, check, measure) builds inputs and models the same way from the same
seeds, so the reference outputs computed in one process match the candidate's inputs in
another; `digest` lets the driver verify that they did.
"""
from __future__ import annotations

import hashlib
import random
from typing import Any

from kernelevolve.harness.protocol.messages import JobRequest, RunJob
from kernelevolve.problem import Case, CaseBinder, import_source


class JobFailure(Exception):
    def __init__(self, stage: str, reason: str, **extra: Any):
        super().__init__(reason)
        self.stage, self.reason, self.extra = stage, reason, extra


def seed_all(seed: int, accelerator: bool = True) -> None:
    """Seed Python's, numpy's and torch's generators. For a platform whose tensors live on no
    torch accelerator (`Platform.torch_accelerator` False), while no accelerator runtime has
    started in this process, only torch's CPU generator: `torch.manual_seed` also queues a lazy
    seed for CUDA, XPU and MTIA, each recording a formatted stack trace (~1-2 ms a call, dozens
    of calls per evaluation) for devices such a worker cannot use. An accelerator platform, or
    a started runtime, gets `torch.manual_seed` itself."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    if not accelerator and not _accelerator_started(torch):
        torch.default_generator.manual_seed(seed)
    else:
        torch.manual_seed(seed)


def _accelerator_started(torch: Any) -> bool:
    for name in ("cuda", "xpu", "mtia", "mps"):
        backend = getattr(torch, name, None)
        started = getattr(backend, "is_initialized", None)
        if started is not None and started():
            return True
    return False


class Session:
    """The problem module, loaded in this child, and seeded access to its inputs and models."""

    def __init__(self, req: JobRequest):
        from kernelevolve.plugins import get_platform

        params = req.params
        if not isinstance(params, RunJob):
            raise TypeError(f"a {req.job} job imports no problem")
        self.req = req
        self.platform = get_platform(req.platform)
        self.platform.setup_worker(req.threads)
        self.problem_path = params.problem  # a bare name: the source came as text
        self.module = import_source(params.problem_source, self.problem_path)
        self.cases = [Case(c.name, c.weight, dict(c.bindings)) for c in params.cases]
        self.binder = CaseBinder(self.module, tuple(self.cases))
        self.init_seed = params.init_seed

    def inputs(self, case: Case, seed: int) -> list[Any]:
        self.binder.bind(case)
        seed_all(seed, self.platform.torch_accelerator)
        values = list(self.module.get_inputs())
        return [self._to_device(v) for v in values]

    def inputs_many(self, case: Case, seed: int, count: int) -> list[list[Any]]:
        """`count` input sets from one seed: get_inputs() called again and again on one random
        stream (seeding costs more than a small problem's inputs)."""
        self.binder.bind(case)
        seed_all(seed, self.platform.torch_accelerator)
        return [[self._to_device(v) for v in self.module.get_inputs()] for _ in range(count)]

    def build(self, cls: type, case: Case):
        self.binder.bind(case)
        seed_all(self.init_seed, self.platform.torch_accelerator)
        init = list(self.module.get_init_inputs())
        seed_all(self.init_seed + 1, self.platform.torch_accelerator)
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


