"""Timed input sets in shared memory: the reference process writes them, the candidate's reads.

One sealed memfd per case holds K input sets laid out back to back. The reference process
(harness/worker/measure.py) maps it read-write and fills each set with fresh content (the problem's
`get_inputs()` under a seed drawn from the kernel's random source) right before the batch that
uses it; the candidate's process maps it read-only (F_SEAL_FUTURE_WRITE: no writable mapping can
be made after the seal, so its tensors cannot be written, nor the mapping upgraded). So the
candidate sees each set's content only once the batch that uses it has been sent, and writing
into an input is a fault, not a quiet cache trick.

Non-tensor inputs (Python numbers) travel in the batch command instead.
"""
from __future__ import annotations

import mmap
import os
from dataclasses import dataclass
from typing import Any

_F_ADD_SEALS = 1033
_SEALS = 0x0002 | 0x0004 | 0x0010   # F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # the timed process maps its page tables when the
                                              # sets arrive, not in its first timed calls
_ALIGN = 64
_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
           "uint8", "bool", "complex64", "complex128")


class InputLayoutError(ValueError):
    """get_inputs() returned something that cannot be laid out (or changed layout)."""


@dataclass
class Slot:
    index: int          # position in the get_inputs() list
    dtype: str
    shape: tuple[int, ...]
    nbytes: int
    offset: int         # within one set


def layout(template: list[Any]) -> tuple[list[Slot], int]:
    """Slots for the tensor inputs of one set, and the set's size in bytes (aligned)."""
    import torch

    slots, offset = [], 0
    for i, value in enumerate(template):
        if not isinstance(value, torch.Tensor):
            continue
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in _DTYPES or value.device.type != "cpu":
            raise InputLayoutError(f"input {i} is a {value.device.type} {dtype} tensor")
        nbytes = value.numel() * value.element_size()
        slots.append(Slot(i, dtype, tuple(value.shape), nbytes, offset))
        offset += (nbytes + _ALIGN - 1) // _ALIGN * _ALIGN
    return slots, max(offset, _ALIGN)


class SharedSets:
    """The writer's side (the reference process)."""

    def __init__(self, template: list[Any], count: int):
        self.template = template
        self.slots, self.set_bytes = layout(template)
        self.count = count
        size = self.set_bytes * count
        self.fd = os.memfd_create("kernelevolve-inputs", os.MFD_ALLOW_SEALING)
        os.ftruncate(self.fd, size)
        self.map = mmap.mmap(self.fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        import fcntl

        fcntl.fcntl(self.fd, _F_ADD_SEALS, _SEALS)
        self.sets = [_views(self.map, self.slots, template, k * self.set_bytes)
                     for k in range(count)]

    def fill(self, k: int, values: list[Any]) -> list[Any]:
        """Copy a fresh get_inputs() result into set k; returns the set (views + numbers)."""
        import torch

        target = self.sets[k]
        if len(values) != len(target):
            raise InputLayoutError("get_inputs() returned a different number of inputs")
        with torch.no_grad():
            for i, value in enumerate(values):
                if isinstance(target[i], torch.Tensor):
                    if not isinstance(value, torch.Tensor) or tuple(value.shape) != \
                            tuple(target[i].shape) or value.dtype != target[i].dtype:
                        raise InputLayoutError(f"input {i} changed shape or dtype between seeds")
                    target[i].copy_(value)
                else:
                    target[i] = value
        return target

    def spec(self) -> dict[str, Any]:
        return {"count": self.count, "set_bytes": self.set_bytes,
                "slots": [[s.index, s.dtype, list(s.shape), s.nbytes, s.offset]
                          for s in self.slots],
                "length": len(self.template)}

    def numbers(self, k: int) -> dict[str, Any]:
        """The non-tensor inputs of set k, for the batch command."""
        import torch

        return {str(i): v for i, v in enumerate(self.sets[k]) if not isinstance(v, torch.Tensor)}

    def close(self) -> None:
        self.sets = []
        try:
            self.map.close()
        except BufferError:  # views still alive; the mapping goes with the process
            pass
        os.close(self.fd)


def _views(buf: Any, slots: list[Slot], template: list[Any], base: int) -> list[Any]:
    import torch

    out: list[Any] = list(template)
    for s in slots:
        dtype = getattr(torch, s.dtype)
        count = s.nbytes // torch.empty((), dtype=dtype).element_size()
        flat = torch.frombuffer(buf, dtype=dtype, count=count, offset=base + s.offset) \
            if count else torch.empty(0, dtype=dtype)
        out[s.index] = flat.view(s.shape)
    return out


class ReadOnlySets:
    """The reader's side (the candidate's process): the same sets, mapped read-only."""

    def __init__(self, fd: int, spec: dict[str, Any]):
        import warnings

        self.count, self.set_bytes = int(spec["count"]), int(spec["set_bytes"])
        self.map = mmap.mmap(fd, self.count * self.set_bytes, mmap.MAP_SHARED | _POPULATE,
                             mmap.PROT_READ)
        os.close(fd)
        slots = [Slot(int(i), str(d), tuple(int(x) for x in shape), int(n), int(o))
                 for i, d, shape, n, o in spec["slots"]]
        template: list[Any] = [None] * int(spec["length"])
        with warnings.catch_warnings():  # "the given buffer is not writable": that is the point
            warnings.simplefilter("ignore")
            self.sets = [_views(self.map, slots, template, k * self.set_bytes)
                         for k in range(self.count)]

    def get(self, k: int, numbers: dict[str, Any]) -> list[Any]:
        values = list(self.sets[k])
        for key, value in numbers.items():
            values[int(key)] = value
        return values
