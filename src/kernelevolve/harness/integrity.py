"""Integrity verdicts, driver side: decisions over what the worker probes reported.

The worker reports facts (launch counts, ATen ops, repeated and kernel-suppressed outputs);
the rules that turn them into a rejection live here, in trusted code, next to the reference
data the worker never sees.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelevolve.harness.compare import compare_outputs


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


# ---- verdicts from the outside measurement (harness/measure.py) ------------------------------
IDLE_CPU_FLOOR_S = 0.005   # scheduler noise, a stray wake-up: below this nothing is said
IDLE_CPU_SHARE = 0.02      # of the timed wall time: more than this outside its own batches is work


def sampled_calls_problem(case: str, samples: Any, tolerance) -> str | None:
    """Outputs of timed calls (chosen after each batch) against the reference for the same
    inputs: a cache of any key, or work skipped in the timed loop, gives a wrong one here."""
    from kernelevolve.harness.compare import compare_outputs

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
                    f"not seen before (a cached or stale output?): {cmp.reason}")
    return None


def idle_cpu_problem(case: str, cpu: Any) -> str | None:
    """CPU the candidate's process used outside its own batches, read from outside it."""
    if not isinstance(cpu, dict):
        return None
    try:
        total = float(cpu["total_cpu_s"])
        own = float(cpu["cand_batches_cpu_s"])
        during_ref = float(cpu["ref_batches_cpu_s"])
        wall = float(cpu["ref_batches_wall_s"]) + float(cpu["cand_batches_wall_s"])
    except (KeyError, TypeError, ValueError):
        return None
    idle = total - own
    allowed = max(IDLE_CPU_FLOOR_S, IDLE_CPU_SHARE * wall)
    if idle > allowed:
        return (f"the candidate's process used {1e3 * idle:.1f} ms of CPU outside its own timed "
                f"batches on case {case!r} ({1e3 * during_ref:.1f} ms of it while the reference "
                f"was being timed; allowed {1e3 * allowed:.1f} ms), measured from outside its "
                "process: threads working between or around calls hide work from the clock, "
                "or steal the baseline's cores. Finish all work inside forward")
    return None
