"""What test_registry.py and test_registry_ops.py share: the promoted registry each test gets
(its own, promoted from the session's one search, conftest.py's `rmsnorm_run`), a model that
uses the problem's module, and a way to add versions."""
from __future__ import annotations

import hashlib
import json

import torch

from kernelevolve.harness.protocol.timing import TimingPolicy
from kernelevolve.problem import import_module
from kernelevolve.registry import Registry, patching
from kernelevolve.registry.promote import promote
from kernelevolve.store import Store

# Revalidations in tests: short, but timed on (up to 2 s a case) until each case's interval is
# 1.3 wide at most: a kept kernel needs its lower bound above 1, which a noisy 5-rep interval
# missed beside a busy neighbour (a good kernel demoted in CI).
QUICK = TimingPolicy(min_reps=5, min_time_s=0.1, max_time_s=2.0, tight=1.3)


def promoted(searched, folder):
    """A registry under `folder` holding the search's kernel as `rmsnorm` v1, default; the
    process's coverage counters zeroed. A generator: the fixtures yield from it."""
    ws, run_id, _ = searched
    with Store.open(ws) as store:
        registry = Registry.open(folder / "registry")
        promote(store, registry, run_id, state="default", force=True, who="test")
    patching.reset_coverage()
    yield registry
    registry.close()


def model_cls(searched):
    return import_module(searched[2]).Model


class Net(torch.nn.Module):
    def __init__(self, norm_cls, dim=1024, eps=1e-6):
        super().__init__()
        self.norm = norm_cls(dim, eps)
        self.proj = torch.nn.Linear(dim, 8)

    def forward(self, x):
        return self.proj(self.norm(x))


def add_version(registry: Registry, name: str, state: str, *, source_edit=None, **changes):
    """A new version of `name` made from v1's entry (a kernel from elsewhere, for the tests)."""
    entry = json.loads(json.dumps(registry.get(name, 1).entry))
    if source_edit is not None:
        src = registry.objects.path(entry["source"]["object"]).read_text()
        new = source_edit(src)
        assert new != src
        entry["source"] = {**entry["source"], "sha256": hashlib.sha256(new.encode()).hexdigest(),
                           "object": registry.objects.put(new)}
    entry.update(changes)
    return registry.add(name, entry, state=state, who="test")

