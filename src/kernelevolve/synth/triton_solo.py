"""Triton for solo kernels (plan_solo.py): index reductions, products, any / all, integer sums
and scans.

The input is seen as (outer, n, inner); a program owns one outer index and BI inner positions
and walks n in (BN, BI) tiles. A reduction folds each tile into a (BN, BI) accumulator
(masked lanes stay out) and reduces it over BN at the end; an argmax keeps a value and an index
per lane, an empty lane holding index n, and the lanes combine by torch's rule (greater, or a
NaN against a number, or the lower index on a tie). A scan runs `tl.associative_scan` down each
tile and folds in the carry of the tiles before it; cummax / cummin scan (value, index) pairs
with torch's CPU rule (a NaN, or a value at least the running one, takes over).
"""
from __future__ import annotations

import re

from kernelevolve.synth.plan_solo import SoloKernel

TL = {"float32": "tl.float32", "int64": "tl.int64", "int32": "tl.int32", "bool": "tl.int1"}

HELPERS = {
    "_ke_add": ["@triton.jit", "def _ke_add(a, b):", "    return a + b"],
    "_ke_mul": ["@triton.jit", "def _ke_mul(a, b):", "    return a * b"],
    "_ke_logaddexp": [
        "@triton.jit", "def _ke_logaddexp(a, b):",
        "    mx = tl.where(a > b, a, b)", "    mn = tl.where(a > b, b, a)",
        "    r = mx + tl.log(1.0 + tl.exp(mn - mx))",
        "    r = tl.where((mn == mx) & (tl.abs(mn) == float('inf')), a, r)",
        "    return tl.where((a != a) | (b != b), a + b, r)"],
}
for _op, _cmp in (("argmax", ">"), ("argmin", "<")):
    HELPERS[f"_ke_{_op}"] = [
        "@triton.jit", f"def _ke_{_op}(av, ai, bv, bi):",
        "    an = av != av", "    bn = bv != bv",
        f"    take = (bv {_cmp} av) | (bn & ~an) | (((bv == av) | (bn & an)) & (bi < ai))",
        "    return tl.where(take, bv, av), tl.where(take, bi, ai)"]
for _op, _cmp in (("max", ">"), ("min", "<")):
    HELPERS[f"_ke_nan{_op}"] = [
        "@triton.jit", f"def _ke_nan{_op}(a, b):",
        f"    return tl.where((b {_cmp} a) | (b != b), b, a)"]
for _op, _cmp in (("cummax", ">="), ("cummin", "<=")):
    HELPERS[f"_ke_{_op}"] = [
        "@triton.jit", f"def _ke_{_op}(av, ai, bv, bi):",
        f"    take = (bv != bv) | ((av == av) & (bv {_cmp} av))",
        "    return tl.where(take, bv, av), tl.where(take, bi, ai)"]


def helpers_used(solos: list[SoloKernel]) -> list[str]:
    code = "\n".join(write(k) for k in solos)
    return [h for h in HELPERS if re.search(rf"\b{h}\b", code)]


def _acc(k: SoloKernel) -> str:
    if k.op in ("any", "all"):
        return "tl.int32"
    if k.op in ("max", "min"):
        return TL[k.in_dtype]
    return "tl.int64" if k.acc == "int64" else "tl.float32"


def _head(k: SoloKernel) -> list[str]:
    extra = (["idx"] if k.indices else []) + (["vals"] if k.values is not None else [])
    return ["@triton.jit",
            f"def {k.name}(x, out, {''.join(e + ', ' for e in extra)}outer, n, inner, "
            "BN: tl.constexpr, BI: tl.constexpr):",
            f"    # kernel {k.name}: {k.label}",
            "    o = tl.program_id(0).to(tl.int64)",
            "    cc = tl.program_id(1) * BI + tl.arange(0, BI)",
            "    c = cc[None, :]",
            "    base = o * n * inner"]


def _tile(pad: str) -> list[str]:
    return ["        f = (f0 + tl.arange(0, BN)).to(tl.int64)[:, None]",
            "        m = (f < n) & (c < inner)",
            "        offs = base + f * inner + c",
            f"        v = tl.load(x + offs, mask=m, other={pad})"]


def write(k: SoloKernel) -> str:
    body = _arg(k) if k.op in ("argmax", "argmin") else (
        _reduce(k) if k.kind == "reduce" else _scan(k))
    return "\n".join(_head(k) + body)


def _arg(k: SoloKernel) -> list[str]:
    inf = "float('-inf')" if k.op == "argmax" else "float('inf')"
    cmp = ">" if k.op == "argmax" else "<"
    t = TL[k.in_dtype] if k.in_dtype != "bool" else "tl.int32"
    pad = inf if k.in_dtype == "float32" else "0"
    return [f"    a = tl.full([BN, BI], {pad}, {t})",
            "    ai = tl.full([BN, BI], 0, tl.int64) + n",
            "    for f0 in range(0, n, BN):",
            *_tile(pad),
            f"        v = v.to({t})",
            f"        take = m & ((v {cmp} a) | ((v != v) & (a == a)) | (ai == n))",
            "        a = tl.where(take, v, a)",
            "        ai = tl.where(take, f + ai * 0, ai)",
            f"    rv, ri = tl.reduce((a, ai), 0, _ke_{k.op})",
            "    tl.store(out + o * inner + cc, ri, mask=cc < inner)",
            *(["    tl.store(vals + o * inner + cc, rv, mask=cc < inner)"]
              if k.values is not None else [])]


def _reduce(k: SoloKernel) -> list[str]:
    acc = _acc(k)
    pad, fold, final = {
        "sum": ("0", "a + v", "tl.sum(a, 0)"),
        "prod": ("1", "a * v", "tl.reduce(a, 0, _ke_mul)"),
        "any": ("0", "tl.maximum(a, (v != 0).to(tl.int32))", "tl.max(a, 0) > 0"),
        "all": ("1", "tl.minimum(a, (v != 0).to(tl.int32))", "tl.min(a, 0) > 0"),
        "max": ("float('-inf')", "_ke_nanmax(a, v)", "tl.reduce(a, 0, _ke_nanmax)"),
        "min": ("float('inf')", "_ke_nanmin(a, v)", "tl.reduce(a, 0, _ke_nanmin)"),
    }[k.op]
    conv = "" if k.op in ("any", "all") else f".to({acc})"
    return [f"    a = tl.full([BN, BI], {pad}, {acc})",
            "    for f0 in range(0, n, BN):",
            *_tile(pad),
            f"        v = v{conv}",
            f"        a = {fold}",
            f"    tl.store(out + o * inner + cc, ({final}).to({TL[k.out_dtype]}), "
            "mask=cc < inner)"]


def _scan(k: SoloKernel) -> list[str]:
    if k.indices:
        return _scan_pairs(k)
    acc, out = _acc(k), TL[k.out_dtype]
    pad, comb = {"sum": ("0", "_ke_add"), "prod": ("1", "_ke_mul"),
                 "logsumexp": ("float('-inf')", "_ke_logaddexp")}[k.op]
    return [f"    carry = tl.full([BI], {pad}, {acc})",
            "    for f0 in range(0, n, BN):",
            *_tile(pad),
            f"        v = v.to({acc})",
            f"        s = {comb}(carry[None, :], tl.associative_scan(v, 0, {comb}))",
            f"        tl.store(out + offs, s.to({out}), mask=m)",
            f"        carry = {comb}(carry, tl.reduce(v, 0, {comb}))"]


def _scan_pairs(k: SoloKernel) -> list[str]:
    inf = "float('-inf')" if k.op == "max" else "float('inf')"
    comb = "_ke_cummax" if k.op == "max" else "_ke_cummin"
    return [f"    carry = tl.full([BI], {inf}, tl.float32)",
            "    carry_i = tl.full([BI], 0, tl.int64)",
            "    for f0 in range(0, n, BN):",
            *_tile(inf),
            "        fi = f + c.to(tl.int64) * 0",
            f"        s, si = tl.associative_scan((v, fi), 0, {comb})",
            f"        s, si = {comb}(carry[None, :], carry_i[None, :], s, si)",
            "        tl.store(out + offs, s, mask=m)",
            "        tl.store(idx + offs, si, mask=m)",
            f"        rv, ri = tl.reduce((v, fi), 0, {comb})",
            f"        carry, carry_i = {comb}(carry, carry_i, rv, ri)"]


def launch(k: SoloKernel, x: str, outs: list[str]) -> list[str]:
    """The forward lines launching solo kernel `k` (after solo_glue.solo_setup)."""
    outer, n, inner = f"{k.name}_outer", f"{k.name}_n", f"{k.name}_inner"
    tensors = ", ".join([x, *outs])
    return [f"{k.name}_bi = min(triton.next_power_of_2({inner}), 64)",
            f"{k.name}_bn = max(1, min(triton.next_power_of_2({n}), "
            f"BLOCK_ELEMENTS // {k.name}_bi))",
            f"{k.name}[({outer}, triton.cdiv({inner}, {k.name}_bi))]({tensors}, {outer}, {n}, "
            f"{inner}, BN={k.name}_bn, BI={k.name}_bi, num_warps=NUM_WARPS)"]
