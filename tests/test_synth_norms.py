"""Grouped and multi-dim normalisation drafts (synth/decomp_norms.py, decomp_blocks.py):
batch norm with batch statistics (BatchNorm1d on (N, C) and (N, C, L), 2d, 3d, one spatial
position per channel, a batch of one, eval without running statistics) and with running
statistics, group norm (a group of one channel, one group for all), instance norm 1d/2d/3d
with and without affine, layer norm over two and three trailing dims, reductions over dims in
several blocks; affine off and on, odd sizes, a constant input (the variance is 0: eps alone
sets the scale). Each family is one problem whose forward returns every variant, so each
language compiles it once; the drafts run in-process against the reference at 1e-5. One value
per channel in a training batch norm (one spatial element in an instance norm) is refused as
torch refuses it; a C++ draft is accepted by the real harness, an affine instance norm's batch
varying between its cases."""
from __future__ import annotations

import pytest
import torch

from conftest import PROBLEMS
from short_timing import evaluate_short
from kernelevolve.problem import import_module
from kernelevolve.synth import synthesize
from kernelevolve.synth.capture import NotCovered, capture
from kernelevolve.synth.plan import explain, plan

HEAD = "import torch\nimport torch.nn as nn\n\n"
# (modules built in __init__, the forward's inputs as (name, expression))
FAMILIES = {
    "batch_train": (
        ["nn.BatchNorm1d(5)", "nn.BatchNorm1d(5, eps=0.5)", "nn.BatchNorm2d(3)",
         "nn.BatchNorm3d(2, affine=False)", "nn.BatchNorm2d(3)", "nn.BatchNorm2d(3)"],
        ["torch.randn(3, 5) * 2 + 1", "torch.full((4, 5, 7), 3.25)", "torch.randn(2, 3, 5, 3) - 2",
         "torch.randn(3, 2, 3, 1, 5)", "torch.randn(2, 3, 1, 1)", "torch.randn(1, 3, 2, 3)"]),
    "batch_eval": (
        ["nn.BatchNorm1d(5).eval()", "nn.BatchNorm2d(3).eval()",
         "nn.BatchNorm3d(2, affine=False).eval()",
         "nn.BatchNorm2d(3, track_running_stats=False).eval()"],
        ["torch.randn(3, 5, 7)", "torch.randn(2, 3, 5, 3)", "torch.randn(1, 2, 3, 1, 5)",
         "torch.randn(2, 3, 3, 5)"]),
    "group_instance": (
        ["nn.GroupNorm(3, 6)", "nn.GroupNorm(6, 6, eps=0.25)", "nn.GroupNorm(1, 4, affine=False)",
         "nn.InstanceNorm1d(3)", "nn.InstanceNorm2d(3, affine=True)", "nn.InstanceNorm3d(2)"],
        ["torch.randn(2, 6, 5, 3)", "torch.full((3, 6, 7), -1.5)", "torch.randn(2, 4, 3, 1, 3)",
         "torch.randn(2, 3, 7)", "torch.randn(2, 3, 5, 3) * 3", "torch.randn(1, 2, 3, 1, 5)"]),
    "layer_multi": (
        ["nn.LayerNorm((5, 3))", "nn.LayerNorm((4, 5, 3), elementwise_affine=False)",
         "nn.LayerNorm((7, 3), eps=0.1)"],
        ["torch.randn(2, 4, 5, 3)", "torch.randn(3, 4, 5, 3) + 4", "torch.full((2, 7, 3), 0.5)"]),
}
# reductions over dims that are not one block (decomp_blocks.py): (module-free) expressions
SPLIT = ["x0.sum(dim=(0, 2))", "x1.mean(dim=(0, 2, 3), keepdim=True)", "torch.amax(x2, dim=(1, 3))",
         "x3.amin(dim=(0, 2))", "x0.sum(dim=(0, 2), keepdim=True) * 0.5 + 1.0"]
SPLIT_INPUTS = ["torch.randn(3, 4, 5)", "torch.randn(2, 3, 5, 3) - 1", "torch.randn(2, 3, 1, 7)",
                "torch.randn(4, 1, 3)"]


def problem_text(family: str) -> str:
    if family == "split_dims":
        return _split_text()
    mods, inputs = FAMILIES[family]
    args = [f"x{i}" for i in range(len(inputs))]
    lines = [HEAD, "class Model(nn.Module):", "    def __init__(self):", "        super().__init__()",
             f"        self.norms = nn.ModuleList([{', '.join(mods)}])",
             "        with torch.no_grad():  # affine and running statistics off their defaults",
             "            for m in self.norms:",
             "                for t in (m.weight, m.bias, getattr(m, 'running_mean', None)):",
             "                    if t is not None:",
             "                        t.add_(0.5 * torch.randn(t.shape))",
             "                if getattr(m, 'running_var', None) is not None:",
             "                    m.running_var.mul_(torch.rand(m.running_var.shape) + 0.5)",
             "",
             f"    def forward(self, {', '.join(args)}):",
             f"        return tuple(m(x) for m, x in zip(self.norms, ({', '.join(args)},)))",
             "", "", "def get_inputs():", f"    return [{', '.join(inputs)}]", "", "",
             "def get_init_inputs():", "    return []", ""]
    return "\n".join(lines)


def _split_text() -> str:
    args = ", ".join(f"x{i}" for i in range(len(SPLIT_INPUTS)))
    return (HEAD + "class Model(nn.Module):\n"
            f"    def forward(self, {args}):\n        return ({', '.join(SPLIT)},)\n\n\n"
            f"def get_inputs():\n    return [{', '.join(SPLIT_INPUTS)}]\n\n\n"
            "def get_init_inputs():\n    return []\n")


@pytest.mark.parametrize("family", sorted(FAMILIES) + ["split_dims"])
@pytest.mark.parametrize("language", ["cpp", "triton"])
def test_norm_drafts_match_torch(tmp_path, monkeypatch, family, language):
    monkeypatch.setenv("KERNELEVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    problem = tmp_path / f"norms_{family}.py"
    problem.write_text(problem_text(family))
    source, p = synthesize(str(problem), language)
    # torch keeps views only
    assert not [n for n in p.kept if p.graph.values[n].op != "view"], explain(p)
    candidate = tmp_path / f"norms_{family}_{language}.py"
    candidate.write_text(source)
    ref = import_module(problem, f"norms_{family}", wrap_errors=False)
    cand = import_module(candidate, f"norms_{family}_{language}", wrap_errors=False)
    inputs = ref.get_inputs()
    with torch.no_grad():
        torch.manual_seed(1)
        want = ref.Model()(*inputs)
        torch.manual_seed(1)
        got = cand.ModelNew()(*inputs)
    assert len(want) == len(got)
    for i, (w, g) in enumerate(zip(want, got)):
        assert g.shape == w.shape and g.dtype == w.dtype, i
        err = (g - w).abs().max().item()
        assert torch.allclose(g, w, rtol=1e-5, atol=1e-5), f"output {i}: {err}"


@pytest.mark.parametrize("kind,shape", [
    ("Batch", "1, 3"), ("Batch", "1, 3, 1"), ("Batch", "1, 3, 1, 1"), ("Batch", "1, 2, 1, 1, 1"),
    ("Instance", "2, 3, 1"), ("Instance", "2, 3, 1, 1")])
def test_one_value_per_channel_in_training_is_refused_as_torch_refuses_it(tmp_path, kind, shape):
    problem = tmp_path / "bn_one.py"
    dims = shape.count(",") - 1
    module = f"nn.{kind}Norm{max(dims, 1)}d({shape.split(', ')[1]})"
    problem.write_text(HEAD + f"""class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = {module}

    def forward(self, x):
        return self.bn(x)


def get_inputs():
    return [torch.randn({shape})]


def get_init_inputs():
    return []
""")
    ref = import_module(problem, "bn_one", wrap_errors=False)
    message = "Expected more than 1 (value per channel|spatial element)"
    with pytest.raises(ValueError, match=message):
        ref.Model()(*ref.get_inputs())
    with pytest.raises(NotCovered, match=message):
        plan(capture(str(problem)))


def test_explain_names_the_kernels(tmp_path):
    problem = tmp_path / "norms_batch_train.py"
    problem.write_text(problem_text("batch_train"))
    text = explain(plan(capture(str(problem))))
    assert "mid reduction kernel over dim 0" in text and "row kernel" in text, text
    assert "[chan]" in text, text        # the batch statistics read per channel


def test_a_multi_dim_layer_norm_is_one_row_kernel(tmp_path):
    problem = tmp_path / "ln.py"
    problem.write_text(problem_text("layer_multi"))
    p = plan(capture(str(problem)))
    assert len(p.kernels) == 3 and all(k.levels == 2 for k in p.kernels), explain(p)


@pytest.mark.slow      # a full evaluation (compile, both cases, timing): ~5 s on an idle machine
def test_a_training_norm_draft_is_accepted_by_the_harness(evaluator, tmp_path):
    problem = PROBLEMS / "synth_norms_train.py"
    source, _ = synthesize(str(problem), "cpp")
    path = tmp_path / "norms_train_cpp.py"
    path.write_text(source)
    result = evaluate_short(evaluator, problem, path)  # the verdict, not the figure
    assert result.accepted, result.reason
