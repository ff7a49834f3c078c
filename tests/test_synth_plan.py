"""The synthesizer's typed plan: kernels' loop kinds, reductions and schedules as the planner
decides them, the checks both planners share, and emitters that spell the schedule they are
given (a changed schedule changes the candidate, and it still computes the reference)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import PROBLEMS
from kernelevolve.problem import import_module
from kernelevolve.synth.capture import NotCovered, capture
from kernelevolve.synth.emit_cpp import KernelWriter
from kernelevolve.synth.kernel import (Kernel, Layout, LoopKind, NodeKind, Reduction)
from kernelevolve.synth.plan import explain, plan
from kernelevolve.synth.schedule import Programs

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "synth_problems"


def _problem(tmp_path, name: str, forward: str, inputs: str, init: str = "pass") -> Path:
    path = tmp_path / f"{name}.py"
    path.write_text(f"""import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        {init}

    def forward(self, x):
        {forward}


def get_inputs():
    return [{inputs}]


def get_init_inputs():
    return []
""")
    return path


def _kernel(path) -> Kernel:
    k, = plan(capture(str(path))).kernels
    return k


def _refusal(path) -> str:
    with pytest.raises(NotCovered) as exc:
        plan(capture(str(path)))
    return str(exc.value)


def test_layout_enums_read_as_their_strings():
    assert Layout.FULL == "full" and {"full": 1}[Layout.FULL] == 1
    assert f"{Layout.CHAN} {NodeKind.REDUCE} {LoopKind.MID}" == "chan reduce mid"
    assert NodeKind("unary") is NodeKind.UNARY and Layout("gtable") is Layout.GTABLE


def test_reduction_and_kernel_records_refuse_inconsistent_plans():
    with pytest.raises(ValueError):
        Reduction("v", "var", "x", 1, True, 2)               # var without its correction
    with pytest.raises(ValueError):
        Reduction("p", "prod", "x", 1, True, 1)
    assert Reduction("m", "max", "x", 1, True, 1).identity == -float("inf")
    with pytest.raises(ValueError):
        Kernel("k0", [], [], [], (4, 8), "x", 1, loop=LoopKind.MID)   # a mid kernel needs its dim


def test_layernorm_is_a_row_kernel_with_two_reduction_passes():
    k = _kernel(PROBLEMS / "synth_layernorm.py")
    x = next(i.name for i in k.inputs if i.layout == Layout.FULL)
    assert k.loop is LoopKind.ROWS and k.levels == 2
    assert [i.layout for i in k.inputs] == ["full", "col", "col"]       # x, weight, bias
    mean, var = k.reductions
    assert (mean.op, mean.source, mean.dim, mean.keepdim, mean.level) == ("mean", x, 1, True, 1)
    assert (var.op, var.dim, var.level) == ("mean", 1, 2)
    s = k.schedule
    assert s.programs is Programs.ROW_BLOCKS and s.shape_args == ("rows", "cols")
    assert [p.reductions for p in s.passes] == [[mean], [var]]
    first, second = s.passes
    assert first.nodes == [] and first.loads == [x]         # reduces x itself
    assert second.nodes == ["sub", "mul"]                   # (x - mean)^2, per element
    assert second.after == ["add", "rsqrt"]                 # rsqrt(var + eps), once per row
    assert s.store.nodes[-1] == s.full_outputs[0] and s.row_outputs == []
    assert s.cache is None and s.carry is None              # nothing transcendental to keep


def test_var_keeps_its_correction_and_takes_two_passes(tmp_path):
    path = _problem(tmp_path, "var0", "return torch.var(x, dim=-1, keepdim=True, correction=0)",
                    "torch.randn(8, 33)")
    k = _kernel(path)
    mean, var = k.reductions
    assert (mean.op, mean.level) == ("mean", 1)
    assert (var.op, var.level, var.correction, var.source) == ("var", 2, 0.0, var.node + "_sq")
    assert k.schedule.row_outputs == [var.node] and k.schedule.store is None


def test_a_per_channel_bias_is_a_chan_input_with_its_block():
    k = _kernel(PROBLEMS / "synth_chan_bias.py")       # conv(x) + bias (C, 1, 1), * scale
    chans = [i for i in k.inputs if i.layout == Layout.CHAN]
    assert len(chans) == 2 and all(i.block == (1, 2) for i in chans)   # dim 1 of (B, C, H, W)
    s = k.schedule
    assert k.loop is LoopKind.ROWS and s.programs is Programs.TILES     # no reduction
    assert s.size_args == [(i.name, what) for i in chans for what in ("in", "sp")]
    assert "int64_t in1_in, int64_t in1_sp, int64_t in2_in, int64_t in2_sp" in \
        KernelWriter(k).signature()


def test_a_mid_reduction_kernel_and_its_steps():
    k = _kernel(PROBLEMS / "synth_mid_mean.py")        # mean over dim 1 of (B, F, D), epilogue
    assert k.loop is LoopKind.MID and k.mid_dim == 1
    r, = k.reductions
    assert (r.op, r.dim, r.keepdim, r.level) == ("mean", 1, False, 1)
    assert [o.layout for o in k.outputs] == ["mid"]
    s = k.schedule
    assert s.programs is Programs.MID_BLOCKS and s.shape_args == ("outer", "nred", "inner")
    walk, = s.passes                                    # one walk down the reduced dim
    assert walk.reductions == [r] and r.source == "sub"
    assert walk.nodes == ["relu", "mul", "sub"] and walk.loads == [k.inputs[0].name]
    assert walk.after == ["sigmoid", "mul_1", "add"]     # the epilogue on the mean
    assert s.mid.uniform == [] and s.mid.kept == [] and s.store is None
    assert s.row_outputs == ["add"] and s.full_outputs == [] and s.cache is None


def test_a_flat_elementwise_kernel_schedule(tmp_path):
    path = _problem(tmp_path, "flat", "return torch.sigmoid(x) * x / 4.0 - 1.0",
                    "torch.randn(1000)")
    k = _kernel(path)
    s = k.schedule
    assert k.loop is LoopKind.FLAT and k.flat and s.programs is Programs.FLAT
    assert s.shape_args == ("n",) and s.size_args == [] and s.passes == []
    assert s.store.nodes == [n.name for n in k.nodes] and s.store.loads == [k.inputs[0].name]
    div = next(n.name for n in k.nodes if n.op == "div")
    assert s.uniform_divisors == {div}                  # a constant divisor: one reciprocal
    assert s.cost == 4                                  # (4 load+store + 10 sigmoid + 3) / 4
    source = KernelWriter(k).write()
    assert "parallel for simd schedule(static)\n" in source  # no if clause on a simd
    assert "if (n * 4 >= PARALLEL_MIN_ELEMENTS) {" in source    # a branch to a serial loop
    assert "(1.0f / 4.0f)" in source


def test_softmax_caches_exp_for_the_store_pass_and_carries_the_max():
    k = _kernel(BENCH / "row_softmax.py")
    s = k.schedule
    x = k.inputs[0].name
    assert [r.op for r in k.reductions] == ["max", "sum"]
    assert s.carry == x                                 # the next row's max rides along
    assert s.cache.values == ["exp"] and s.cache.in_output == s.full_outputs[0]
    assert s.cache.scratch == [] and s.cache.store_nodes == ["div"]
    assert s.store.nodes == ["sub", "exp", "div"]       # Triton recomputes the exp
    div = next(n.name for n in k.nodes if n.op == "div")
    assert div in s.uniform_divisors                    # divided by the row's sum


@pytest.mark.slow
@pytest.mark.parametrize("change", ["no_carry", "no_cache", "both"])
def test_the_cpp_emitter_spells_the_schedule_it_is_given(tmp_path, monkeypatch, change):
    """Turn schedule decisions off: the candidate changes and still computes softmax."""
    from kernelevolve.synth.cpp_module import emit_source

    monkeypatch.setenv("KERNELEVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    problem = BENCH / "row_softmax.py"
    p = plan(capture(str(problem)))
    s = p.kernels[0].schedule
    if change in ("no_carry", "both"):
        s.carry = None
    if change in ("no_cache", "both"):
        s.cache = None
    source = emit_source(p, str(problem), explain(p)).replace(
        'name="synth_row_softmax"', f'name="synth_row_softmax_{change}"')
    assert ("carried_row" in source) == (change == "no_cache")
    assert ("buf_exp" in source) == (change == "no_carry")
    (tmp_path / "cand.py").write_text(source)
    cand = import_module(tmp_path / "cand.py", f"ke_cand_{change}")
    x = 4.0 * torch.randn(37, 300)
    got = cand.ModelNew()(x)
    assert torch.allclose(got, torch.softmax(x, dim=-1), rtol=1e-5, atol=1e-6)


# ---- the checks both planners share -------------------------------------------------------

EMB = "self.emb = nn.Embedding(10, 16)"
IDX = "torch.randint(0, 10, (4, 8))"


def test_indices_read_as_data_too_are_refused_by_both_planners(tmp_path):
    """Before the planners shared their operand checks, the mid planner took this and wrote
    C++ that did not compile and Triton that read an unloaded value. (No view in between: the
    planner keeps a view that splits a group in torch, and that would resolve the conflict.)"""
    body = "self.emb(x) * x"            # 16 indices, each also a per-column factor
    idx = "torch.randint(0, 10, (16,))"
    row = _refusal(_problem(tmp_path, "row_idx", f"return {body}", idx, EMB))
    mid = _refusal(_problem(tmp_path, "mid_idx", f"return ({body}).sum(0)", idx, EMB))
    assert row == mid and row.endswith("is read both as data and as embedding indices")


@pytest.mark.parametrize("row,mid,inputs,init,same,row_cover,mid_cover", [
    ("(x.float() * 2.0).softmax(-1)", "x.float().sum(1)",
     "torch.randn(4, 8, 16, dtype=torch.float64)", "pass",
     "kernel input arg1_1 has dtype float64; ",
     "float32, int64, int32 and bool are covered", "float32, int64, int32 and bool are covered"),
    ("(x * self.p).softmax(-1)", "(x * self.p).sum(1)", "torch.randn(4, 8, 16)",
     "self.p = nn.Parameter(torch.randn(1, 8, 16))",
     "arg0_1 of shape (1, 8, 16) does not broadcast",
     " as a row, a column or a scalar over the kernel domain (4, 8, 16)",
     " over the middle-dim reduction domain (4, 8, 16)"),
    ("x.sum(-1) > 0", "x.sum(1) > 0", "torch.randn(4, 8, 16)", "pass",
     "kernel output gt has dtype bool; ",
     "float32 outputs and full-size int64, int32 and bool outputs are covered",
     "only float32 is covered"),
], ids=["input dtype", "broadcast", "output dtype"])
@pytest.mark.slow
def test_shared_checks_give_one_reason_with_each_planners_coverage(
        tmp_path, row, mid, inputs, init, same, row_cover, mid_cover):
    row_reason = _refusal(_problem(tmp_path, "row", f"return {row}", inputs, init))
    mid_reason = _refusal(_problem(tmp_path, "mid", f"return {mid}", inputs, init))
    assert row_reason == same + row_cover
    assert mid_reason == same + mid_cover


def test_scalar_tensors_fold_into_the_kernels_that_read_them():
    """nan_to_num, hardshrink, threshold and heaviside build 0-d tensors from numbers inside
    forward (aten.scalar_tensor); they become literals of the fused ops (float32-rounded), so
    forward makes no torch call for them and the kernels read no scalar input. Before: each
    was a torch step and a kernel input (nan_to_num 0.55x eager on 32768 floats)."""
    p = plan(capture(str(PROBLEMS / "synth_ops_composites.py")))
    kept = [p.graph.values[n].op for n in p.kept]
    assert "scalar_tensor" not in kept, kept
    layouts = {i.layout for k in p.kernels for i in k.inputs}
    assert Layout.SCALAR not in layouts, layouts


# ---- multi-pass mid kernels: normalisations and variances over a non-last dim -------------

def test_softmax_over_a_middle_dim_walks_it_twice_then_stores(tmp_path):
    path = _problem(tmp_path, "mid_softmax", "return torch.softmax(x, dim=1)",
                    "torch.randn(4, 8, 16)")
    k = _kernel(path)
    x = k.inputs[0].name
    assert k.loop is LoopKind.MID and k.mid_dim == 1 and k.levels == 2
    mx, total = k.reductions
    assert (mx.op, mx.source, mx.level) == ("max", x, 1)
    assert (total.op, total.source, total.level) == ("sum", "exp", 2)
    s = k.schedule
    first, second = s.passes
    assert first.nodes == [] and first.loads == [x] and first.stores == []
    assert second.nodes == ["sub", "exp"] and second.loads == [x]    # exp(x - max) per element
    assert s.mid.kept == [mx.node, total.node]          # read by the walks after their own
    assert s.store.nodes == ["sub", "exp", "div"] and s.store.stores == ["div"]
    assert s.cache.values == ["exp"] and s.cache.in_output == "div"   # exp left in the output
    assert s.cache.store_nodes == ["div"] and s.carry is None
    assert s.mid.reciprocals == [total.node]            # C++ multiplies by 1 / sum
    assert "const float v_div = (v_exp * r_sum_1[j]);" in KernelWriter(k).write()
    assert [o.layout for o in k.outputs] == ["full"] and s.full_outputs == ["div"]
    text = explain(plan(capture(str(path))))
    assert "mid reduction kernel over dim 1, 2 walk(s) + 1 store walk" in text


def test_std_over_the_first_dim_keeps_the_mean_for_its_second_walk(tmp_path):
    path = _problem(tmp_path, "mid_std", "return torch.std(x, dim=0, correction=0)",
                    "torch.randn(5, 3, 7)")
    k = _kernel(path)
    mean, var = k.reductions
    assert k.mid_dim == 0 and k.levels == 2              # dim 0: outer = 1
    assert (mean.op, mean.level, var.op, var.level, var.correction) == \
        ("mean", 1, "var", 2, 0.0)
    s = k.schedule
    assert s.mid.kept == [mean.node] and s.passes[1].nodes == [var.source[:-3] + "_dev",
                                                               var.source]
    assert s.passes[1].after == ["sqrt"] and s.row_outputs == ["sqrt"] and s.store is None


def test_logsumexp_over_dim_0_reads_its_max_at_the_next_level(tmp_path):
    path = _problem(tmp_path, "mid_lse", "return torch.logsumexp(x, dim=0)",
                    "torch.randn(5, 6, 7)")
    k = _kernel(path)
    s = k.schedule
    first, second = s.passes
    # where(|max| == inf, 0, max), squeezed to (6, 7): still the max of each dim-0 fiber
    assert first.after == ["abs_1", "eq", "where", "squeeze"]
    assert second.nodes == ["sub", "exp"] and second.after == ["log", "add"]
    assert s.mid.kept == ["where", "squeeze"] and s.row_outputs == ["add"]
    assert [i.layout for i in k.inputs] == ["full"]     # its scalar_tensor(0): a literal


def test_a_full_output_computed_by_a_reduction_walk_is_stored_there():
    """softmax, then its sum over the same dim: the third walk computes the softmax, and
    writes it; no store walk."""
    k = plan(capture(str(PROBLEMS / "synth_mid_softmax4d.py"))).kernels[0]
    s = k.schedule
    assert k.levels == 3 and [r.op for r in k.reductions] == ["max", "sum", "sum"]
    assert [p.stores for p in s.passes] == [[], [], ["div"]]
    assert s.store is None and s.cache is None and s.row_outputs == ["sum_2"]


def test_a_mid_kernel_reads_an_input_of_the_reduced_shape(tmp_path):
    """A (A, 1, C) parameter is one value per reduced position; exp of it is computed per
    position, not kept between walks."""
    path = _problem(tmp_path, "mid_in", "return (x - torch.exp(self.p)).amax(1)",
                    "torch.randn(4, 8, 16)", "self.p = nn.Parameter(torch.randn(4, 1, 16))")
    k = _kernel(path)
    assert [i.layout for i in k.inputs] == ["mid", "full"]
    assert k.schedule.mid.uniform == ["exp"] and k.schedule.mid.kept == []
    assert "in0[o * inner + c]" in KernelWriter(k).write()


def test_a_reduced_value_broadcast_against_the_wrong_dims_is_refused(tmp_path):
    """(4, 16) from amax over dim 1 of (4, 4, 16) broadcasts as (1, 4, 16): torch takes it,
    but it is not the reduced value of each fiber."""
    reason = _refusal(_problem(tmp_path, "mid_wrong", "return x - x.amax(1)",
                               "torch.randn(4, 4, 16)"))
    assert reason == ("amax (shape (4, 16)) broadcasts against the wrong dims of the "
                      "middle-dim reduction domain (4, 4, 16)")


def test_a_full_sum_after_a_mid_log_softmax_splits_at_the_flattening_view(tmp_path):
    """cross_entropy over class probabilities: log_softmax over dim 1, times the targets,
    viewed flat and summed, negated. The flattening view is split off (torch), not the view
    of the sum: the negation stays in the summing kernel."""
    path = _problem(tmp_path, "ce_probs", "return -(torch.log_softmax(x, dim=1) * "
                    "torch.sigmoid(x)).sum()", "torch.randn(4, 8, 16)")
    p = plan(capture(str(path)))
    assert [k.loop for k in p.kernels] == [LoopKind.MID, LoopKind.ROWS]
    assert [g.op for g in (p.graph.values[n] for n in p.kept)] == ["view"]
    assert [n.source_op for n in p.kernels[1].nodes] == ["sum", "view", "neg"]


@pytest.mark.slow
@pytest.mark.parametrize("problem", ["synth_mid_norms.py", "synth_mid_softmax4d.py"])
def test_every_position_loop_of_a_mid_kernel_vectorises(tmp_path, problem):
    """Each walk's and each level's loop over a task's inner positions is a vector loop (var_mean's
    count of infs, a bool -> float cast, kept its walk scalar: 0.88 ms against 0.09)."""
    import re
    import subprocess

    from kernelevolve.synth import synthesize

    source, _ = synthesize(str(PROBLEMS / problem), "cpp")
    cpp = source.split('SRC = r"""', 1)[1].split('"""', 1)[0]
    cpp = "#define PARALLEL_MIN_ELEMENTS 32768\n#define ROWS_PER_TASK 0\n#define FAST_EXP 1\n" \
          "#define MID_BLOCK 256\n" + cpp
    (tmp_path / "k.cpp").write_text(cpp)
    proc = subprocess.run(["g++", "-O3", "-march=native", "-fopenmp", "-std=c++17", "-fPIC",
                           "-c", str(tmp_path / "k.cpp"), "-o", str(tmp_path / "k.o"),
                           "-fno-math-errno", "-fno-trapping-math", "-mprefer-vector-width=512",
                           "-fopt-info-vec-optimized", "-fopt-info-loop-optimized"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    # vectorised, or a library call (a copy of an accumulator block into a kept one: memcpy)
    done = {int(m.group(1)) for m in re.finditer(
        r"k\.cpp:(\d+):\d+: optimized: (loop vectorized|Loop \d+ distributed: split to 0 loops)",
        proc.stderr)}
    lines = cpp.splitlines()
    heads = [i for i, line in enumerate(lines, start=1)
             if line.strip() == "for (int64_t j = 0; j < w; ++j) {"]
    # each loop's lines up to its closing brace (g++ names a line inside the body)
    loops = [(a, lines.index(lines[a - 1].split("for")[0] + "}", a) + 1) for a in heads]
    scalar = [lines[a - 1] + " / " + lines[a + 2].strip() for a, b in loops
              if not any(a <= d <= b for d in done)]
    assert len(loops) > 10 and not scalar, scalar
