"""The evidence an exported kernel carries: what a reader needs to judge its claim, and what
`registry import` needs to register it again elsewhere.

`evidence.json` holds the registry entry as promoted (source and library hashes, problem,
validated region, init bindings, tolerance, evaluation, fingerprint, harness, provenance), the
version's state history (every event, who, when, why), and a summary in plain fields: the cases
with their weights, per-case times, speedups and 95% intervals, the baseline kind (eager or
torch.compile), the machine, the toolchain, the harness that measured it (version and source
hash) and the one that exported it. Why the whole entry and not a digest of it: the evidence
must stand on its own where the registry it came from is unreachable.
"""
from __future__ import annotations

import time
from typing import Any

from kernelevolve.registry.db import KernelRecord, Registry, default_who
from kernelevolve.version import __version__, harness_hash

FORMAT = "kernelevolve-evidence/1"
_MACHINE_KEYS = ("platform", "device", "cpu_model", "cpu_flags", "cpu_count", "threads", "os",
                 "python", "torch", "driver")


def build(registry: Registry, rec: KernelRecord, *, variant: str, layer: str) -> dict[str, Any]:
    entry = rec.entry
    fp = entry.get("fingerprint") or {}
    return {
        "format": FORMAT,
        "kernel": {"name": rec.name, "version": rec.version, "state": rec.state,
                   "language": rec.language, "platform": rec.platform, "layer": layer,
                   "variant": variant},
        "summary": summary(entry),
        "machine": {k: fp.get(k) for k in _MACHINE_KEYS if k in fp},
        "toolchain": toolchain(entry),
        "harness": entry.get("harness") or {
            "version": None, "source_sha256": None,
            "note": "promoted before kernelevolve recorded its harness; see exported_by"},
        "exported_by": {"kernelevolve": __version__, "harness_sha256": harness_hash(),
                        "who": default_who(), "when": time.time(),
                        "registry": str(registry.root.resolve())},
        "region": entry.get("region"),
        "tolerance": entry.get("tolerance"),
        "events": [{"ts": e.ts, "kind": e.kind, "from": e.from_state, "to": e.to_state,
                    "who": e.who, "why": e.why}
                   for e in registry.events(rec.name) if e.version == rec.version],
        "entry": {**entry, "name": rec.name, "version": rec.version},
    }


def summary(entry: dict[str, Any]) -> dict[str, Any]:
    ev = entry.get("evaluation") or {}
    cases = [{"name": c.get("name"), "weight": c.get("weight"),
              "held_out": c.get("held_out", False), "ref_ms": c.get("ref_ms"),
              "cand_ms": c.get("cand_ms"), "speedup": c.get("speedup"),
              "speedup_ci": c.get("speedup_ci")} for c in ev.get("cases", [])]
    return {"speedup": ev.get("speedup"), "interval": ev.get("interval"),
            "baseline": ev.get("baseline", "eager"), "measured": ev.get("measured"),
            "cases": cases}


def toolchain(entry: dict[str, Any]) -> dict[str, Any]:
    """The compilers, flags and library versions the kernel was built and checked with."""
    from kernelevolve.plugins import library_keys, toolkit_labels

    fp = entry.get("fingerprint") or {}
    out: dict[str, Any] = {"torch": fp.get("torch"), "python": fp.get("python"),
                           "compiler": fp.get("cxx")}
    out.update({k: fp.get(k) for k in (*library_keys(), *toolkit_labels()) if fp.get(k)})
    out["libraries"] = [{"file": lib.get("file"), "compiler": lib.get("compiler"),
                         "flags": lib.get("flags"), "sha256": lib.get("sha256")}
                        for lib in entry.get("libraries", [])]
    return out


def headline(evidence: dict[str, Any]) -> str:
    """One line: the claim and what it rests on."""
    s = evidence.get("summary") or {}
    m = evidence.get("machine") or {}
    ci = s.get("interval") or [None, None]
    band = f" (95% interval {ci[0]:.2f}-{ci[1]:.2f})" if ci[0] is not None else ""
    speed = f"{s['speedup']:.3f}x" if s.get("speedup") is not None else "unmeasured"
    return (f"{speed}{band} over {s.get('baseline', 'eager')} on {m.get('device')}, torch "
            f"{m.get('torch')}, {len(s.get('cases', []))} cases")
