"""model/workload.py on the example models and on small model files written here: cases and the
derived held-out case, seeded builds and inputs, constructor capture that rebuilds every
submodule, and one-line errors for each way a model file can be broken."""
from __future__ import annotations

import copy
import textwrap

import pytest
import torch
import torch.nn as nn

from kernelevolve.errors import ProblemError
from kernelevolve.model.workload import (ModelFile, WorkloadCase, capture_inits, init_args,
                                         load_model_file)
from conftest import ROOT

MODELS = ROOT / "examples" / "models"
NAMES = ["gpt_block", "dlrm", "conv_block"]


@pytest.fixture(scope="module", params=NAMES)
def loaded(request):
    mf = load_model_file(MODELS / f"{request.param}.py")
    return mf, mf.build()


def _state_equal(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_example_cases_follow_the_file(loaded):
    mf, _ = loaded
    declared = mf.module.CASES
    assert [(c.name, c.weight) for c in mf.workload] == \
        [(d["name"], float(d["weight"])) for d in declared]
    assert all(isinstance(c, WorkloadCase) for c in mf.cases)
    held = [c for c in mf.cases if c.held_out]
    assert len(held) == 1 and held[0].weight == 0.0 and mf.dropped == {}
    # Odd input sizes only: the constructor's inputs are those of the default build.
    assert any(v % 2 == 1 for v in held[0].bindings.values() if isinstance(v, int) and v >= 7)
    assert mf.init_inputs(held[0]) == mf.init_inputs()


def test_example_runs_every_case_and_traces_equal(loaded):
    mf, model = loaded
    assert not model.training
    traced = torch.fx.symbolic_trace(model)
    with torch.inference_mode():
        for case in mf.cases:
            args = mf.inputs(case)
            out = model(*args)
            assert torch.isfinite(out).all(), case.name
            assert torch.equal(traced(*args), out), case.name
            batch = case.bindings.get("BATCH", mf.module.BATCH)
            assert out.shape[0] == batch


def test_example_inputs_rebind_then_restore_globals(loaded):
    mf, _ = loaded
    default = {k: getattr(mf.module, k) for c in mf.cases for k in c.bindings}
    for case in mf.cases:
        args = mf.inputs(case, seed=3)
        assert args[0].shape[0] == case.bindings.get("BATCH", default.get("BATCH"))
        again = mf.inputs(case, seed=3)
        assert all(torch.equal(a, b) for a, b in zip(args, again))
        assert {k: getattr(mf.module, k) for k in default} == default


def test_build_is_seeded_and_leaves_the_callers_rng_alone(loaded):
    mf, model = loaded
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    assert _state_equal(mf.build(seed=0), model)
    assert torch.equal(torch.rand(3), expected)
    other = mf.build(seed=1)
    assert not _state_equal(other, model)


def test_every_captured_submodule_rebuilds(loaded):
    """init_args(sub) rebuilds each submodule: same class, same state shapes; with the model's
    values loaded, the same outputs on the whole model (checked through the root)."""
    mf, model = loaded
    assert init_args(model) == (tuple(mf.init_inputs()), {})
    for name, sub in model.named_modules():
        record = init_args(sub)
        assert record is not None, name
        args, kwargs = record
        rebuilt = type(sub)(*args, **kwargs)
        assert {k: v.shape for k, v in rebuilt.state_dict().items()} == \
            {k: v.shape for k, v in sub.state_dict().items()}, name
    root_args, root_kwargs = init_args(model)
    twin = type(model)(*root_args, **root_kwargs).eval()
    twin.load_state_dict(model.state_dict())
    args = mf.inputs(mf.workload[0])
    with torch.inference_mode():
        assert torch.equal(twin(*args), model(*args))


# ---- capture_inits on its own --------------------------------------------------------------

class _Mixin:
    def __init__(self):
        super().__init__()


class _FromMixin(_Mixin, nn.Module):
    pass


class _Wide(nn.Linear):
    def __init__(self, n: int):
        super().__init__(n, 2 * n)


class _WideChild(_Wide):
    pass


def test_capture_records_the_call_not_the_parents():
    original = nn.Linear.__init__
    with capture_inits():
        wide, child = _Wide(3), _WideChild(4)
        linear = nn.Linear(2, 3, bias=False)
        with capture_inits():  # nested: still recording, hooks removed only at the outer exit
            conv = nn.Conv2d(1, 2, 3, padding=1)
        after_inner = nn.ReLU()
        mixed = _FromMixin()
        duplicate = copy.deepcopy(linear)
    outside = nn.Linear(2, 2)
    assert nn.Linear.__init__ is original and _Wide.__init__.__qualname__ == "_Wide.__init__"
    assert init_args(wide) == ((3,), {}) and init_args(child) == ((4,), {})
    assert init_args(linear) == ((2, 3), {"bias": False})
    assert init_args(conv) == ((1, 2, 3), {"padding": 1})
    assert init_args(after_inner) == ((), {})
    assert init_args(mixed) is None       # its __init__ is the mixin's: the call is not seen
    assert init_args(duplicate) is None   # a copy ran no constructor
    assert init_args(outside) is None


def test_capture_is_undone_when_the_block_raises():
    original = nn.LayerNorm.__init__
    with pytest.raises(RuntimeError, match="boom"), capture_inits():
        raise RuntimeError("boom")
    assert nn.LayerNorm.__init__ is original
    assert init_args(nn.LayerNorm(4)) is None


# ---- model files written here ----------------------------------------------------------------

_GOOD = """
import torch
import torch.nn as nn

BATCH = 16
DIM = 32

class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.relu(self.fc(x))

def get_inputs():
    return [torch.randn(BATCH, DIM)]

def get_init_inputs():
    return [DIM]
"""


def _write(tmp_path, text: str, name: str = "m.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_no_cases_is_one_default_case_plus_an_odd_held_out_one(tmp_path):
    mf = load_model_file(_write(tmp_path, _GOOD))
    assert isinstance(mf, ModelFile) and mf.name == "m"
    assert [(c.name, c.weight, c.bindings, c.held_out) for c in mf.cases] == \
        [("default", 1.0, {}, False), ("held_out_odd", 0.0, {"BATCH": 15}, True)]
    assert mf.inputs(mf.cases[1])[0].shape == (15, 32)


def test_an_odd_case_needs_no_held_out_one(tmp_path):
    mf = load_model_file(_write(tmp_path, _GOOD + '\nCASES = [{"name": "a", "weight": 2, '
                                                  '"BATCH": 8}, {"name": "b", "BATCH": 33}]\n'))
    assert [(c.name, c.weight, c.held_out) for c in mf.cases] == [("a", 2.0, False),
                                                                 ("b", 1.0, False)]


def test_a_held_out_case_the_model_cannot_run_is_dropped_with_its_reason(tmp_path):
    text = _GOOD.replace("return torch.relu(self.fc(x))",
                         "return torch.relu(self.fc(x)).view(-1, 2, 32)")
    mf = load_model_file(_write(tmp_path, text))
    assert [c.name for c in mf.cases] == ["default"]
    assert "held_out_odd" in mf.dropped and "RuntimeError" in mf.dropped["held_out_odd"]


@pytest.mark.parametrize("edit, fault", [
    (lambda s: s.replace("class Model", "class Other"), "defines no `Model`"),
    (lambda s: s.replace("def get_inputs():", "def get_inputs():\n    raise ValueError('no data')"),
     "get_inputs raised ValueError: no data"),
    (lambda s: s.replace("return [DIM]", "return [DIM, 1, 2]"), "Model(*get_init_inputs()) raised"),
    (lambda s: s.replace("return [DIM]", "raise KeyError('dim')"),
     "get_init_inputs raised KeyError"),
    (lambda s: s + '\nCASES = [{"name": "a", "DIM": 16}]\n',
     "case 'a' changes what get_init_inputs"),
    (lambda s: s + '\nCASES = [{"name": "a", "WIDTH": 16}]\n',
     "sets WIDTH, which is not a global"),
    (lambda s: s + '\nCASES = [{"name": "a", "weight": -1}]\n', "weights must be positive"),
    (lambda s: s.replace("torch.randn(BATCH, DIM)", "torch.randn(BATCH, DIM + 1)"),
     "the model's forward raised RuntimeError"),
    (lambda s: s.replace("return [torch.randn(BATCH, DIM)]", "return 3"),
     "get_inputs returned a int"),
    (lambda s: s + "\nraise SystemExit(4)\n", "importing it raised SystemExit"),
    (lambda s: s + "\ndef broken(:\n", "syntax error"),
])
def test_a_broken_model_file_is_one_line_naming_it(tmp_path, edit, fault):
    path = _write(tmp_path, edit(_GOOD))
    with pytest.raises(ProblemError) as info:
        load_model_file(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message and fault in message, message


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ProblemError, match="no such file"):
        load_model_file(tmp_path / "absent.py")


def test_check_false_defers_the_forward(tmp_path):
    text = _GOOD.replace("torch.randn(BATCH, DIM)", "torch.randn(BATCH, DIM + 1)")
    mf = load_model_file(_write(tmp_path, text), check=False)
    model = mf.build()
    with pytest.raises(RuntimeError):
        model(*mf.inputs(mf.cases[0]))
