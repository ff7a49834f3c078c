"""`kernelevolve registry import DIR`: an exported kernel into this machine's registry, in shadow.

A kernel found on one machine reaches production on another by the path every kernel takes
here: `verify` runs first (the full gates and the timing check on this machine: revalidation on
arrival), and a kernel it refuses is not registered (one line: the check and why). One it
passes becomes a new version in `shadow`, with the exported entry as it was (region, binding,
tolerance, figures, fingerprint, provenance), the origin added to its provenance (where it came
from, who exported it, its state history there), an `import` event saying where from, and a
`revalidate` event with this machine's figures. `set-state canary|default` then serves it.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from kernelevolve.registry.db import KernelRecord, Registry
from kernelevolve.share import layout
from kernelevolve.share.layout import Refused, ShareError
from kernelevolve.share.verify import first_failure, verify


def import_dir(registry: Registry, root: Path, *, name: str | None = None,
               who: str | None = None, timing: Any = None, sandbox: str | None = None
               ) -> tuple[KernelRecord, dict[str, Any]]:
    root = Path(root)
    report = verify(root, timing=timing, sandbox=sandbox)
    if not report["ok"]:
        raise Refused(f"{root} was not imported: verify refused it ({first_failure(report)})")
    build = root / "build" / report["build"]
    ev = layout.read_evidence(build)
    entry = _registered_entry(registry, build, ev, root)
    origin = f"{ev['entry'].get('name')} v{ev['entry'].get('version')}"
    rec = registry.add(name or str(ev["entry"].get("name")), entry, state="shadow", who=who,
                       why=f"imported from {root.resolve()} ({origin}, exported by "
                           f"{ev.get('exported_by', {}).get('who')})")
    registry.record_event(rec.name, rec.version, "import", f"exported as {origin} from "
                          f"{ev.get('exported_by', {}).get('registry')}", who=who,
                          data={"origin": entry["provenance"]["imported"]})
    measured = report.get("measured", {})
    timing_check = next(c for c in report["checks"] if c["check"] == "timing")
    registry.record_event(rec.name, rec.version, "revalidate",
                          f"verified on arrival: {timing_check['why']}", who=who,
                          data={"speedup": measured.get("speedup"),
                                "interval": measured.get("interval"),
                                "drift": {"compiler": report.get("drift", [])}})
    return registry.get(rec.name, rec.version), report


def _registered_entry(registry: Registry, build: Path, ev: dict[str, Any], root: Path
                      ) -> dict[str, Any]:
    """The exported entry with this registry's object hashes (the bytes verify just checked)."""
    pkg = layout.package_dir(build)
    entry = {k: v for k, v in ev["entry"].items() if k not in ("name", "version")}

    def put(path: Path, item: dict[str, Any]) -> dict[str, Any]:
        data = path.read_bytes()  # read again: what is stored must be what verify passed
        if hashlib.sha256(data).hexdigest() != item["sha256"]:
            raise ShareError(f"{path} changed while it was imported; import it again")
        return {**item, "object": registry.objects.put(data)}

    entry["source"] = put(pkg / "kernel.py", entry["source"])
    entry["problem"] = put(pkg / "problem.py", entry["problem"])
    entry["libraries"] = [put(pkg / layout.LIBS / lib["file"], lib)
                          for lib in entry.get("libraries", [])]
    if not entry.get("harness"):
        entry["harness"] = ev.get("harness")
    entry["provenance"] = {**(entry.get("provenance") or {}), "imported": {
        "from": str(root.resolve()), "build": build.name,
        "name": ev["entry"].get("name"), "version": ev["entry"].get("version"),
        "state": ev.get("kernel", {}).get("state"), "exported_by": ev.get("exported_by"),
        "events": ev.get("events", [])}}
    return entry
