"""The worker -> driver transport (harness/protocol/codec.py): exact round trips, and every malformed
message rejected as a WireError without running anything (never pickle)."""
from __future__ import annotations

import json
import math
import os
import pickle
import struct

import pytest
import torch

from conftest import example
from kernelevolve.harness.protocol import codec as wire
from kernelevolve.harness.protocol.codec import MAGIC, WireError, decode, encode


def message(header: dict | bytes, payload: bytes = b"") -> bytes:
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    return MAGIC + struct.pack("<Q", len(raw)) + raw + payload


def assert_same_tensor(a, b):
    assert type(b) is torch.Tensor
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    assert torch.equal(a, b)


def test_round_trip_nested_structure():
    tensors = {
        "fp32": torch.randn(3, 4),
        "bf16": torch.randn(5).to(torch.bfloat16),
        "fp16": torch.randn(2, 2).half(),
        "f64": torch.randn(3, dtype=torch.float64),
        "bool": torch.tensor([[True, False], [False, True]]),
        "i64": torch.tensor([-(2 ** 62), 0, 2 ** 62 + 7]),
        "u8": torch.tensor([0, 255], dtype=torch.uint8),
        "c64": torch.randn(3, dtype=torch.complex64),
        "empty": torch.empty(0, 7),
        "scalar": torch.tensor(3.25),
        "special": torch.tensor([float("nan"), float("inf"), -float("inf"), -0.0]),
    }
    obj = {"ok": True, "cases": {"a": {"outputs": [[tensors["fp32"], tensors["bf16"]],
                                                   (tensors["bool"], tensors["i64"])],
                                       "digests": ["abc", "def"]}},
           "all": tensors, "n": None, "f": 1.5, "i": -3, "s": "text \u00e9\n", "nan": float("nan")}
    back = decode(encode(obj))
    assert back["ok"] is True and back["n"] is None and back["f"] == 1.5 and back["i"] == -3
    assert back["s"] == "text \u00e9\n"
    assert math.isnan(back["nan"])
    assert back["cases"]["a"]["digests"] == ["abc", "def"]
    outs = back["cases"]["a"]["outputs"]
    assert isinstance(outs[1], list)  # tuples travel as lists
    assert_same_tensor(tensors["fp32"], outs[0][0])
    assert_same_tensor(tensors["bf16"], outs[0][1])
    assert_same_tensor(tensors["bool"], outs[1][0])
    assert_same_tensor(tensors["i64"], outs[1][1])
    for name, t in tensors.items():
        got = back["all"][name]
        assert got.dtype == t.dtype and got.shape == t.shape, name
        # Bitwise equality, so NaN and -0.0 survive exactly.
        assert got.reshape(-1).view(torch.uint8).tolist() == \
            t.reshape(-1).contiguous().view(torch.uint8).tolist(), name
    assert back["all"]["scalar"].dim() == 0 and back["all"]["scalar"].item() == 3.25
    assert back["all"]["empty"].shape == (0, 7)


def test_non_contiguous_and_strided_tensors():
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    for view in (base.t(), base[:, ::2], base[1:3, 2:5], base.expand(2, 4, 6)):
        got = decode(encode([view]))[0]
        assert torch.equal(got, view)
        assert got.is_contiguous()


def test_decoded_tensors_are_fresh_and_writable():
    data = encode({"t": torch.ones(4)})
    t = decode(data)["t"]
    t += 1  # a read-only buffer view would fail or warn here
    assert torch.equal(t, torch.full((4,), 2.0))
    assert torch.equal(decode(data)["t"], torch.ones(4))  # the message is unchanged


def test_dict_with_only_tensor_key_is_reserved_but_other_dicts_pass():
    back = decode(encode({"__tensor__x": 1, "d": {"k": [1, {"j": 2}]}}))
    assert back == {"__tensor__x": 1, "d": {"k": [1, {"j": 2}]}}


def test_encode_refuses_unsupported_dtype():
    with pytest.raises(WireError, match="cannot transport tensors of dtype"):
        encode([torch.zeros(2, dtype=torch.uint16)])


# --------------------------------------------------------------------------- rejection

def good_header(**meta):
    return {"body": {"__tensor__": 0},
            "tensors": [{"dtype": "float32", "shape": [2], "nbytes": 8, **meta}]}


@pytest.mark.parametrize("data, match", [
    (b"", "not a kernelevolve wire message"),
    (b"NOTWIRE!" + b"\0" * 16, "not a kernelevolve wire message"),
    (b"KEWIRE2\0" + struct.pack("<Q", 2) + b"{}", "not a kernelevolve wire message"),
    (MAGIC + b"\1\0", "not a kernelevolve wire message"),
    (MAGIC + struct.pack("<Q", 100) + b'{"body": 1}', "truncated or too large"),
    (MAGIC + struct.pack("<Q", 2 ** 63) + b"{}", "truncated or too large"),
    (message(b'{"body": 1, "tensors": ['), "header is not valid"),
    (message(b'\xff\xfe not json'), "header is not valid"),
    (message({"tensors": []}), "header is not valid"),
    (message({"body": 1}), "header is not valid"),
    (message(b"[1, 2]"), "header is not valid"),
    (message(good_header(), b"\0" * 4), "run past the message"),
    (message(good_header(nbytes=4), b"\0" * 8), "do not match its shape"),
    (message(good_header(nbytes=10 ** 12), b"\0" * 8), "run past the message"),
    (message(good_header(dtype="object"), b"\0" * 8), "dtype or shape is not valid"),
    (message(good_header(dtype="float8_e4m3fn"), b"\0" * 8), "dtype or shape is not valid"),
    (message(good_header(shape=[-1], nbytes=-4)), "dtype or shape is not valid"),
    (message(good_header(shape=[-2, -1]), b"\0" * 8), "dtype or shape is not valid"),
    (message(good_header(shape=["a"])), "tensor description is not valid"),
    (message({"body": 1, "tensors": [{"dtype": "float32"}]}), "tensor description is not valid"),
    (message({"body": 1, "tensors": ["float32"]}), "tensor description is not valid"),
    (message({"body": {"__tensor__": 1}, "tensors": []}), "tensor reference out of range"),
    (message({"body": [{"__tensor__": -1}], "tensors": []}), "tensor reference out of range"),
    (message({"body": {"a": {"__tensor__": "0"}}, "tensors": []}), "out of range"),
    (message({"body": {"__tensor__": 1.0}, "tensors": []}), "out of range"),
], ids=lambda v: None if isinstance(v, bytes) else v)
def test_decode_rejects(data, match):
    with pytest.raises(WireError, match=match):
        decode(data)


def test_truncated_good_message_is_rejected_at_every_length():
    data = encode({"x": torch.arange(6, dtype=torch.int32), "y": [torch.ones(2, 2)]})
    assert decode(data)["x"].tolist() == list(range(6))
    for cut in range(len(data) - 1, 0, -7):
        with pytest.raises(WireError):
            decode(data[:cut])


@pytest.mark.parametrize("header", [
    b'{"body": 1, "tensors": 5}',
    b'{"body": 1, "tensors": null}',
    b"[" * 100_000 + b"]" * 100_000,
], ids=["tensors-int", "tensors-null", "deep-nesting"])
def test_decode_rejects_malformed_headers_as_wire_errors(header):
    with pytest.raises(WireError):
        decode(message(header))


# --------------------------------------------------------------------------- never pickle

class _Trap:
    """Unpickling this creates a directory: proof that code ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.mkdir, (self.path,))


def test_pickle_payload_is_rejected_without_running(tmp_path):
    marker = str(tmp_path / "unpickled")
    payload = pickle.dumps({"ok": True, "cases": _Trap(marker)})
    with pytest.raises(WireError, match="not a kernelevolve wire message"):
        decode(payload)
    # Dressed up with the magic and a correct length, it is still only an invalid header.
    with pytest.raises(WireError, match="header is not valid"):
        decode(message(payload))
    # And as tensor bytes it is just bytes.
    blob = decode(message({"body": {"__tensor__": 0}, "tensors": [
        {"dtype": "uint8", "shape": [len(payload)], "nbytes": len(payload)}]}, payload))
    assert bytes(blob.numpy()) == payload
    assert not os.path.exists(marker)


def test_decode_never_calls_an_unpickler(monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("decode must not unpickle")

    data = encode({"ok": True, "t": [torch.randn(3), torch.tensor([1, 2])]})
    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    back = decode(data)
    assert back["ok"] is True and back["t"][1].tolist() == [1, 2]
    assert "pickle" not in vars(wire)


EVIL_CANDIDATE = '''
import struct

import torch.nn as nn

from kernelevolve.harness.protocol import codec as wire


def _forged(obj):
    header = b'{"body": {"ok": true}, "tensors": 5}'
    return wire.MAGIC + struct.pack("<Q", len(header)) + header


wire.encode = _forged  # the worker child writes its result with this


class ModelNew(nn.Module):
    def forward(self, x):
        return x.softmax(-1)
'''


def test_forged_result_from_a_candidate_is_a_rejection(evaluator, write):
    from dataclasses import replace

    candidate = write("forged_wire.py", EVIL_CANDIDATE)
    # Static rules off: the static gate turns this import away; the runtime must hold alone.
    options = replace(evaluator.options, static_rules=False)
    result = evaluator.evaluate(example("softmax"), candidate, options=options)
    assert not result.accepted and result.fitness == 0.0
