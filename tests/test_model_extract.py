"""Extraction (model/extract.py, write.py, tune.analyse): hot region kinds become ordinary
problem files that rebuild their regions exactly, with CASES weighted by the recorded calls x
time and an odd held-out case; what cannot be rebuilt or reached is named, never dropped."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelevolve.model.extract import Call, HotSpot, case_weights
from kernelevolve.model.cases import timed_cases
from kernelevolve.model.tune import TuneOptions, analyse
from kernelevolve.model.workload import load_model_file
from kernelevolve.problem import CaseBinder, import_module, load_problem

ROOT = Path(__file__).resolve().parents[1]
GPT = ROOT / "examples" / "models" / "gpt_block.py"


@pytest.fixture(scope="module")
def gpt(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpt_extract")
    mf = load_model_file(GPT)
    # min_share 0: which regions clear a share cut depends on the load of the machine
    data = analyse(mf, out, TuneOptions(top=5, min_share=0.0, profile_reps=2), lambda m: None)
    return mf, data, out


def _region_outputs(mf, spot):
    """{signature: (args, region output)} recorded on a fresh outline of the model."""
    from kernelevolve.model.extract import record_calls
    from kernelevolve.model.outline import find_regions

    cases = timed_cases(mf)
    outlined = find_regions(mf.build(), cases[0][2]())
    path = spot["instances"][0]
    region = dict(outlined.module.named_modules())[path]
    calls = record_calls(outlined.module, [path], cases)[path]
    with torch.inference_mode():
        return region, {sig: (c.args, region(*c.args)) for sig, c in calls.items()}


@pytest.mark.slow
def test_extracted_problems_rebuild_their_regions_exactly(gpt):
    mf, data, out = gpt
    spots = data["hot_spots"]
    assert len(spots) == 5 and all(h["problem"] for h in spots), \
        [(h["label"], h["error"]) for h in spots]
    labels = {h["label"] for h in spots}
    # the inline tanh-GELU and the residual add + LayerNorm are regions below the modules
    assert "mul+pow+add+tanh" in labels and "add+layer_norm" in labels
    for spot in spots:
        problem = load_problem(spot["problem"])  # an ordinary problem file
        assert [c.held_out for c in problem.cases].count(True) == 1
        mod = import_module(spot["problem"])
        region, recorded = _region_outputs(mf, spot)
        ref = mod.Model(*mod.get_init_inputs())
        ref.load_state_dict(region.state_dict())
        with torch.inference_mode():
            for sig, (args, want) in recorded.items():
                got = ref(*args)
                for g, w in zip(got if isinstance(got, tuple) else (got,),
                                want if isinstance(want, tuple) else (want,)):
                    assert torch.equal(g, w), (spot["label"], sig)
        # each timed case's get_inputs() has a recorded shape
        binder = CaseBinder(mod, problem.cases)
        shapes = {tuple(tuple(a.shape) for a in args) for args, _ in recorded.values()}
        for case in problem.cases:
            binder.bind(case)
            got = tuple(tuple(a.shape) for a in mod.get_inputs())
            assert (got in shapes) != case.held_out, (spot["label"], case.name)
    # what the problems cover plus what was left out is the model's time, near enough
    covered = data["coverage"] + sum(r["share"] or 0 for r in data["left_out"])
    assert 0.5 < covered < 1.5
    assert any("GEMM" in r["why"] for r in data["left_out"])
    json.dumps(data)


def test_case_weights_are_calls_times_time_over_the_workload():
    """Two shapes of one region kind over two instances and two workload cases:
    weight(sig) = sum over cases of case weight x calls with sig x that instance's time per
    call in the case, normalised."""
    hs = HotSpot("k", "r", ["region_0", "region_1"], None, 0, 0, 0, 1, 1)
    prof = {"instances": [
        {"path": "region_0", "by_case": {"a": {"calls": 2.0, "incl_ms": 4.0},
                                         "b": {"calls": 1.0, "incl_ms": 1.0}}},
        {"path": "region_1", "by_case": {"a": {"calls": 1.0, "incl_ms": 3.0}}}]}
    records = {"region_0": {"big": Call([], {"a": 2.0}), "small": Call([], {"b": 1.0})},
               "region_1": {"big": Call([], {"a": 1.0})}}
    w = case_weights(hs, prof, records, [("a", 3.0), ("b", 1.0)])
    # big: 3/4 * (2 calls * 2 ms + 1 call * 3 ms) = 5.25; small: 1/4 * 1 * 1 ms = 0.25
    assert w == pytest.approx({"big": 5.25 / 5.5, "small": 0.25 / 5.5}, rel=1e-3)


UNTRACEABLE = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(64)

    def forward(self, x):
        if x.sum() > 0:          # data-dependent control flow: torch.fx cannot trace it
            x = x * 2.0
        return torch.tanh(self.norm(x)) + 1.0

def get_inputs():
    return [torch.randn(32, 64)]

def get_init_inputs():
    return []
'''


def test_an_untraceable_model_is_named_with_the_reason(tmp_path):
    model = tmp_path / "branchy.py"
    model.write_text(UNTRACEABLE)
    r = subprocess.run([sys.executable, "-m", "kernelevolve.cli", "extract", str(model),
                        "--out", str(tmp_path / "out"), "--reps", "1", "--json",
                        str(tmp_path / "x.json")], capture_output=True, text=True, timeout=600)
    assert r.returncode == 3, r.stderr
    data = json.loads((tmp_path / "x.json").read_text())
    assert data["hot_spots"] == []
    why = " ".join(str(row["why"]) for row in data["left_out"])
    assert "trace" in why.lower(), data["left_out"]
    assert "Traceback" not in r.stderr


def test_in_place_check_unserves_a_kernel_slower_inside_the_model(monkeypatch):
    """Each served kind is timed inside the model, eager and patched alternating; a kind
    whose regions are no faster patched loses `served` (kept as `promoted`), with both
    figures, and the one that pays keeps it."""
    import kernelevolve.model.outline as outline
    import kernelevolve.model.profile as profile_mod
    import kernelevolve.model.serve as serve
    from kernelevolve.model.insitu import check_in_place

    class _Session:
        unpatched = False

        def unpatch(self):
            _Session.unpatched = True

    eager, patched = object(), object()
    monkeypatch.setattr(outline, "find_regions",
                        lambda model, example: type("O", (), {"module": eager})())
    monkeypatch.setattr(serve, "patched_model", lambda *a: (patched, _Session()))
    # per forward: kind "fast" 2.0 ms eager, 0.5 patched; kind "slow" 0.1 eager, 0.3 patched
    figures = {id(eager): {"region_0": 2.0, "region_1": 0.1},
               id(patched): {"region_0": 0.5, "region_1": 0.3}}
    monkeypatch.setattr(profile_mod, "profile", lambda module, cases, **kw: {"instances": [
        {"path": p, "incl_ms": ms} for p, ms in figures[id(module)].items()]})

    class _MF:
        cases = []

        def build(self):
            return None
    monkeypatch.setattr("kernelevolve.model.cases.timed_cases",
                        lambda mf: [("c", 1.0, lambda: [])])
    spots = [{"kind": "fast", "instances": ["region_0"]}, {"kind": "slow",
                                                           "instances": ["region_1"]}]
    given = [{"kind": k, "served": {"name": k, "version": 1},
              "promoted": {"name": k, "version": 1}} for k in ("fast", "slow")]
    out = {v["kind"]: v for v in check_in_place(_MF(), Path("."), spots, given)}
    assert out["fast"]["served"] and out["fast"]["in_situ"]["speedup"] == pytest.approx(4.0)
    assert out["slow"]["served"] is None and out["slow"]["promoted"]
    assert "slower inside the model" in out["slow"]["not_served"]
    assert out["slow"]["in_situ"] == pytest.approx(
        {"eager_ms": 0.1, "patched_ms": 0.3, "speedup": 0.1 / 0.3})
    assert _Session.unpatched and given[1]["served"]  # the caller's list is not changed
