"""Safe transport of job results from untrusted workers: JSON plus raw tensor bytes, never pickle.

A worker that runs candidate code is untrusted, so what it sends back must not be able to run
code in the driver (pickle can). A message is: magic, header length, a JSON header in which
tensors are replaced by `{"__tensor__": i}`, then each tensor's bytes. Decoding checks every size
against the file, and builds fresh, contiguous, plain `torch.Tensor`s.
"""
from __future__ import annotations

import json
import struct
from typing import Any

MAGIC = b"KEWIRE1\0"
_MAX_HEADER = 64 << 20

# dtype names we transport; anything else is rejected on both sides
_DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
           "uint8", "bool", "complex64", "complex128")


class WireError(ValueError):
    """A malformed message from a worker (treated as a failed, untrusted result)."""


def encode(obj: Any) -> bytes:
    import torch

    blobs: list[bytes] = []
    metas: list[dict[str, Any]] = []

    def walk(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            t = value.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            t = t.contiguous()
            dtype = str(t.dtype).removeprefix("torch.")
            if dtype not in _DTYPES:
                raise WireError(f"cannot transport tensors of dtype {dtype}")
            flat = t.reshape(-1)
            raw = flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""
            metas.append({"dtype": dtype, "shape": list(t.shape), "nbytes": len(raw)})
            blobs.append(raw)
            return {"__tensor__": len(metas) - 1}
        if isinstance(value, dict):
            return {str(k): walk(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [walk(v) for v in value]
        return value

    body = walk(obj)
    header = json.dumps({"body": body, "tensors": metas}, allow_nan=True).encode()
    return b"".join([MAGIC, struct.pack("<Q", len(header)), header, *blobs])


def decode(data: bytes) -> Any:
    """Decode a worker's message; any malformation at all raises WireError, nothing else."""
    try:
        return _decode(data)
    except WireError:
        raise
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
            RecursionError, MemoryError, RuntimeError) as exc:
        raise WireError(f"result is malformed: {type(exc).__name__}") from None


def _decode(data: bytes) -> Any:
    import torch

    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + 8:
        raise WireError("result is not a kernelevolve wire message")
    (hlen,) = struct.unpack_from("<Q", data, len(MAGIC))
    start = len(MAGIC) + 8
    if hlen > _MAX_HEADER or start + hlen > len(data):
        raise WireError("result header is truncated or too large")
    try:
        header = json.loads(data[start:start + hlen])
        metas = header["tensors"]
        body = header["body"]
    except (ValueError, KeyError, TypeError) as exc:
        raise WireError(f"result header is not valid: {exc}") from None
    if not isinstance(metas, list) or not isinstance(header, dict):
        raise WireError("result header is not valid: tensors must be a list")
    offset = start + hlen
    tensors = []
    for meta in metas:
        try:
            dtype_name, shape, nbytes = meta["dtype"], [int(s) for s in meta["shape"]], int(meta["nbytes"])
        except (KeyError, TypeError, ValueError):
            raise WireError("tensor description is not valid") from None
        if dtype_name not in _DTYPES or any(s < 0 for s in shape):
            raise WireError(f"tensor dtype or shape is not valid: {dtype_name} {shape}")
        dtype = getattr(torch, dtype_name)
        numel = 1
        for s in shape:
            numel *= s
        if nbytes != numel * torch.empty((), dtype=dtype).element_size() or offset + nbytes > len(data):
            raise WireError("tensor bytes do not match its shape or run past the message")
        raw = bytearray(data[offset:offset + nbytes])
        offset += nbytes
        if numel == 0:
            t = torch.empty(shape, dtype=dtype)
        else:
            t = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape).clone()
        tensors.append(t)

    def walk(value: Any) -> Any:
        if isinstance(value, dict):
            if set(value) == {"__tensor__"}:
                idx = value["__tensor__"]
                if not isinstance(idx, int) or not 0 <= idx < len(tensors):
                    raise WireError("tensor reference out of range")
                return tensors[idx]
            return {k: walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v) for v in value]
        return value

    return walk(body)
