"""`kernelevolve verify DIR`: the load-time gate for an exported kernel, on this machine.

Checks, in order, stopping at the first that fails (each later one assumes the earlier):

1. variant: a build folder this machine can load (torch version and ABI, backend, CPU
   architecture, OS), with the reason for every build refused;
2. files: every file of the build matches the sealed digest, and the kernel, problem and
   libraries hash to what the evidence records (the file is named);
3. machine: the evidence's fingerprint fits this machine (compat.py: device model, every CPU
   feature the measuring machine had, torch and library versions);
4. gates: the full harness on the recorded cases, in its sandbox: the shipped libraries are
   hostile native code until shown otherwise and are loaded only in the worker (rebuilt from
   source first; where the rebuild's bytes differ, the gates run again on the shipped ones,
   which decide: revalidate.run_gates);
5. timing: the paired timing of step 4 against the recorded figure, by TIMING_RULE (a kernel
   whose evidence claims no figure, one checked but never timed, has nothing to hold to).
"""
from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any, Callable

from kernelevolve.share import layout, variant
from kernelevolve.share.layout import ShareError

# Half: a CPU timing on a busy machine moves by tens of percent between runs, a figure that no
# longer holds (another machine's, an edited one, a slowed library) misses by far more.
RATIO = 0.5
TIMING_RULE = (f"fails when the upper end of this machine's 95% speedup interval is below "
               f"{RATIO:g} x the recorded speedup, or below 1.0 (slower than the baseline)")


def default_timing() -> Any:
    """A short paired timing: the point is whether the claim holds, not a new figure. Timed on
    (up to 2 s a case) until the interval is 1.5 wide at most: the rule reads its upper end, which
    a few noisy repetitions on a busy machine push past any threshold."""
    from kernelevolve.harness.protocol.timing import TimingPolicy

    return TimingPolicy(min_reps=10, min_time_s=0.2, max_time_s=2.0, tight=1.5)


def verify(root: Path, *, timing: Any = None, sandbox: str | None = None,
           progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """The report: ok, the checks run (name, ok, why), the build used, the figures.
    `progress` hears when the slow part, the gates in a sandboxed worker, starts."""
    root = Path(root)
    found = layout.builds(root)
    if not found:
        raise ShareError(f"{root} is not an exported kernel (no build/<variant>/metadata.json); "
                         "make one with `kernelevolve export NAME --out DIR`")
    report: dict[str, Any] = {"dir": str(root), "ok": False, "checks": [], "rule": TIMING_RULE}
    build = _pick_build(found, report)
    if build is None:
        return report
    report["build"] = build.name
    ev = layout.read_evidence(build)
    entry = ev["entry"]
    report["kernel"] = f"{entry.get('name')} v{entry.get('version')}"
    if not _files(build, entry, report) or not _machine(entry, report):
        return report
    if progress is not None:
        progress("running the full gates and the timing in a sandboxed worker")
    result = _gates(build, entry, report, timing, sandbox)
    if result is None:
        return report
    report["ok"] = _timing(entry, result, report)
    return report


def _check(report: dict[str, Any], name: str, ok: bool, why: str) -> bool:
    report["checks"].append({"check": name, "ok": ok, "why": why})
    return ok


def _pick_build(found: list[Path], report: dict[str, Any]) -> Path | None:
    refused = []
    for build in found:
        parsed = variant.parse(build.name)
        if parsed is None:
            refused.append(f"{build.name}: not a build variant name")
            continue
        backend = layout.read_metadata(build).get("backend")
        backend = str(backend.get("type", "")) if isinstance(backend, dict) else ""
        why = variant.mismatch(parsed, backend or parsed.backend)
        if why is None:
            _check(report, "variant", True, f"{build.name} fits this machine")
            return build
        refused.append(why)
    _check(report, "variant", False, "no build for this machine: " + "; ".join(refused))
    return None


def _files(build: Path, entry: dict[str, Any], report: dict[str, Any]) -> bool:
    problems = layout.digest_problems(build)
    if problems:
        return _check(report, "files", False, "; ".join(problems[:5]))
    pkg = layout.package_dir(build)
    want = [(pkg / "kernel.py", entry["source"]["sha256"]),
            (pkg / "problem.py", entry["problem"]["sha256"])]
    want += [(pkg / layout.LIBS / lib["file"], lib["sha256"]) for lib in
             entry.get("libraries", [])]
    for path, sha in want:
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != sha:
            return _check(report, "files", False, f"{path.relative_to(build)} does not match "
                                                  "the sha256 its evidence records")
    return _check(report, "files", True, f"{len(want)} artifacts match the evidence and the "
                                         "digest")


def _machine(entry: dict[str, Any], report: dict[str, Any]) -> bool:
    from kernelevolve.registry.compat import current_fingerprint, mismatch

    platform = entry.get("platform", "cpu")
    why = mismatch(entry.get("fingerprint") or {}, current_fingerprint(platform),
                   entry.get("language", "unknown"))
    return _check(report, "machine", why is None, why or "this machine fits the fingerprint "
                                                        "the figures were measured on")


def _gates(build: Path, entry: dict[str, Any], report: dict[str, Any], timing: Any,
           sandbox: str | None) -> dict[str, Any] | None:
    from kernelevolve.registry.revalidate import run_gates

    pkg = layout.package_dir(build)

    def read(lib: dict[str, Any]) -> bytes:
        data = (pkg / layout.LIBS / lib["file"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != lib["sha256"]:
            raise ShareError(f"{lib['file']} changed while it was verified; verify again")
        return data

    with tempfile.TemporaryDirectory(prefix="ke-verify-") as tmp:
        result, shipped, drift = run_gates(
            entry.get("platform", "cpu"), pkg / "problem.py", pkg / "kernel.py",
            entry.get("libraries", []), read,
            Path(tmp), baseline=(entry.get("evaluation") or {}).get("baseline", "eager"),
            sandbox=sandbox, timing=timing or default_timing())
    judged = shipped if shipped is not None else result
    report["drift"] = drift
    report["measured"] = {"speedup": judged.get("speedup"), "interval": judged.get("speedup_ci"),
                          "stage": judged.get("stage"),
                          "on": _judged_on(shipped is not None, drift)}
    if not judged.get("accepted"):
        first = (str(judged.get("reason") or "").strip().splitlines() or [""])[0]
        _check(report, "gates", False, f"rejected at {judged.get('stage')}: "
                                       f"{_printable(first)[:300]}")
        return None
    _check(report, "gates", True, "passed every gate on the recorded cases (correctness "
                                  "against the reference included)")
    return judged


def _timing(entry: dict[str, Any], result: dict[str, Any], report: dict[str, Any]) -> bool:
    ev = entry.get("evaluation") or {}
    recorded = ev.get("speedup")
    hi = (result.get("speedup_ci") or [None, None])[1]
    speed = result.get("speedup")
    report["recorded"] = {"speedup": recorded, "interval": ev.get("interval"),
                          "baseline": ev.get("baseline", "eager")}
    if recorded is None:
        # e.g. a Triton kernel checked in the interpreter: correct, never timed, claims nothing
        return _check(report, "timing", True, "the evidence claims no speedup (the kernel was "
                                              "not timed where it was promoted): nothing to hold")
    if hi is None:
        return _check(report, "timing", False, f"the evidence claims {recorded:.3f}x and this "
                                               "machine measured no figure to hold it to")
    here = f"{speed:.3f}x here (95% interval up to {hi:.3f}x), recorded {recorded:.3f}x"
    if hi < 1.0:
        return _check(report, "timing", False, f"slower than {ev.get('baseline', 'eager')} "
                                               f"here: {here}")
    if hi < RATIO * recorded:
        return _check(report, "timing", False, f"the recorded figure does not hold here: {here}")
    return _check(report, "timing", True, here)


def _judged_on(shipped: bool, drift: list[dict[str, Any]]) -> str:
    if shipped:
        return "the shipped binaries (a rebuild here differs from them)"
    if not drift:
        return "the source (no compiled libraries)"
    return "rebuilt binaries, byte-identical to the shipped ones"


def _printable(text: str) -> str:
    """Candidate text is data: no control characters reach a terminal."""
    return "".join(c if c.isprintable() else "?" for c in text)


def first_failure(report: dict[str, Any]) -> str:
    bad = next((c for c in report["checks"] if not c["ok"]), None)
    return f"{bad['check']}: {bad['why']}" if bad else "passed"
