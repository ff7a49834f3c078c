"""Triton for pool kernels (plan_pool.py).

A program owns BLOCK consecutive outputs of the flattened (planes, OD, OH, OW) output; each
lane walks its window in a loop unrolled over the window's positions (the window sizes are
compile-time constants; an adaptive window's longest extent per dim is passed as one), masking
the positions outside the input. A max lane takes its first in-range position, then any
greater or NaN value (torch's CPU rule: NaN wins, the last NaN's index is kept); an average
lane divides by the count torch's rules give.
"""
from __future__ import annotations

from kernelevolve.synth.plan_pool import PoolKernel


def _head(k: PoolKernel) -> list[str]:
    return ["@triton.jit",
            f"def {k.name}(x, out, idx, planes, ID, IH, IW, OD, OH, OW, total, "
            "KMD: tl.constexpr, KMH: tl.constexpr, KMW: tl.constexpr, "
            "WRITE_IDX: tl.constexpr, BLOCK: tl.constexpr):",
            f"    # kernel {k.name}: {k.label}",
            "    o = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "    ok = o < total",
            "    owi = o % OW", "    t = o // OW", "    ohi = t % OH", "    t = t // OH",
            "    odi = t % OD", "    p = t // OD",
            "    plane = x + p * ID * IH * IW"]


def _starts(k: PoolKernel) -> list[str]:
    """Each dim's window start `{c}0` (and for adaptive its end `{c}1`)."""
    out = []
    for i, c in enumerate("dhw"):
        n, o, big = f"I{c.upper()}", f"o{c}i", f"O{c.upper()}"
        if k.op == "adaptive":
            out += [f"    {c}0 = ({o} * {n}) // {big}",
                    f"    {c}1 = (({o} + 1) * {n} + {big} - 1) // {big}"]
        else:
            out.append(f"    {c}0 = {o} * {k.stride[i]} - {k.padding[i]}")
    return out


def _walk(k: PoolKernel) -> list[str]:
    """The unrolled loops over the window; the body sees `d`, `h`, `w` and `inside`."""
    lines, pad = [], "    "
    for i, c in enumerate("dhw"):
        if k.op == "adaptive":
            rng, pos, end = f"KM{c.upper()}", f"{c}0 + k{c}", f"{c}1"
        else:
            rng, end = str(k.kernel[i]), f"I{c.upper()}"
            pos = f"{c}0 + k{c} * {k.dilation[i] if k.op == 'max' else 1}"
        lines += [f"{pad}for k{c} in tl.static_range({rng}):",
                  f"{pad}    {c} = {pos}",
                  f"{pad}    in_{c} = {'' if k.op == 'adaptive' else f'({c} >= 0) & '}"
                  f"({c} < {end})"]
        pad += "    "
    lines.append(f"{pad}inside = ok & in_d & in_h & in_w")
    lines.append(f"{pad}at = (d * IH + h) * IW + w")
    lines.append(f"{pad}v = tl.load(plane + at, mask=inside, other=0.0)")
    return lines, pad


def _count(k: PoolKernel) -> str:
    if k.divisor:
        return f"tl.full([BLOCK], {k.divisor}, tl.int32)"
    parts = []
    for i, c in enumerate("dhw"):
        n, kk, p = f"I{c.upper()}", k.kernel[i], k.padding[i]
        if k.op == "adaptive":
            parts.append(f"({c}1 - {c}0)")
        elif k.count_include_pad:
            parts.append(f"(tl.minimum({c}0 + {kk}, {n} + {p}) - {c}0)")
        else:
            parts.append(f"(tl.minimum({c}0 + {kk}, {n}) - tl.maximum({c}0, 0))")
    return " * ".join(parts)


def write(k: PoolKernel) -> str:
    walk, pad = _walk(k)
    if k.op == "max":
        init = ["    best = tl.full([BLOCK], float('-inf'), tl.float32)",
                "    where = tl.full([BLOCK], -1, tl.int64)"]
        body = [f"{pad}take = inside & ((v > best) | (v != v) | (where < 0))",
                f"{pad}best = tl.where(take, v, best)",
                f"{pad}where = tl.where(take, at, where)"]
        store = ["    tl.store(out + o, best, mask=ok)", "    if WRITE_IDX:",
                 "        tl.store(idx + o, where, mask=ok)"]
    else:
        init = ["    acc = tl.zeros([BLOCK], tl.float32)"]
        body = [f"{pad}acc += tl.where(inside, v, 0.0)"]
        store = [f"    cnt = ({_count(k)}).to(tl.float32)",
                 "    tl.store(out + o, tl.where(cnt > 0, acc / cnt, 0.0), mask=ok)"]
    return "\n".join(_head(k) + _starts(k) + init + walk + body + store)


def launch(k: PoolKernel, g, ref) -> list[str]:
    from kernelevolve.synth.pool_glue import pool_setup, size_args

    lines, x, (out, idx) = pool_setup(k, g, ref)
    n = k.name
    if k.op == "adaptive":
        lines.append(f"{n}_km = [-(-i // o) + 1 for i, o in (({n}_id, {n}_od), ({n}_ih, {n}_oh), "
                     f"({n}_iw, {n}_ow))]")
    else:
        lines.append(f"{n}_km = [1, 1, 1]")
    lines += [f"{n}_total = {out}.numel()", f"if {n}_total:",
              f"    {n}[(triton.cdiv({n}_total, BLOCK_ELEMENTS),)]({x}, {out}, "
              f"{out if idx == 'None' else idx}, {', '.join(size_args(k))}, {n}_total,",
              f"        KMD={n}_km[0], KMH={n}_km[1], KMW={n}_km[2], "
              f"WRITE_IDX={idx != 'None'}, BLOCK=BLOCK_ELEMENTS, num_warps=NUM_WARPS)"]
    return lines
