"""Integrity verdicts, driver side: decisions over what the worker probes reported.

The worker reports facts (launch counts, ATen ops, repeated and kernel-suppressed outputs);
the rules that turn them into a rejection live here, in trusted code, next to the reference
data the worker never sees.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelevolve.harness.gates.compare import compare_outputs


@dataclass(frozen=True)
class IntegrityPolicy:
    allow_no_kernel: bool = False   # problems where computing with torch alone is legitimate
    strict: bool = False            # no ATen compute op at all inside the candidate's forward
    recheck_speedup: float = 10.0   # above this, measure again independently before it counts


NOISE_LIMIT = 0.5  # a reference more than half rounding error carries no signal to protect


def norm_ratio_problem(ref: list[Any], cand: list[Any],
                       noise: list[float | None] | None = None) -> str | None:
    """Zeros or tiny outputs must not pass a loose tolerance where the reference is not small.

    Elementwise allclose lets a zero output pass wherever |ref| <= atol (a softmax over 8192
    columns is mostly below 1e-4). The relative L2 error catches it: an honest fp32 kernel is
    near 1e-6, returning zeros gives exactly 1.

    The rule, and its one exception: a candidate within atol + rtol*|ref| everywhere is correct,
    and this check, on top of that, asks it to reproduce the reference's norm, unless the
    reference is itself rounding noise: `noise` (from the reference job: ||ref - ref64|| /
    ||ref||, the same model in float64) above NOISE_LIMIT means the true result is about zero
    and what the reference shows is its own float error, which a more accurate kernel (a
    double accumulation) rightly does not reproduce. Zeros for a reference with signal, however
    small its values (1e-5 * tanh(x): noise ~1e-8), are still rejected.
    """
    import torch

    for i, (r, c) in enumerate(zip(ref, cand)):
        if not (r.is_floating_point() and c.is_floating_point()) or r.numel() == 0:
            continue
        if noise and i < len(noise) and noise[i] is not None and noise[i] > NOISE_LIMIT:
            continue
        finite = torch.isfinite(r) & torch.isfinite(c)
        zero = torch.zeros((), dtype=torch.float64)
        r64 = torch.where(finite, r.double(), zero)
        c64 = torch.where(finite, c.double(), zero)
        ref_norm = float(r64.norm())
        if ref_norm == 0.0:
            continue
        rel = float((c64 - r64).norm()) / ref_norm
        ratio = float(c64.norm()) / ref_norm
        if rel > 0.1 or not 0.9 <= ratio <= 1.1:
            return (f"output {i} passes the elementwise tolerance only because the reference "
                    f"values are small: its norm is {ratio:.3g}x the reference's and the relative "
                    f"L2 error is {rel:.3g} (zeros or scaled-down outputs?)")
    return None


def launch_problem(case: str, launches: list[dict[str, int]], policy: IntegrityPolicy) -> str | None:
    if policy.allow_no_kernel:
        return None
    for trial, counts in enumerate(launches):
        if sum(counts.values()) == 0:
            return (f"ModelNew.forward launched no custom kernel on case {case!r} (trial "
                    f"{trial + 1}): no load_cpp function call, no Triton launch, no load_inline "
                    "call. A candidate must run its own kernel (use --allow-no-kernel if torch "
                    "ops alone are intended)")
    return None


def fallback_problem(case: str, ref_ops: list[str], cand_ops: list[str],
                     policy: IntegrityPolicy, decomposed: list[str] = ()) -> str | None:
    if policy.strict and cand_ops:
        return (f"--strict: forward dispatched ATen compute ops {cand_ops[:6]} on case {case!r}; "
                "in strict mode every computation must be in the candidate's own kernels")
    checks = [(ref_ops, "the reference's compute ops")]
    if not policy.allow_no_kernel:  # with it, a torch reimplementation is what was allowed
        checks.append((decomposed, "the reference's decomposed compute ops"))
    for ops, how in checks:
        if ops and set(_norm(ops)) <= set(_norm(cand_ops)):
            return (f"fallback: forward dispatches all of {how} ({', '.join(ops[:6])}) on case "
                    f"{case!r}, so the reference computation runs in torch; replace at least "
                    "part of it with your kernel")
    return None


def _norm(ops: list[str]) -> list[str]:
    """In-place and out-of-place variants count as the same op (mul_ is mul)."""
    return [op.rstrip("_") for op in ops]


def neutered_problem(case: str, ref_out: list[Any], neutered: dict[str, Any],
                     tolerance: dict[str, float] | None) -> str | None:
    """With every custom kernel skipped, a correct output means torch did the work. A case whose
    reference outputs carry no information a skipped kernel could fail to reproduce (all NaN or
    inf, the poison an unwritten buffer often holds; all zeros, what fresh pages hold, such as
    argmin's index 0 when a NaN comes first; a lone bool, which uninitialised memory matches
    one time in two) cannot tell: it is left to the other cases and gates."""
    if "outputs" not in neutered or not any(_informative(r) for r in ref_out):
        return None
    cmp = compare_outputs(ref_out, neutered["outputs"], tolerance)
    if cmp.ok and norm_ratio_problem(ref_out, neutered["outputs"]) is None:
        return (f"the output on case {case!r} stays correct when every custom kernel launch is "
                "skipped: the kernels do not compute the result, torch ops do (a fake kernel)")
    return None


def _informative(t: Any) -> bool:
    import torch

    if not isinstance(t, torch.Tensor) or t.numel() == 0:
        return False
    if t.is_floating_point():
        return bool((torch.isfinite(t) & (t != 0)).any())
    return bool((t != 0).any()) and (t.numel() > 1 or t.dtype != torch.bool)


def timing_problem(case: str, data: dict[str, Any], wall_s: float) -> str | None:
    """In-worker samples must fit in the loop's own time and the server's wall clock."""
    samples_s = (sum(data["ref_ms"]) + sum(data["cand_ms"]) + sum(data.get("compile_ms") or [])) / 1e3
    loop_s = float(data.get("loop_s", 0.0))
    if samples_s > loop_s * 1.05 + 1e-3:
        return (f"timing on case {case!r} is inconsistent: samples add up to {samples_s:.3f} s "
                f"inside a loop that took {loop_s:.3f} s (a patched clock?)")
    if loop_s > wall_s * 1.05 + 0.05:
        return (f"timing on case {case!r} is inconsistent with the parent's wall clock: "
                f"{loop_s:.3f} s of timing inside a worker that ran {wall_s:.3f} s")
    return None


# ---- verdicts from the outside measurement (harness/worker/measure.py) ------------------------------
IDLE_CPU_FLOOR_S = 0.005   # scheduler noise, a stray wake-up: below this nothing is said
IDLE_CPU_SHARE = 0.02      # of the timed wall time: more than this outside its own batches is work


def sampled_calls_problem(case: str, samples: Any, tolerance) -> str | None:
    """Outputs of timed calls (one chosen after each batch; of a large output, blocks drawn
    after it) against the reference for the same inputs: a cache of any key, or work skipped in
    the timed loop, gives a wrong one here."""
    from kernelevolve.harness.gates.compare import compare_outputs

    if not isinstance(samples, list) or not samples:
        return f"no timed call of case {case!r} could be checked"
    for s in samples:
        if not isinstance(s, dict):
            return f"a timed call of case {case!r} came back malformed"
        where = (f"timed call {int(s.get('call', 0)) + 1} of batch {int(s.get('batch', 0)) + 1} "
                 f"on case {case!r}")
        if s.get("error") or not isinstance(s.get("cand"), list):
            return f"{where}: {s.get('error') or 'no output'}"
        cmp = compare_outputs(s.get("ref") or [], s["cand"], tolerance)
        if not cmp.ok:
            return (f"wrong result at {where}, checked after timing on inputs the candidate had "
                    f"not seen before (a cached or stale output, or work skipped on calls it "
                    f"hoped go unread?): {_sampled_reason(s, cmp.reason, tolerance)}")
    return None


def _sampled_reason(sample: dict[str, Any], reason: str, tolerance) -> str:
    """Where sampled blocks were compared, the first wrong element named in the output's own
    shape (the comparison itself saw a flat run of elements)."""
    select, strides = sample.get("select"), sample.get("strides")
    if not isinstance(select, list) or not isinstance(strides, list):
        return reason
    try:
        return _first_wrong(sample, select, strides, reason, tolerance)
    except (IndexError, KeyError, TypeError, ValueError, RuntimeError):
        return reason  # the plain comparison's reason says enough


def _first_wrong(sample: dict[str, Any], select: list[Any], strides: list[Any], reason: str,
                 tolerance) -> str:
    from kernelevolve.harness.protocol import sampled_outputs

    for i, (r, c, spec) in enumerate(zip(sample["ref"], sample["cand"], select)):
        one = compare_outputs([r], [c], tolerance) if spec is not None else None
        if one is None or one.ok:
            continue
        lo, hi = 0, int(r.numel())  # the shortest failing prefix: comparison is elementwise
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if not compare_outputs([r[:mid]], [c[:mid]], tolerance).ok \
                else (mid, hi)
        at = sampled_outputs.where(spec, _shape_of(sample, i), strides[i], lo)
        counts = one.reason.split("; first mismatch")[0].removeprefix("output ")
        return (f"output {i}, read in {len(spec['starts'])} block(s) of {spec['block']} "
                f"element(s) drawn at random after the batch, {counts}; first at {at}: expected "
                f"{r[lo].item():.6g}, got {c[lo].item():.6g}")
    return reason


def _shape_of(sample: dict[str, Any], i: int) -> list[int]:
    shapes = sample.get("shapes")
    return list(shapes[i]) if isinstance(shapes, list) and i < len(shapes) else []


def idle_cpu_problem(case: str, cpu: Any) -> str | None:
    """CPU the candidate's side used outside the candidate's own batches, read from outside it:
    its own process between and around its batches, and every other process it started."""
    if not isinstance(cpu, dict):
        return None
    try:
        total = float(cpu["total_cpu_s"])
        own = float(cpu["cand_batches_cpu_s"])
        during_ref = float(cpu["ref_batches_cpu_s"])
        wall = float(cpu["ref_batches_wall_s"]) + float(cpu["cand_batches_wall_s"])
        others = float(cpu.get("others_cpu_s", 0.0))
    except (KeyError, TypeError, ValueError):
        return None
    idle = total - own + others
    allowed = max(IDLE_CPU_FLOOR_S, IDLE_CPU_SHARE * wall)
    if idle > allowed:
        count = cpu.get("other_processes") or 0
        rest = (f"; {1e3 * others:.1f} ms in {count} other process(es) it started"
                if others > 0 else "")
        return (f"the candidate's side used {1e3 * idle:.1f} ms of CPU outside its own timed "
                f"batches on case {case!r}: {1e3 * (total - own):.1f} ms in its own process "
                f"({1e3 * during_ref:.1f} ms of it while the reference was being timed){rest}; "
                f"allowed {1e3 * allowed:.1f} ms. Measured from outside its processes: threads "
                "or processes working between or around calls hide work from the clock, or "
                "steal the baseline's cores. Finish all work inside forward, in its own process")
    return None
