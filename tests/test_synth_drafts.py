"""The synthesizer's drafts through the full sandboxed harness: a C++ draft of every covered
problem is accepted (compiled, correct, integrity-checked, timed), and so is a Triton draft of
most of them under the interpreter. Moved here from test_synth.py, which keeps the planner's and
the operator's checks."""
from __future__ import annotations

import pytest

from conftest import PROBLEMS, example
from problem_copies import fewer_rows
from short_timing import evaluate_short
from kernelevolve.operators.tunables import parse, read_config, rewrite, space
from kernelevolve.synth import synthesize

CPP_PROBLEMS = {
    "pointwise_chain": example("pointwise_chain"),
    "softmax": example("softmax"),
    "rmsnorm": example("rmsnorm"),
    "kb_relu": PROBLEMS / "kb_level1_relu.py",
    "kb_linear_swish": PROBLEMS / "kb_level2_linear_swish_scale.py",
    "layernorm": PROBLEMS / "synth_layernorm.py",
    "log_softmax": PROBLEMS / "synth_log_softmax.py",
    "mean_var_last": PROBLEMS / "synth_mean_last.py",
    "bias_sigmoid": PROBLEMS / "synth_bias_sigmoid.py",
    "clamp_tanh": PROBLEMS / "synth_clamp_tanh.py",
    "mid_mean": PROBLEMS / "synth_mid_mean.py",
    "mid_amax_sum_keepdim": PROBLEMS / "synth_mid_amax.py",
    # softmax, log_softmax, logsumexp, var, std, var_mean over dims 0 and 1 (NaN, inf edges);
    # softmax, var and std over middle dims of 4-D inputs
    "mid_norms": PROBLEMS / "synth_mid_norms.py",
    "mid_softmax_4d": PROBLEMS / "synth_mid_softmax4d.py",
    "int_ops": PROBLEMS / "synth_int_ops.py",
    "embedding_rmsnorm": PROBLEMS / "synth_embedding_ln.py",
    "embedding_bag_sum": PROBLEMS / "synth_embedding_bag.py",
    # NaN, inf, signed zeros, exact quotients: maximum / fmax / relu / amax / floor_divide
    "nan_edges": PROBLEMS / "synth_nan_edges.py",
    # a (C, 1, 1) bias and scale after a convolution: per-channel operands over the rows
    "chan_bias": PROBLEMS / "synth_chan_bias.py",
    # row reductions read only by a torch-kept cat (a list argument)
    "cat_rows": PROBLEMS / "synth_cat_rows.py",
}
# The interpreter is slow: Triton drafts are checked on the examples and two small fusions.
TRITON_PROBLEMS = ["pointwise_chain", "softmax", "rmsnorm", "kb_linear_swish", "layernorm",
                   "int_ops", "mid_amax_sum_keepdim", "embedding_rmsnorm", "embedding_bag_sum",
                   "nan_edges", "chan_bias", "cat_rows", "mid_norms", "mid_softmax_4d"]
# The examples' Triton drafts are checked on a copy of the example with a few rows per case
# (BATCH, in each case's order): the interpreter runs one program per block of rows, and the
# examples' 128-1024 rows of 1-4 M elements per case were most of this file's time (22 s for
# softmax). The column sizes stay the examples' own (a row longer than MAX_BLOCK_COLS, an odd
# tail), and the row counts leave partial blocks of rows.
FEWER_ROWS = {"softmax": (8, 3, 11), "rmsnorm": (8, 3, 7), "pointwise_chain": (8, 3, 5)}
# The C++ drafts are synthesized from the examples as they are (their thresholds read the
# sizes) and evaluated on a copy with 4-16x fewer rows (an evaluation of the full examples' 4 MB
# inputs was ~10 s of CPU each): the columns are the examples' own, the main cases stay past the
# drafts' PARALLEL_MIN_ELEMENTS (rows * cols * 6 or 8 >= 262144: threads, partial chunks of
# rows) and the tail falls below it (one thread), so both paths of each draft run.
CPP_FEWER_ROWS = {"softmax": (32, 8, 33), "rmsnorm": (64, 16, 15),
                  "pointwise_chain": (32, 8, 15)}


def _evaluate(evaluator, problem, source, tmp_path, name):
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    return evaluate_short(evaluator, problem, path)  # the verdict, not the figure


@pytest.mark.parametrize("name", sorted(CPP_PROBLEMS))
def test_cpp_draft_accepted(evaluator, tmp_path, name):
    source, p = synthesize(str(CPP_PROBLEMS[name]), "cpp")
    problem = CPP_PROBLEMS[name]
    if name in CPP_FEWER_ROWS:
        problem = fewer_rows(problem, CPP_FEWER_ROWS[name], tmp_path)
    result = _evaluate(evaluator, problem, source, tmp_path, f"synth_{name}")
    assert result.accepted, result.reason
    assert parse(source).space  # tunable


@pytest.mark.parametrize("name", TRITON_PROBLEMS)
def test_triton_draft_accepted_under_interpreter(evaluator, tmp_path, name):
    source, _ = synthesize(str(CPP_PROBLEMS[name]), "triton")
    assert "@triton.jit" in source and "mask=" in source
    problem = CPP_PROBLEMS[name]
    if name in FEWER_ROWS:
        problem = fewer_rows(problem, FEWER_ROWS[name], tmp_path)
    result = _evaluate(evaluator, problem, source, tmp_path, f"synth_t_{name}")
    assert result.accepted, result.reason


def test_fewer_rows_keeps_the_example_but_its_row_counts(tmp_path):
    from kernelevolve.problem import load_problem

    for name, rows in [*FEWER_ROWS.items(), *CPP_FEWER_ROWS.items()]:
        original = load_problem(CPP_PROBLEMS[name])
        path = fewer_rows(CPP_PROBLEMS[name], rows, tmp_path)
        copy = load_problem(path)
        assert [c.bindings["BATCH"] for c in copy.cases] == list(rows)
        assert [{k: v for k, v in c.bindings.items() if k != "BATCH"} for c in copy.cases] == \
            [{k: v for k, v in c.bindings.items() if k != "BATCH"} for c in original.cases]
        assert [c.weight for c in copy.cases] == [c.weight for c in original.cases]


# Moved from test_tune.py: the tune operator's knobs on real candidates.
def test_rewritten_softmax_candidate_is_accepted(evaluator, tmp_path):
    src = example("softmax").with_name("candidate_cpp.py").read_text()
    cfg = {"ROWS_PER_TASK": 4, "PARALLEL_MIN_ELEMENTS": 131072}
    assert read_config(src) != cfg
    path = tmp_path / "candidate_tuned.py"
    path.write_text(rewrite(src, cfg))
    # examples/softmax with an eighth of the rows in its two large cases: 131072 elements
    # each, at the threshold (rows * cols >= it: threads, 4-row tasks), the 131x999 tail
    # (130869) just below it (one thread)
    result = evaluate_short(evaluator, fewer_rows(example("softmax"), (64, 16, 131), tmp_path),
                            path)
    assert result.accepted, result.reason
    assert all(c.correct for c in result.cases)


@pytest.mark.slow
def test_synth_declares_only_the_knobs_its_kernels_read(tmp_path):
    pointwise = tmp_path / "relu_affine.py"
    pointwise.write_text("import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
                         "    def forward(self, x):\n        return torch.relu(x) * 2 + 1\n\n\n"
                         "def get_inputs():\n    return [torch.randn(64, 256)]\n\n\n"
                         "def get_init_inputs():\n    return []\n")
    knobs = set(space(synthesize(str(pointwise), "cpp")[0]))
    assert knobs == {"PARALLEL_MIN_ELEMENTS", "WIDE_VECTORS"}  # no exp, no rows
    softmax = example("softmax")
    assert {"FAST_EXP", "ROWS_PER_TASK"} <= set(space(synthesize(str(softmax), "cpp")[0]))
    triton = set(space(synthesize(str(pointwise), "triton")[0]))
    assert triton == {"BLOCK_ELEMENTS", "NUM_WARPS"}  # flat kernels read no MAX_BLOCK_COLS
