"""The validated region of a kernel: the calls its evaluation vouches for, checked per call.

Built from the problem's cases (the timed ones and the held-out one, all checked for
correctness by the harness). Per positional argument:

- a tensor: its dtypes, its number of dims, the device type it ran on, contiguity, and per dim
  either one value (every case had it) or, for a dim the cases varied, the range they spanned
  and the greatest common divisor of the values seen. A varied dim admits any value inside that
  range that is a multiple of the divisor: a kernel tried only on multiples of 8 is not trusted
  with a remainder loop it never ran, one tried on an odd size is;
- anything else (an int, a float, a flag): one of the values the cases used.

`admits` answers None (inside) or the reason class of the first miss, which serving counts:
"arguments", "dtype", "device", "layout", "shape" or "value".
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

REASONS = ("arguments", "dtype", "device", "layout", "shape", "value")


@dataclass(frozen=True)
class _Tensor:
    dtypes: frozenset[Any]  # torch.dtype objects (compared by identity, traceable by dynamo)
    ndim: int
    dims: tuple[tuple[int, int, int], ...]  # (lo, hi, multiple); lo == hi for a fixed dim
    contiguous: bool


@dataclass(frozen=True)
class _Value:
    values: tuple[Any, ...]


class Region:
    def __init__(self, data: dict[str, Any]):
        self.data = data
        self.device = str(data.get("device", "cpu"))
        self._args: list[_Tensor | _Value] = []
        for arg in data.get("args", []):
            if arg["kind"] == "tensor":
                self._args.append(_Tensor(_dtypes(arg["dtypes"]), int(arg["ndim"]),
                                          tuple((int(d["min"]), int(d["max"]),
                                                 int(d.get("multiple", 1))) for d in arg["dims"]),
                                          bool(arg.get("contiguous", True))))
            else:
                self._args.append(_Value(tuple(arg["values"])))

    # ---- building ------------------------------------------------------------------------

    @classmethod
    def from_calls(cls, calls: Sequence[Sequence[Any]], device: str,
                   names: Sequence[str] = ()) -> "Region":
        """The region spanned by these calls' arguments (one list per validated case)."""
        if not calls:
            raise ValueError("a region needs at least one validated call")
        arity = {len(c) for c in calls}
        if len(arity) != 1:
            raise ValueError(f"the cases pass different numbers of inputs ({sorted(arity)}); "
                             "a region needs one signature")
        args = [_describe_arg([c[i] for c in calls]) for i in range(arity.pop())]
        varied = [f"input {i}" + (f" dim {d}" if d is not None else "")
                  for i, arg in enumerate(args) for d in _varied(arg)]
        shapes = [[list(v.shape) if hasattr(v, "shape") else None for v in c] for c in calls]
        return cls({"device": device, "args": args, "varied": varied,
                    "cases": list(names), "shapes": shapes})

    # ---- checking ------------------------------------------------------------------------

    def admits(self, args: Sequence[Any]) -> str | None:
        """None when this call is inside the region, else the reason class of the first miss."""
        import torch

        if len(args) != len(self._args):
            return "arguments"
        for spec, value in zip(self._args, args):
            if isinstance(spec, _Value):
                if isinstance(value, torch.Tensor) or value not in spec.values:
                    return "value"
                continue
            if not isinstance(value, torch.Tensor):
                return "arguments"
            if value.dtype not in spec.dtypes:
                return "dtype"
            if value.device.type != self.device:
                return "device"
            if value.dim() != spec.ndim:
                return "shape"
            for size, (lo, hi, multiple) in zip(value.shape, spec.dims):
                if size < lo or size > hi or size % multiple:
                    return "shape"
            if spec.contiguous and not value.is_contiguous():
                return "layout"
        return None

    def to_dict(self) -> dict[str, Any]:
        return self.data

    def lines(self) -> list[str]:
        """One line per argument, for `registry show`."""
        out = []
        for i, arg in enumerate(self.data.get("args", [])):
            if arg["kind"] == "tensor":
                dims = " x ".join(_dim_text(d) for d in arg["dims"]) or "scalar"
                out.append(f"input {i}: {'/'.join(arg['dtypes'])} [{dims}] on "
                           f"{self.device}{', contiguous' if arg.get('contiguous') else ''}")
            else:
                out.append(f"input {i}: one of {arg['values']}")
        return out


def _dtypes(names: list[str]) -> frozenset[Any]:
    import torch

    return frozenset(getattr(torch, n) for n in names if isinstance(getattr(torch, n, None),
                                                                    torch.dtype))


def _describe_arg(values: list[Any]) -> dict[str, Any]:
    import torch

    if all(isinstance(v, torch.Tensor) for v in values):
        ndims = {v.dim() for v in values}
        if len(ndims) != 1:
            raise ValueError(f"an input has {sorted(ndims)} dims across cases; a region needs "
                             "one rank per input")
        dims = []
        for d in range(ndims.pop()):
            seen = sorted({int(v.shape[d]) for v in values})
            multiple = 0
            for s in seen:
                multiple = math.gcd(multiple, s)
            dims.append({"min": seen[0], "max": seen[-1],
                         "multiple": max(1, multiple) if len(seen) > 1 else 1,
                         "seen": seen})
        return {"kind": "tensor", "dtypes": sorted({str(v.dtype)[6:] for v in values}),
                "ndim": len(dims), "dims": dims,
                "contiguous": all(v.is_contiguous() for v in values)}
    if any(isinstance(v, torch.Tensor) for v in values):
        raise ValueError("an input is a tensor in some cases and not in others")
    kept: list[Any] = []
    for v in values:
        if v not in kept:
            kept.append(v)
    return {"kind": "value", "values": kept}


def _varied(arg: dict[str, Any]) -> list[int | None]:
    if arg["kind"] == "tensor":
        return [d for d, dim in enumerate(arg["dims"]) if dim["min"] != dim["max"]]
    return [None] if len(arg["values"]) > 1 else []


def _dim_text(dim: dict[str, Any]) -> str:
    if dim["min"] == dim["max"]:
        return str(dim["min"])
    step = f", multiple of {dim['multiple']}" if dim.get("multiple", 1) > 1 else ""
    return f"{dim['min']}..{dim['max']}{step}"
