"""Fusable regions below modules (model/graph.py, codegen.py, outline.py): the outlined model
computes what the model does, each region's generated source rebuilds the region exactly,
equal regions share a kind, and what stays eager is named with the reason."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from conftest import EXAMPLES
from kernelevolve.model.outline import (find_regions, load_region_class, record_regions,
                                        render_problem, state_values)
from kernelevolve.problem import import_module


class Attention(nn.Module):
    def __init__(self, dim, heads, max_seq):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.register_buffer("mask", torch.tril(torch.ones(max_seq, max_seq)))

    def forward(self, x):
        b, t, c = x.size()
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        att = att.masked_fill(self.mask.narrow(0, 0, t).narrow(1, 0, t) == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        return self.out((att @ v).transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, dim=32, heads=4, max_seq=16):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, max_seq)
        self.fc, self.proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        h = self.fc(self.ln_2(x))
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h ** 3)))
        return x + self.drop(self.proj(h))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.ln_f = nn.LayerNorm(32)

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return self.ln_f(x)


class EmbedSum(nn.Module):
    def __init__(self):
        super().__init__()
        self.tables = nn.ModuleList([nn.Embedding(100, 8) for _ in range(3)])

    def forward(self, ids):          # ids (3, B, bag)
        return torch.stack([t(ids[i]).sum(dim=1) for i, t in enumerate(self.tables)], dim=1)


class Bags(nn.Module):
    def __init__(self):
        super().__init__()
        self.bags = nn.ModuleList([nn.EmbeddingBag(50, 8, mode="sum") for _ in range(2)])
        self.head = nn.Linear(16, 1)

    def forward(self, a, b):
        return self.head(torch.cat([self.bags[0](a), self.bags[1](b)], dim=1))


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.act = nn.ReLU(inplace=True)
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        return self.pool(self.act(self.bn(self.conv(x))))


class Branchy(nn.Module):
    """relu(x) feeds a Linear and, directly, the add after it: relu and add can't be one
    region (the Linear would run between two halves of it)."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        a = torch.relu(x)
        return torch.sigmoid(a + self.lin(a))


class Mixed(nn.Module):
    """Module forms of norms and activations, a functional dropout in eval, an op with no
    region rule (cumsum) between two regions."""

    def __init__(self):
        super().__init__()
        self.rms = nn.RMSNorm(16, eps=1e-5)
        self.gn = nn.GroupNorm(2, 4)
        self.gelu, self.soft = nn.GELU(approximate="tanh"), nn.Softmax(dim=-1)

    def forward(self, x):                               # x (B, 4, 16)
        h = F.dropout(self.gelu(self.rms(x)), 0.2, self.training)
        h = torch.cumsum(h, dim=-1)
        return self.soft(self.gn(h) * 2.0)


class ShapeInside(nn.Module):
    """A shape query of a value computed inside the region, read only inside it."""

    def forward(self, x):
        h = torch.exp(x)
        return (h / h.size(-1)).sum(dim=-1)


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x


def _seeded(model):
    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.1 + (1.0 if p.dim() == 1 else 0.0))
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn_like(m.running_mean) * 0.1)
                m.running_var.copy_(torch.rand_like(m.running_var) + 0.5)
    return model.eval()


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(map(_same, a, b))
    return torch.equal(a, b)


def check_outlined(model, inputs):
    """The outlined model equals the model bitwise, and each region's source, built fresh and
    loaded with the model's values, reproduces that region's outputs bitwise."""
    outlined = find_regions(model, inputs)
    assert outlined.regions, outlined.out_of_reach
    with torch.no_grad():
        expected = model(*inputs)
    seen, got = record_regions(outlined, inputs)
    assert _same(got, expected)
    for spec in outlined.regions:
        assert f"{spec.name}" in dict(outlined.module.named_children())
        fresh = load_region_class(spec.source)(*spec.init_args)
        values = state_values(outlined, spec)
        fresh.load_state_dict(values)
        args, out = seen[spec.name]
        assert len(args) == len(spec.input_names)
        with torch.no_grad():
            assert _same(fresh.eval()(*args), out), spec.source
        # the outlined module holds the model's own tensors, not copies
        sub = getattr(outlined.module, spec.name)
        for local, q in spec.state.items():
            assert getattr(sub, local) is values[local]
    return outlined


def test_gpt_like_regions_reproduce_and_share_kinds():
    model = _seeded(GPT())
    x = torch.randn(2, 12, 32)
    outlined = check_outlined(model, [x])
    labels = [r.label for r in outlined.regions]
    assert labels.count("add+layer_norm") == 4 and "layer_norm" in labels
    assert labels.count("mul+eq+masked_fill+softmax") == 2
    gelu = [r for r in outlined.regions if "tanh" in r.label]
    assert len(gelu) == 2 and gelu[0].kind == gelu[1].kind and not gelu[0].state
    attn = [r for r in outlined.regions if "softmax" in r.label]
    assert attn[0].kind == attn[1].kind
    assert "torch.tril(torch.ones((n0, n0)" in attn[0].source   # the mask by its recipe
    assert attn[0].state == {"mask": "blocks.0.attn.mask"}
    # the two-output residual regions (add feeds the next residual, LN the next layer)
    mid = [r for r in outlined.regions if r.label == "add+layer_norm" and
           len(r.output_nodes) == 2]
    assert len(mid) == 3 and len({r.kind for r in mid}) == 1
    lin = next(e for e in outlined.out_of_reach if e["what"] == "linear")
    assert len(lin["nodes"]) == 8 and "GEMM" in lin["why"]
    assert any(e["what"] == "matmul" for e in outlined.out_of_reach)
    # other sizes: the outlined graph re-derives the sequence length inside the region
    y = torch.randn(3, 16, 32)
    with torch.no_grad():
        assert torch.equal(outlined.module(y), model(y))


def test_embedding_sum_regions_share_one_kind():
    model = _seeded(EmbedSum())
    ids = torch.randint(0, 100, (3, 5, 4))
    outlined = check_outlined(model, [ids])
    assert [r.label for r in outlined.regions] == ["embedding+sum"] * 3
    assert len({r.kind for r in outlined.regions}) == 1
    assert outlined.regions[1].state == {"weight": "tables.1.weight"}
    assert outlined.regions[0].init_args == [100, 8]
    assert "x0[" not in outlined.regions[0].source    # ids[i] is the input, not inside
    assert any(e["what"] == "stack" for e in outlined.out_of_reach)


def test_embedding_bag_module_is_a_functional_region():
    model = _seeded(Bags())
    a, b = torch.randint(0, 50, (6, 3)), torch.randint(0, 50, (6, 5))
    outlined = check_outlined(model, [a, b])
    assert [r.label for r in outlined.regions] == ["embedding_bag"] * 2
    assert "F.embedding_bag(x0, self.weight, mode='sum')" in outlined.regions[0].source
    assert outlined.regions[0].kind == outlined.regions[1].kind
    assert {e["what"] for e in outlined.out_of_reach} == {"linear", "cat"}


def test_batchnorm_eval_relu_region_and_pooling_left_out():
    model = _seeded(ConvBN())
    x = torch.randn(2, 3, 8, 8)
    outlined = check_outlined(model, [x])
    (region,) = outlined.regions
    assert region.label == "batch_norm+relu"
    assert set(region.state) == {"running_mean", "running_var", "weight", "bias"}
    assert "inplace=True" not in region.source       # its input is read by nothing else
    why = {e["what"]: e["why"] for e in outlined.out_of_reach}
    assert "convolution" in why["conv2d"] and "pooling" in why["maxpool2d"]
    # in training mode batch norm uses batch statistics: left out, said why
    train = find_regions(_seeded(ConvBN()).train(), [x])
    assert any(e["what"] == "batch_norm" and "training" in e["why"]
               for e in train.out_of_reach)


def test_regions_stay_convex():
    model = _seeded(Branchy())
    x = torch.randn(4, 8)
    outlined = check_outlined(model, [x])
    assert [r.label for r in outlined.regions] == ["relu", "add+sigmoid"]


def test_module_norms_and_activations_and_an_unknown_op():
    model = _seeded(Mixed())
    outlined = check_outlined(model, [torch.randn(3, 4, 16)])
    assert [r.label for r in outlined.regions] == ["rms_norm+gelu", "group_norm+mul+softmax"]
    assert "F.gelu(t0, approximate='tanh')" in outlined.regions[0].source
    (entry,) = outlined.out_of_reach
    assert entry["what"] == "cumsum" and "no region rule" in entry["why"]


def test_shape_query_inside_a_region_is_no_extra_output():
    outlined = check_outlined(ShapeInside(), [torch.randn(3, 5)])
    (region,) = outlined.regions
    assert region.output_nodes == ["sum_1"] and ".size(-1)" in region.source


def test_untraceable_model_is_named_with_a_reason():
    outlined = find_regions(DataDependent(), [torch.randn(3)])
    assert outlined.regions == []
    (entry,) = outlined.out_of_reach
    assert entry["what"] == "model DataDependent"
    assert "torch.fx cannot trace" in entry["why"] and "\n" not in entry["why"]
    bad_inputs = find_regions(_seeded(Branchy()), [torch.randn(4, 5)])
    assert bad_inputs.regions == [] and "failed on the example inputs" in \
        bad_inputs.out_of_reach[0]["why"]


def test_random_state_recipe_and_kind_ignore_values():
    m1, m2 = nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4)), nn.Sequential(
        nn.Linear(4, 4), nn.LayerNorm(4))
    with torch.no_grad():
        m1[1].weight.copy_(torch.tensor([0.5, -1.0, 2.0, 0.25]))
        m2[1].weight.copy_(torch.tensor([0.4, -1.1, 2.2, 0.2]))
    x = torch.randn(2, 4)
    r1, r2 = (find_regions(m.eval(), [x]).regions[0] for m in (m1, m2))
    assert r1.kind == r2.kind and r1.source != r2.source
    assert "torch.randn((n0,))" in r1.source and "# 1.weight: random" in r1.source


@pytest.fixture(scope="module")
def recsys():       # building the model (16 tables of 20000 x 64) takes ~5 s here
    mod = import_module(EXAMPLES / "recsys" / "model.py", "recsys_model_regions_test",
                        wrap_errors=False)
    model, inputs = mod.make_model(), mod.make_inputs(64)
    return mod, model, inputs, check_outlined(model, inputs)


@pytest.mark.slow
def test_recsys_regions_read_like_the_hand_written_problems(recsys):
    mod, model, inputs, outlined = recsys
    by_label: dict = {}
    for r in outlined.regions:
        by_label.setdefault(r.label, []).append(r)
    norm = by_label["pow+mean+add+rsqrt+mul+silu"]
    assert [list(r.state.values()) for r in norm] == [["bottom.norm.weight"], ["top.norm.weight"]]
    assert norm[0].kind == norm[1].kind and norm[0].init_args == [512]
    bags = by_label["embedding+sum"]
    assert len(bags) == 16 and len({r.kind for r in bags}) == 1
    (fm,) = by_label["sum+pow+mul+sub"]
    assert fm.state == {} and len(outlined.regions) == 19
    # bitwise equal to the hand-written problems' modules on the same values
    torch.manual_seed(1)
    cases = [(norm[0], mod.norm_act.Model(512, 1e-6), torch.randn(64, 512) * 2 + 0.5),
             (bags[0], mod.embedding_bag.Model(20000, 64), torch.randint(0, 20000, (64, 20))),
             (fm, mod.fm_interaction.Model(), torch.randn(64, 17, 64) * 0.1)]
    for spec, hand, x in cases:
        region = load_region_class(spec.source)(*spec.init_args)
        region.load_state_dict(dict(zip(region.state_dict(), hand.state_dict().values())))
        with torch.no_grad():
            assert torch.equal(region(x), hand(x)), spec.label


@pytest.mark.parametrize("name", ["gpt_block", "dlrm", "conv_block"])
def test_example_models_outline_exactly(name):
    path = EXAMPLES / "models" / f"{name}.py"
    if not path.exists():
        pytest.skip(f"{path} not written yet")
    mod = import_module(path, f"model_regions_{name}", wrap_errors=False)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).eval()
    outlined = check_outlined(model, mod.get_inputs())
    assert any(e["what"] in ("linear", "conv2d") for e in outlined.out_of_reach)


@pytest.mark.slow
def test_region_sources_feed_the_synthesizer(recsys, tmp_path):
    from kernelevolve.synth import synthesize

    _, model, inputs, outlined = recsys
    seen, _ = record_regions(outlined, inputs)
    done = set()
    for spec in outlined.regions:
        if spec.kind in done:
            continue
        done.add(spec.kind)
        specs = []
        for i, a in enumerate(seen[spec.name][0]):
            dims = ["BATCH" if d == 64 and j == 0 else int(d) for j, d in enumerate(a.shape)]
            if spec.label == "embedding+sum" or not a.dtype.is_floating_point:
                specs.append({"shape": dims, "dtype": "int64", "low": 0, "high": 20000})
            else:
                specs.append({"shape": dims, "dtype": "float32", "mean": 0.0, "std": 1.0})
        cases = [{"name": "b64", "weight": 2.0, "BATCH": 64},
                 {"name": "b33", "weight": 1.0, "BATCH": 33}]
        path = tmp_path / f"{spec.name}.py"
        path.write_text(render_problem(spec, cases, specs))
        source, _ = synthesize(str(path), "cpp")
        assert "class ModelNew" in source, spec.label
