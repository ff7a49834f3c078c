"""Serve only what pays inside the model: each promoted kernel timed in place.

A kernel's speedup was measured on its problem, alone: its inputs hot in cache, nothing around
it. Inside the model a small region can lose that to the dispatcher's per-call cost (the
region check, the op call), and a gather can lose it to tables that no longer sit in cache.
So before the whole model is measured, the outlined model is profiled without and with the
kernels (forward hooks on the region modules, profile.py), alternating, `rounds` times; a kind
whose regions take no less time patched than eager (median over rounds) is not served, and its
verdict says so with both figures. The registry keeps the version: it is a valid kernel, it just
does not pay in this model.
"""
from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Callable


def _times(prof: dict[str, Any], spots: list[dict[str, Any]]) -> dict[str, float]:
    incl = {i["path"]: i["incl_ms"] for i in prof["instances"]}
    return {h["kind"]: sum(incl.get(p, 0.0) for p in h["instances"]) for h in spots}


def check_in_place(mf: Any, workspace: Path, spots: list[dict[str, Any]],
                   verdicts: list[dict[str, Any]], *, rounds: int = 3, reps: int = 3,
                   say: Callable[[str], None] = lambda m: None) -> list[dict[str, Any]]:
    """The verdicts, with `in_situ` figures on every served kind and `served` cleared on
    the kinds that do not pay inside the model."""
    from kernelevolve.model.outline import find_regions
    from kernelevolve.model.profile import profile
    from kernelevolve.model.serve import patched_model
    from kernelevolve.model.cases import timed_cases

    if not any(v.get("served") for v in verdicts):
        return verdicts
    say("timing each kernel inside the model (eager and patched, alternating)")
    cases = timed_cases(mf)
    example = cases[0][2]()
    eager = find_regions(mf.build(), example).module
    patched, session = patched_model(mf, workspace, spots, verdicts, example)
    samples: dict[str, dict[str, list[float]]] = {"eager": {}, "patched": {}}
    try:
        for _ in range(rounds):
            for name, module in (("eager", eager), ("patched", patched)):
                for kind, ms in _times(profile(module, cases, reps=reps, warmup=1),
                                       spots).items():
                    samples[name].setdefault(kind, []).append(ms)
    finally:
        if session is not None:
            session.unpatch()
    out = []
    for v in verdicts:
        v = dict(v)
        kind = v["kind"]
        if v.get("served") and kind in samples["eager"]:
            e = statistics.median(samples["eager"][kind])
            p = statistics.median(samples["patched"][kind])
            v["in_situ"] = {"eager_ms": e, "patched_ms": p, "speedup": e / p if p else None}
            if p >= e:
                v["not_served"] = (f"slower inside the model than eager ({p:.3f} ms against "
                                   f"{e:.3f} ms a forward); kept in the registry, not served")
                v["served"] = None
        out.append(v)
    return out
