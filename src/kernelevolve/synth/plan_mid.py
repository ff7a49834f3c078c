"""Planning a reduction over a middle dim: (outer..., F, inner...) -> (outer..., inner...),
with its pointwise prologue (and embedding lookups) and the epilogue on the reduced values."""
from __future__ import annotations

import math

from kernelevolve.synth.capture import Graph, NotCovered, Ref
from kernelevolve.synth.kernel import (KInput, KNode, KOutput, Kernel, domain_source,
                                       operand_role, role_layout, strip)


def build_mid_kernel(g: Graph, names: list[str], norm, users, kname: str) -> Kernel:
    """A reduction over a middle dim: domain (outer..., F, inner...) -> (outer..., inner...).
    Values are "full" (over the domain), "col" (over the inner dims only), "scalar", or "mid"
    (the reduced value and the pointwise epilogue built on it)."""
    reds = [n for n in names if norm[n][0] == "reduce"]
    rname = reds[0]
    rargs = norm[rname][2]
    domain = tuple(g.values[rargs[0].name].shape)
    dim = norm[rname][3]["dim"] % len(domain)
    for n in reds:
        _, rop, args, attrs = norm[n]
        if rop not in ("sum", "mean", "max", "min"):
            raise NotCovered(f"{g.values[n].op} over a middle dim is not covered yet")
        shape = tuple(g.values[args[0].name].shape)
        if shape != domain or attrs["dim"] % len(shape) != dim:
            raise NotCovered("reductions over different dims or shapes fused in one kernel "
                             f"({domain} dim {dim} vs {shape} dim {attrs['dim']})")
    inner = domain[dim + 1:]
    red_numel = math.prod(domain) // max(1, domain[dim])
    inside = set(names)
    layout: dict[str, str] = {}
    inputs: list[KInput] = []
    nodes: list[KNode] = []
    for n in names:
        v = g.values[n]
        kind, op, args, attrs = norm[n]
        for j, a in enumerate(args):
            if not isinstance(a, Ref) or a.name in inside or a.name in layout:
                continue
            av = g.values[a.name]
            role = operand_role(kind, j)
            if role:
                if role == "boundaries" or dim != len(domain) - 2:
                    raise NotCovered(f"{v.op} inside a middle-dim reduction over dim {dim} of "
                                     f"{domain} is not covered")
                layout[a.name] = "gtable" if j == 0 else "index"
                role_layout(av, role, domain)
                inputs.append(KInput(a.name, layout[a.name], av.dtype))
                continue
            if math.prod(av.shape) == 1:
                lay = "scalar"
            elif tuple(av.shape) == domain:
                lay = "full"
            elif inner and strip(av.shape) == strip(inner) and len(av.shape) <= len(domain):
                lay = "col"
            else:
                raise NotCovered(f"{a.name} of shape {av.shape} does not broadcast over the "
                                 f"middle-dim reduction domain {domain}")
            if av.dtype != "float32":
                raise NotCovered(f"kernel input {a.name} has dtype {av.dtype}; only float32 "
                                 "is covered")
            layout[a.name] = lay
            inputs.append(KInput(a.name, lay, av.dtype))
        lays = {layout[a.name] for a in args if isinstance(a, Ref)}
        if kind == "gather":
            if tuple(v.shape) != domain:
                raise NotCovered(f"embedding lookup of shape {v.shape} is not the reduction "
                                 f"domain {domain}")
            lays = {"full"}
        if n in reds:
            if layout[args[0].name] != "full":
                raise NotCovered(f"{v.op} reduces a value that is not full-size")
            lay = "mid"
        elif "mid" in lays:
            if "full" in lays:
                raise NotCovered(f"{v.op} mixes the reduced value with a full-size one")
            lay = "mid"
            if kind == "view" and math.prod(v.shape) != red_numel:
                raise NotCovered(f"{v.op} reshapes the reduced value to {v.shape}")
        elif "full" in lays:
            lay = "full"
            if strip(v.shape) != strip(domain):
                raise NotCovered(f"{v.op} gives shape {v.shape}, not the domain {domain}")
        elif "col" in lays:
            lay = "col"
        else:
            lay = "scalar"
        layout[n] = lay
        nodes.append(KNode(n, kind, op, args, attrs, lay, v.dtype, 1 if lay == "mid" else 0,
                           v.op))
    outputs = []
    nd = len(domain)
    for n in names:
        if any(u not in inside for u in users[n]):
            v = g.values[n]
            if layout[n] != "mid":
                raise NotCovered(f"kernel output {n} is not the reduced value (a middle-dim "
                                 "reduction kernel writes only reduced values)")
            if v.dtype != "float32":
                raise NotCovered(f"kernel output {n} has dtype {v.dtype}; only float32 is covered")
            keep = tuple(domain[:dim]) + (1,) + tuple(inner)
            drop = tuple(domain[:dim]) + tuple(inner)
            if tuple(v.shape) not in (keep, drop) or len(v.shape) not in (nd, nd - 1):
                raise NotCovered(f"kernel output {n} has shape {v.shape}")
            outputs.append(KOutput(n, "mid", v.shape))
    domain_of, lookup = domain_source(inputs, nodes, kname)
    return Kernel(kname, nodes, inputs, outputs, domain, domain_of, 1, mid_dim=dim,
                  lookup=lookup)
