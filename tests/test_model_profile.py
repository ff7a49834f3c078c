"""The model profiler (model/profile.py): per instance and per kind, inclusive and exclusive
time that add up, the observed shape distribution weighted by the workload's cases, Amdahl's
bounds, the user's own loop through `kernelevolve.profiling`, and `kernelevolve profile`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn as nn

import kernelevolve
from kernelevolve.model.profile import Recorder, profile, summarise
from kernelevolve.model.workload import capture_inits

ROOT = Path(__file__).resolve().parents[1]


class Inner(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        return torch.tanh(self.norm(x)) * 2.0


class Net(nn.Module):
    def __init__(self, dim: int = 64):
        super().__init__()
        self.a = Inner(dim)
        self.b = Inner(dim)
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return self.fc(self.b(self.a(x)))


def _cases(dim=64):
    return [("big", 3.0, lambda: [torch.randn(256, dim)]),
            ("small", 1.0, lambda: [torch.randn(8, dim)])]


def test_instances_and_kinds_add_up_and_shapes_follow_the_workload():
    with capture_inits():
        model = Net().eval()
    prof = profile(model, _cases(), reps=3)
    by_path = {i["path"]: i for i in prof["instances"]}
    assert set(by_path) == {"(model)", "a", "b", "a.norm", "b.norm", "fc"}
    root = by_path["(model)"]
    assert root["calls"] == pytest.approx(1.0)
    # per call, exclusive <= inclusive and a parent's inclusive time covers its child's (each
    # call of `a` holds one of `a.norm`): so do the medians the figures are built from
    for inst in prof["instances"]:
        assert 0 <= inst["excl_ms"] <= inst["incl_ms"]
    assert by_path["a"]["incl_ms"] >= by_path["a.norm"]["incl_ms"]
    assert root["incl_ms"] >= max(by_path[p]["incl_ms"] for p in ("a", "b", "fc"))
    # kinds by class plus constructor inputs; without them, by state shapes and attributes
    assert {k["label"] for k in profile(Net().eval(), _cases(), reps=1)["kinds"]} >= \
        {"LayerNorm(weight:64, bias:64)", "Linear(weight:64x64, bias:64)"}
    # one kind for the two Inner(64) and one for the two LayerNorm(64), two instances each
    kinds = {k["label"]: k for k in prof["kinds"]}
    assert kinds["Inner(64)"]["instances"] == ["a", "b"]
    assert kinds["LayerNorm(64)"]["calls"] == pytest.approx(2.0)
    # the shape distribution: calls weighted by the cases' weights (3:1)
    shapes = {s["inputs"]: s["share"] for s in kinds["LayerNorm(64)"]["shapes"]}
    assert shapes == pytest.approx({"float32[256, 64]": 0.75, "float32[8, 64]": 0.25})
    # Amdahl: the bounds follow from the inclusive share
    s = kinds["Inner(64)"]["share_incl"]
    assert 0 < s < 1
    assert kinds["Inner(64)"]["amdahl_2x"] == pytest.approx(1 / (1 - s / 2))
    assert kinds["Inner(64)"]["amdahl_free"] == pytest.approx(1 / (1 - s))
    # the unhooked model time is measured next to the hooked one
    assert prof["total_ms"] > 0 and prof["hooked_total_ms"] > 0
    assert "hooks" in prof["timing"] and prof["hook_cost_us"] >= 0
    json.dumps(prof)  # JSON-able


def test_weights_scale_the_shares_between_cases():
    """A case's weight multiplies its per-forward times: with all the weight on the small
    case the big case's shape has no share left."""
    model = Net().eval()
    rec = Recorder(model)
    with torch.inference_mode(), rec:
        for name, _w, make in _cases():
            with rec.case(name):
                for _ in range(2):
                    model(*make())
    only_small = summarise(rec, [("big", 0.0), ("small", 1.0)])
    kinds = {k["class"]: k for k in only_small["kinds"]}
    assert [s["inputs"] for s in kinds["LayerNorm"]["shapes"]] == ["float32[8, 64]"]
    both = summarise(rec, [("big", 1.0), ("small", 3.0)])
    per_case = {c["name"]: c["hooked_ms"] for c in both["cases"]}
    assert only_small["hooked_total_ms"] == pytest.approx(per_case["small"])
    # the weighted mean of the cases' own forwards, whichever case the machine ran faster (a
    # busy neighbour once made the small case's forwards slower than the big one's)
    assert both["hooked_total_ms"] == pytest.approx((per_case["big"] + 3 * per_case["small"]) / 4)


def test_profiling_records_the_users_own_loop():
    model = Net().eval()
    with torch.inference_mode(), kernelevolve.profiling(model) as result:
        for batch in (4, 4, 16):
            model(torch.randn(batch, 64))
    prof = result()
    root = next(i for i in prof["instances"] if i["path"] == "(model)")
    assert root["calls"] == pytest.approx(1.0)  # per forward, over 3 forwards
    fc = next(k for k in prof["kinds"] if k["class"] == "Linear")
    assert {s["inputs"]: round(s["share"], 3) for s in fc["shapes"]} == \
        {"float32[4, 64]": 0.667, "float32[16, 64]": 0.333}
    # hooks are gone after the block
    assert not model._forward_hooks and not model.fc._forward_pre_hooks


def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "kernelevolve.cli", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.mark.slow
def test_profile_cli_table_json_and_html(tmp_path):
    out, html = tmp_path / "p.json", tmp_path / "p.html"
    r = _cli("profile", ROOT / "examples" / "models" / "gpt_block.py", "--reps", 2,
             "--json", out, "--html", html)
    assert r.returncode == 0, r.stderr
    assert "LayerNorm(128)" in r.stdout and "if free" in r.stdout
    prof = json.loads(out.read_text())
    kinds = {k["label"]: k for k in prof["kinds"]}
    # constructor inputs recorded when the model was built: kinds by class plus init args
    assert {"LayerNorm(128)", "Linear(128, 512)", "MLP(128)"} <= set(kinds)
    assert {c["name"] for c in prof["cases"]} == {"b4_t64", "b2_t128", "b8_t32"}
    assert "<svg" in html.read_text() and "LayerNorm(128)" in html.read_text()


@pytest.mark.slow
def test_profile_cli_bad_model_is_one_line(tmp_path):
    bad = tmp_path / "bad_model.py"
    bad.write_text("import torch\nclass Model(torch.nn.Module):\n"
                   "    def __init__(self):\n        super().__init__()\n"
                   "        raise RuntimeError('no weights file')\n"
                   "def get_inputs():\n    return [torch.zeros(2)]\n"
                   "def get_init_inputs():\n    return []\n")
    r = _cli("profile", bad)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no weights file" in lines[0] and "bad_model.py" in lines[0]
    r = _cli("profile", tmp_path / "missing.py")
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr
