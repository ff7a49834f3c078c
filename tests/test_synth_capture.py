"""The synthesizer's capture: fake-tensor tracing gives the graph the full-size trace gave, costs
no full-size forward, and refuses (never crashes on) forwards that need their data."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PROBLEMS, ROOT, example
from kernelevolve.problem import import_module, load_problem
from kernelevolve.synth.capture import NotCovered, capture, trace_case
from kernelevolve.synth.trace import build_case

BENCH = ROOT / "benchmarks" / "synth_problems"

# A representative subset: in-place edge rows and a registered buffer (int_ops, nan_edges),
# randint / int64 / bool inputs (int_ops, embedding_bag), CASES (chan_bias, mid_amax,
# embedding_ln), nn.Linear / nn.Conv2d / nn.LayerNorm / nn.Embedding initialisers.
SAME_GRAPH = {
    "layernorm": PROBLEMS / "synth_layernorm.py",
    "int_ops": PROBLEMS / "synth_int_ops.py",
    "nan_edges": PROBLEMS / "synth_nan_edges.py",
    "embedding_bag": PROBLEMS / "synth_embedding_bag.py",
    "embedding_ln": PROBLEMS / "synth_embedding_ln.py",
    "chan_bias": PROBLEMS / "synth_chan_bias.py",
    "mid_amax": PROBLEMS / "synth_mid_amax.py",
    "cumsum": PROBLEMS / "synth_cumsum.py",
    "linear_gelu_scale": BENCH / "linear_gelu_scale.py",
    "layernorm_gelu": BENCH / "layernorm_gelu.py",
    "softmax": example("softmax"),
}

INITS = '''import torch
import torch.nn as nn

B, D = 8, 32


class Model(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.lin = nn.Linear(d, d)
        self.w = nn.Parameter(torch.empty(d, d))
        nn.init.xavier_uniform_(self.w)
        self.q = nn.Parameter(torch.empty(d, d))
        nn.init.orthogonal_(self.q)
        self.t = nn.Parameter(torch.empty(d))
        nn.init.normal_(self.t, std=0.02)
        self.register_buffer("mask", torch.tril(torch.ones(d, d)).bool())
{extra_init}

    def forward(self, x, ids, keep):
        h = self.lin(x) @ self.w @ self.q + self.t
        return torch.where(self.mask[ids % {d}].any(-1), h, h * keep){extra_forward}


def get_inputs():
    x = torch.randn(B, D)
    x[0] = float("nan")
    ids = torch.randint(0, 100, (B, D))
    keep = torch.bernoulli(torch.full((B, D), 0.5)).bool()
{extra_inputs}
    return [x, ids, keep]


def get_init_inputs():
    return [D]
'''


def _graphs(path: Path, real: bool):
    problem = load_problem(path)
    module = import_module(problem.path, prefix="ke_test_capture")
    return [trace_case(module, case, real=real) for case in problem.cases]


@pytest.mark.parametrize("name", sorted(SAME_GRAPH))
def test_fake_trace_gives_the_full_size_trace_graph(name):
    path = SAME_GRAPH[name]
    fake, real = _graphs(path, real=False), _graphs(path, real=True)
    assert fake == real  # ops, shapes, dtypes, scalar arguments, parameters, outputs
    problem = load_problem(path)
    module = import_module(problem.path, prefix="ke_test_capture")
    assert build_case(module, problem.cases[0]).real == ()  # nothing was built for real


@pytest.mark.parametrize("variant", ["fake", "model_needs_values", "inputs_need_values"])
def test_initialisers_buffers_and_value_needing_builds(write, variant):
    """Initialisers, buffers, int/bool inputs and in-place edge rows trace fake; an __init__
    that reads a value (trunc_normal_, .item()) or get_inputs that go through numpy are built
    for real (the harness builds them anyway) and the forward is still traced fake."""
    extra = {"extra_init": "", "extra_forward": "", "extra_inputs": "", "d": 32}
    if variant == "model_needs_values":
        # trunc_normal_ reads a value in torch 2.13; so does an int drawn with .item()
        extra.update(extra_init="        nn.init.trunc_normal_(self.t, std=0.02)\n"
                                "        self.n = int(torch.randint(1, 5, ()).item())",
                     extra_forward=" * self.n")
    if variant == "inputs_need_values":
        extra["extra_inputs"] = ("    import numpy as np\n"
                                 "    x = torch.from_numpy(np.sort(x.numpy(), axis=1))")
    path = write(f"inits_{variant}.py", INITS.format(**extra))
    assert _graphs(path, real=False) == _graphs(path, real=True)
    problem = load_problem(path)
    module = import_module(problem.path, prefix="ke_test_capture")
    expect = {"fake": (), "model_needs_values": ("model",),
              "inputs_need_values": ("inputs",)}[variant]
    assert build_case(module, problem.cases[0]).real == expect


DATA_DEPENDENT = {
    "item": ("return x / x.abs().max().item()", "reads a tensor's value"),
    "branch": ("return x * 2 if x.sum() > 0 else -x", "reads a tensor's value"),
    "mask": ("return torch.relu(x[x > 0]) * 2.0", "shape depends on the data"),
}


@pytest.mark.parametrize("name", sorted(DATA_DEPENDENT))
def test_a_forward_that_needs_its_data_is_not_covered(write, name):
    body, reason = DATA_DEPENDENT[name]
    path = write(f"dd_{name}.py", "import torch\nimport torch.nn as nn\n\n\n"
                 "class Model(nn.Module):\n    def forward(self, x):\n        " + body + "\n\n\n"
                 "def get_inputs():\n    return [torch.randn(16, 16)]\n\n\n"
                 "def get_init_inputs():\n    return []\n")
    with pytest.raises(NotCovered, match=reason):
        capture(str(path))


_PEAK = """
import json, resource, sys
from kernelevolve.synth.capture import capture
cap = capture(sys.argv[1])
print(json.dumps({"ops": [v.op for v in cap.graph.values.values()],
                  "shape": list(cap.graph.values[cap.graph.outputs[0]].shape),
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def test_a_4gib_intermediate_is_traced_without_allocating_it():
    """(32768, 1) * (1, 32768) float32 is a 4 GiB product; the full-size trace peaked at
    8.5 GiB of RSS. The fake trace's peak is the interpreter, torch and the graph."""
    proc = subprocess.run([sys.executable, "-c", _PEAK,
                           str(PROBLEMS / "synth_big_intermediate.py")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ops"] == ["input", "input", "mul", "sub", "relu", "sum"]
    assert out["shape"] == [32768]
    assert out["peak_mib"] < 1536, out  # the product alone is 4096 MiB
