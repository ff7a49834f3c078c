"""`registry revalidate`: every serving version through the full gates again, on this machine.

A compiler upgrade can make a kernel wrong or slower, a new machine can make its win vanish, and
a problem can change (a tighter tolerance, a new case). Per version in default, canary or shadow
state:

1. its verified source (loader.verified_bytes) and the problem as it is now (the file at its
   recorded path; the registry's copy when that file is gone) are evaluated by the harness,
   with a fresh compiled-library cache, so every library is rebuilt from source by this
   machine's compiler;
2. a version rejected, or whose speedup interval no longer clears 1.0x over its baseline, is
   demoted with the reason; one that passes keeps its state, and the new speedup interval and
   fingerprint are recorded as a `revalidate` event;
3. drift is reported in two parts: compiler drift (each rebuilt library's hash against the
   registered one and the compilers' versions; where they differ, whether the old binary
   still loads, and the full gates run again on the registered binaries, which are what
   serving loads) and hardware drift (the fields of the fingerprint that changed).
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from kernelevolve.registry.db import KernelRecord, Registry
from kernelevolve.registry.loader import verified_bytes
from kernelevolve.runtime.cpp_cache import LIBRARIES_SUBDIR

# + the registered platforms' toolkit keys and languages' library keys
HARDWARE_KEYS = ("platform", "device", "cpu_model", "cpu_count", "driver", "torch")


def _hardware_keys() -> tuple[str, ...]:
    from kernelevolve.plugins import library_keys, toolkit_labels

    return (*HARDWARE_KEYS, *toolkit_labels(), *library_keys())


def revalidate(registry: Registry, names: list[str] | None = None, *,
               progress: Callable[[str], None] | None = None, who: str | None = None,
               sandbox: str | None = None, timing: Any = None) -> list[dict[str, Any]]:
    """Revalidate the serving versions of `names` (all); `timing`: a harness TimingPolicy
    (default: the harness's own)."""
    say = progress or (lambda _m: None)
    reports = []
    for name in names or registry.names():
        registry.get(name)  # unknown name: an error listing the registered ones
        for rec in registry.versions(name):
            if rec.state == "retired":
                continue
            say(f"revalidating {rec.label} ({rec.state})")
            reports.append(revalidate_one(registry, rec, who=who, sandbox=sandbox,
                                          timing=timing))
    return reports


def revalidate_one(registry: Registry, rec: KernelRecord, *, who: str | None = None,
                   sandbox: str | None = None, timing: Any = None) -> dict[str, Any]:
    entry = rec.entry
    libraries = entry.get("libraries", [])

    def read(lib: dict[str, Any]) -> bytes:
        return verified_bytes(registry, lib["object"], lib["sha256"], lib["file"])

    with tempfile.TemporaryDirectory(prefix="ke-revalidate-") as tmp:
        kernel = Path(tmp) / "kernel.py"
        kernel.write_bytes(verified_bytes(registry, entry["source"]["object"],
                                          entry["source"]["sha256"], f"{rec.label}: source"))
        problem, changed = _problem(registry, rec, Path(tmp))
        result, registered, compiler = run_gates(
            rec.platform, problem, kernel, libraries, read, Path(tmp),
            baseline=entry.get("evaluation", {}).get("baseline", "eager"), sandbox=sandbox,
            timing=timing, old_loads=lambda lib: _old_loads(read(lib), lib["file"]))
        if registered is not None:
            verdict = _verdict(registered)
            for lib in compiler:
                lib["registered_binary"] = {"verdict": verdict[0], "why": verdict[1]}
        drift = {"compiler": compiler,
                 "hardware": _hardware_drift(entry.get("fingerprint", {}),
                                             result.get("fingerprint", {}))}
    verdict, why = _verdict(result)
    report = {"name": rec.name, "version": rec.version, "state": rec.state, "verdict": verdict,
              "why": why, "problem_changed": changed, "speedup": result.get("speedup"),
              "interval": result.get("speedup_ci"), "drift": drift,
              "fingerprint": result.get("fingerprint", {})}
    data = {k: report[k] for k in ("speedup", "interval", "drift", "problem_changed",
                                   "fingerprint")}
    if verdict == "kept":
        registry.record_event(rec.name, rec.version, "revalidate", why, who=who, data=data)
    else:
        registry.demote(rec.name, rec.version, f"revalidation: {why}", who=who, data=data)
    return report


def run_gates(platform: str, problem: Path, kernel: Path, libraries: list[dict[str, Any]],
              read: Callable[[dict[str, Any]], bytes], tmp: Path, *, baseline: str = "eager",
              sandbox: str | None = None, timing: Any = None,
              old_loads: Callable[[dict[str, Any]], str] | None = None
              ) -> tuple[dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]:
    """The full gates on `kernel` with every library rebuilt from source by this machine's
    compiler, then, where a rebuilt library's bytes differ from the recorded one, again with
    the recorded binaries (`read(lib)` gives their bytes) answering `load_cpp`: those are what
    serving (or an exported package) loads. Both run in the sandboxed harness; the recorded
    binaries are never loaded in this process. Returns (the rebuilt result, the result on the
    recorded binaries or None when the rebuild was byte-identical, compiler drift)."""
    from kernelevolve import knobs
    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator

    options = EvalOptions(baseline=baseline)
    if timing is not None:
        options.timing = timing

    def evaluate(cache: Path) -> dict[str, Any]:
        with knobs.override(KERNELEVOLVE_CACHE_DIR=str(cache)):
            with Evaluator(platform, options=options, sandbox_mode=sandbox) as ev:
                return ev.evaluate(problem, kernel).to_dict()

    result = evaluate(tmp / "cache")
    compiler = _compiler_drift(libraries, result, old_loads)
    registered = None
    if any(not lib["same_binary"] and lib["rebuilt"] for lib in compiler):
        old_cache = tmp / "cache-registered"
        _seed_cache(libraries, read, result, tmp / "cache" / LIBRARIES_SUBDIR,
                    old_cache / LIBRARIES_SUBDIR)
        registered = evaluate(old_cache)
    return result, registered, compiler


def _problem(registry: Registry, rec: KernelRecord, tmp: Path) -> tuple[Path, bool]:
    prob = rec.entry["problem"]
    path = Path(prob.get("path") or "")
    if path.is_file():
        changed = hashlib.sha256(path.read_bytes()).hexdigest() != prob["sha256"]
        return path, changed
    copy = tmp / "problem.py"
    copy.write_bytes(verified_bytes(registry, prob["object"], prob["sha256"],
                                    f"{rec.label}: problem source"))
    return copy, False


def _verdict(result: dict[str, Any]) -> tuple[str, str]:
    if not result.get("accepted"):
        first = (str(result.get("reason") or "").strip().splitlines() or [""])[0]
        return "demoted", f"rejected at {result.get('stage')}: {first[:300]}"
    speedup, ci = result.get("speedup"), result.get("speedup_ci") or [None, None]
    base = result.get("baseline", "eager")
    if ci[0] is None or ci[0] <= 1.0:
        low = "unknown" if ci[0] is None else f"{ci[0]:.3f}"
        return "demoted", f"no longer beats {base}: {speedup or 0:.3f}x (interval from {low})"
    return "kept", f"passed: {speedup:.3f}x over {base} (95% interval {ci[0]:.3f}-{ci[1]:.3f})"


def _compiler_drift(libraries: list[dict[str, Any]], result: dict[str, Any],
                    old_loads: Callable[[dict[str, Any]], str] | None = None
                    ) -> list[dict[str, Any]]:
    rebuilt = {(b.get("source_sha256"), tuple(b.get("flags") or ())): b
               for b in result.get("builds") or []}
    out = []
    for lib in libraries:
        new = rebuilt.get((lib["source_sha256"], tuple(lib["flags"])))
        item = {"file": lib["file"], "compiler_then": lib.get("compiler"),
                "compiler_now": new.get("compiler") if new else None,
                "rebuilt": new is not None,
                "same_binary": bool(new) and new.get("sha256") == lib["sha256"]}
        if new is not None and not item["same_binary"] and old_loads is not None:
            item["old_binary_loads"] = old_loads(lib)
        out.append(item)
    return out


def _seed_cache(libraries: list[dict[str, Any]], read: Callable[[dict[str, Any]], bytes],
                result: dict[str, Any], rebuilt: Path, target: Path) -> None:
    """A library cache in which each (source, flags) the kernel asks for resolves to its
    registered binary: the rebuilt library's key (from its manifest) with the old bytes."""
    from kernelevolve.runtime.cpp_cache import LibraryCache

    cache = LibraryCache(target)
    target.mkdir(parents=True, exist_ok=True)
    registered = {(lib["source_sha256"], tuple(lib["flags"])): lib
                  for lib in libraries}
    for b in result.get("builds") or []:
        lib = registered.get((b.get("source_sha256"), tuple(b.get("flags") or ())))
        manifest = rebuilt / (Path(b["file"]).stem + ".json")
        if lib is None or not manifest.is_file():
            continue
        meta = json.loads(manifest.read_text())
        (target / b["file"]).write_bytes(read(lib))
        cache.write_manifest(target / manifest.name,
                             {"key": meta["key"], "sha256": lib["sha256"], "name": meta.get("name"),
                              "flags": meta.get("flags"), "compiler": lib.get("compiler")})


def _old_loads(data: bytes, file: str) -> str:
    """Whether the registered binary still loads here (dlopen in a child process)."""
    with tempfile.TemporaryDirectory(prefix="ke-oldlib-") as tmp:
        path = Path(tmp) / file
        path.write_bytes(data)
        proc = subprocess.run([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])",
                               str(path)], capture_output=True, text=True, timeout=60)
    if proc.returncode == 0:
        return "yes"
    return "no: " + ((proc.stderr.strip().splitlines() or ["?"])[-1])[:200]


def _hardware_drift(then: dict[str, Any], now: dict[str, Any]) -> dict[str, list[Any]]:
    diff = {k: [then.get(k), now.get(k)] for k in _hardware_keys() if then.get(k) != now.get(k)}
    lost = sorted(set(then.get("cpu_flags") or []) - set(now.get("cpu_flags") or []))
    if lost:
        diff["cpu_flags_lost"] = lost
    return diff
