"""The kernel registry end to end: promote a real run's kernel, patch a model, fall back, shadow,
canary, rollback, and refuse tampered artifacts (its CLI, revalidation and Triton serving:
test_registry_ops.py).

One real search (the synthesizer on a small RMSNorm, one evaluation; conftest.py's
`rmsnorm_run`, shared with test_registry_ops.py and test_share.py) feeds every test; each test
promotes into a registry of its own, so states never leak between tests.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3

import pytest
import torch

from conftest import run_cli
from kernelevolve.registry import Registry, RegistryError
from kernelevolve.registry import patching
from kernelevolve.registry.promote import promote
from kernelevolve.registry.region import Region
from kernelevolve.store import Store
from registry_parts import Net, add_version as _add_version, model_cls as _model_cls


@pytest.mark.slow
def test_promote_records_what_serving_needs(reg, searched):
    rec = reg.get("rmsnorm")
    e = rec.entry
    assert (rec.version, rec.state, rec.language) == (1, "default", "cpp")
    assert e["provenance"]["run"] == searched[1] and e["provenance"]["operator"] == "synth"
    lib, = e["libraries"]
    assert lib["compiler"].startswith("g++") and "-fno-math-errno" in lib["flags"]
    assert hashlib.sha256(reg.objects.path(lib["object"]).read_bytes()).hexdigest() == lib["sha256"]
    assert e["problem"]["sha256"] == hashlib.sha256(searched[2].read_bytes()).hexdigest()
    assert e["fingerprint"]["platform"] == "cpu" and e["evaluation"]["interval"][0] > 0
    # the region spans the cases: batch 63..256 and dim 1024..2048, odd sizes tried
    x, = e["region"]["args"]
    assert [(d["min"], d["max"], d["multiple"]) for d in x["dims"]] == [(63, 256, 1),
                                                                        (1024, 2048, 1)]
    assert e["region"]["varied"] == ["input 0 dim 0", "input 0 dim 1"]
    assert [b["init"] for b in e["binding"]] == [[1024, 1e-6], [2048, 1e-6], [1537, 1e-6]]
    events = reg.events("rmsnorm")
    assert [(ev.kind, ev.to_state, ev.who) for ev in events] == [("promote", "default", "test")]


def test_promote_refuses_a_rejected_node_and_a_changed_problem(searched, tmp_path):
    ws, run_id, problem = searched
    with Store.open(ws) as store, Registry.open(tmp_path / "r") as registry:
        with pytest.raises(RegistryError, match="node 0 .* was not accepted"):
            promote(store, registry, run_id, node=0)
    # the shared search's problem is left alone (other files promote from it, maybe in another
    # worker): a copy of its workspace points the run at a copy of the problem, then edits that
    mine = shutil.copytree(ws, tmp_path / "ws")
    edited = tmp_path / "rmsnorm.py"
    edited.write_text(problem.read_text() + "\n# edited\n")
    with sqlite3.connect(mine / "kernelevolve.db") as conn:
        conn.execute("UPDATE runs SET problem_path = ? WHERE id = ?", (str(edited), run_id))
    with Store.open(mine) as store, Registry.open(tmp_path / "r") as registry:
        with pytest.raises(RegistryError, match="changed since run"):
            promote(store, registry, run_id, force=True)
        assert registry.names() == []


def test_patched_model_matches_the_original_and_counts_calls(reg, searched):
    cls = _model_cls(searched)
    net = Net(cls).eval()
    x = torch.randn(100, 1024)
    with torch.no_grad():
        want = net(x)
        with patching.patched(net, reg) as session:
            assert [(r["path"], r["default"]["version"], r["default"]["refused"])
                    for r in session.report()] == [("norm", 1, None)]
            got = net(x)
            assert type(net.norm) is cls  # the module is kept, only its forward is replaced
            assert set(net.state_dict()) == {"norm.weight", "proj.weight", "proj.bias"}
        assert "forward" not in vars(net.norm)  # unpatched on leaving the block
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    cov = patching.coverage("rmsnorm")
    assert cov["calls"] == 1 and cov["served"] == 1
    # the saving is the promotion's own figures for the nearest case (eager minus kernel ms),
    # not a timing of this call: it may be negative where the kernel lost on a busy machine
    timed = {c["name"]: c for c in reg.get("rmsnorm").entry["evaluation"]["cases"]}
    assert any(cov["time_saved_ms"] == pytest.approx(c["ref_ms"] - c["cand_ms"], abs=1e-6)
               for c in timed.values() if c.get("ref_ms") and c.get("cand_ms"))


def test_weights_are_shared_and_init_inputs_inferred(reg, searched):
    """dim 1536 was never a case but lies in the validated range: Model(1536, eps) is inferred
    from the weight's shape, and the kernel computes with the module's own (updated) weight."""
    net = Net(_model_cls(searched), dim=1536).eval()
    x = torch.randn(64, 1536)
    with torch.no_grad(), patching.patched(net, reg):
        net.norm.weight.mul_(2.0)
        got = net.norm(x)
        want = type(net.norm).forward(net.norm, x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert patching.coverage("rmsnorm")["served"] == 1


def test_a_module_built_differently_is_not_patched(reg, searched):
    net = Net(_model_cls(searched), eps=1e-5).eval()
    with torch.no_grad(), patching.patched(net, reg) as session:
        net(torch.randn(64, 1024))
    refused = session.report()[0]["default"]["refused"]
    assert refused == "module: Model is not the validated module: its eps is 1e-05, " \
                      "validated 1e-06"
    assert patching.coverage("rmsnorm")["fallbacks"] == {"module": 1}


def test_out_of_region_calls_fall_back_and_are_counted(reg, searched):
    net = Net(_model_cls(searched)).eval()
    norm = net.norm
    with torch.no_grad(), patching.patched(net, reg):
        for x in (torch.randn(8, 1024),           # batch below the validated 63
                  torch.randn(100, 1024).double(),  # dtype
                  torch.randn(1024, 100).t(),      # not contiguous
                  torch.randn(2, 50, 1024),        # rank
                  torch.randn(100, 1024)):         # inside
            want = type(norm).forward(norm, x)
            torch.testing.assert_close(norm(x), want, atol=1e-5, rtol=1e-5)
        with torch.enable_grad():
            norm(torch.randn(100, 1024))            # the weight wants gradients
    cov = patching.coverage("rmsnorm")
    assert cov["fallbacks"] == {"autograd": 1, "dtype": 1, "layout": 1, "shape": 2}
    assert cov["served"] == 1 and cov["calls"] == 6


def test_region_needs_the_divisor_the_cases_had():
    region = Region.from_calls([[torch.empty(8, 64)], [torch.empty(32, 64)]], "cpu")
    assert region.admits([torch.empty(16, 64)]) is None
    assert region.admits([torch.empty(12, 64)]) == "shape"  # 12 is no multiple of 8
    assert region.admits([torch.empty(40, 64)]) == "shape"  # above the range
    assert region.admits([torch.empty(16, 63)]) == "shape"  # a fixed dim
    assert region.admits([torch.empty(16, 64), 1]) == "arguments"


def test_fingerprint_mismatch_falls_back(reg, searched):
    fp = {**reg.get("rmsnorm").entry["fingerprint"], "device": "Some Other CPU 9000"}
    _add_version(reg, "rmsnorm", "default", fingerprint=fp)
    net = Net(_model_cls(searched)).eval()
    x = torch.randn(100, 1024)
    with torch.no_grad(), patching.patched(net, reg) as session:
        out = net.norm(x)
    torch.testing.assert_close(out, type(net.norm).forward(net.norm, x))
    report = session.report()[0]["default"]
    assert report["version"] == 2 and report["refused"].startswith(
        "fingerprint: device differs: measured on 'Some Other CPU 9000'")
    assert patching.coverage("rmsnorm")["fallbacks"] == {"fingerprint": 1}


def _wrong(src: str) -> str:
    """The kernel with its output scaled by 1.01: plausible, and wrong."""
    return src.replace("        return mul_1", "        return mul_1 * 1.01")


def test_shadow_catches_a_wrong_kernel_and_demotes_it(reg, searched):
    _add_version(reg, "rmsnorm", "shadow", source_edit=_wrong)
    net = Net(_model_cls(searched)).eval()
    x = torch.randn(100, 1024)
    with torch.no_grad(), patching.patched(net, reg) as session:
        want = type(net.norm).forward(net.norm, x)
        torch.testing.assert_close(net.norm(x), want)  # shadow serves the original
        assert session.dispatchers[0].trial is None       # demoted at the first mismatch
        net.norm(x)                                       # now v1 (default) serves
    assert reg.get("rmsnorm", 2).state == "retired"
    demote = [e for e in reg.events("rmsnorm") if e.kind == "demote"]
    assert len(demote) == 1 and demote[0].why.startswith("shadow: 1 mismatch(es) in 1 compared")
    assert "max abs err" in demote[0].why or "mismatch" in demote[0].why
    cov = patching.coverage("rmsnorm")
    assert cov["shadow"]["mismatches"] == 1 and cov["shadow"]["first"][0]["shapes"] == [[100, 1024]]
    assert cov["served_by_version"] == {"1": 1}


def test_shadow_keeps_a_right_kernel(reg, searched):
    _add_version(reg, "rmsnorm", "shadow")
    net = Net(_model_cls(searched)).eval()
    with torch.no_grad(), patching.patched(net, reg):
        for _ in range(5):
            net.norm(torch.randn(100, 1024))
    assert reg.get("rmsnorm", 2).state == "shadow"
    assert patching.coverage("rmsnorm")["shadow"] == {"calls": 5, "mismatches": 0, "first": []}


def test_shadow_says_it_runs_the_original_and_the_kernel(reg, searched):
    """The first serve.py after `promote` (a version in shadow, no default) timed the shadowed
    forward as "patched 269.946 ms (0.06x)" with no word that shadow runs both."""
    from kernelevolve.registry.serving_text import forward_line

    reg.set_state("rmsnorm", 1, "shadow", who="test")
    net = Net(_model_cls(searched)).eval()
    with torch.no_grad(), patching.patched(net, reg) as session:
        net.norm(torch.randn(100, 1024))
        line, = session.explain()
        assert line.startswith("norm: rmsnorm v1 in shadow: on every call the original module "
                               "runs and is served, the kernel runs too"), line
        assert forward_line(session, 1.0, 16.0) == (
            "forward: eager 1.000 ms, patched in shadow 16.000 ms (0.06x): shadow runs the "
            "original (served) and the kernel on every call and compares them, so this is the "
            "cost of checking, not the kernel's speed")
        reg.set_state("rmsnorm", 1, "default", who="test")
        session.refresh()
        assert session.explain() == ["norm: rmsnorm v1 (default) serves the calls inside its "
                                     "validated region; the original module answers the others"]
        assert forward_line(session, 1.0, 0.5) == (
            "forward: eager 1.000 ms, patched 0.500 ms (2.00x)")


@pytest.mark.slow
def test_canary_serves_about_its_share(reg, searched):
    _add_version(reg, "rmsnorm", "canary")
    net = Net(_model_cls(searched)).eval()
    n, share = 400, 0.3
    with torch.no_grad(), patching.patched(net, reg, canary_share=share, seed=1):
        x = torch.randn(64, 1024)
        for _ in range(n):
            net.norm(x)
    cov = patching.coverage("rmsnorm")
    served = cov["served_by_version"]
    sd = (n * share * (1 - share)) ** 0.5
    assert abs(served["2"] - n * share) < 4 * sd, served
    assert served["1"] + served["2"] == n and cov["canary_served"] == served["2"]


def test_rollback_restores_the_previous_version_in_a_live_model(reg, searched):
    _add_version(reg, "rmsnorm", "default")
    assert reg.get("rmsnorm", 1).state == "retired"  # superseded by v2
    net = Net(_model_cls(searched)).eval()
    x = torch.randn(64, 1024)
    with torch.no_grad(), patching.patched(net, reg, refresh_s=0) as session:
        net.norm(x)
        retired, restored = Registry.open(reg.root).rollback("rmsnorm", why="test", who="ops")
        net.norm(x)  # the patched model sees the change made through another connection
        assert session.dispatchers[0].default.record.version == 1
    assert (retired.version, retired.state, restored.version, restored.state) == \
        (2, "retired", 1, "default")
    assert patching.coverage("rmsnorm")["served_by_version"] == {"1": 1, "2": 1}
    reg.rollback("rmsnorm")  # v1 retired; nothing before it
    with pytest.raises(RegistryError, match="no default version to roll back"):
        reg.rollback("rmsnorm")


def test_tampered_artifacts_are_refused(reg, searched):
    lib = reg.get("rmsnorm").entry["libraries"][0]
    path = reg.objects.path(lib["object"])
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.chmod(0o644)
    path.write_bytes(bytes(data))
    net = Net(_model_cls(searched)).eval()
    with pytest.raises(RegistryError, match=r"rmsnorm v1: compiled library synth_rmsnorm-.*\.so "
                                            r"does not match its recorded hash"):
        patching.patch(net, reg)
    assert "forward" not in vars(net.norm)


def test_serving_folders_go_with_a_refused_load_and_with_the_process(reg, tmp_path,
                                                                      monkeypatch):
    """load_kernel writes the verified bytes to a private folder: one per load, left in /tmp
    for good by every serving process and every refused load until they were removed."""
    import subprocess
    import sys
    import tempfile

    from kernelevolve.registry.loader import load_kernel

    served = tmp_path / "served"
    served.mkdir()
    code = ("import sys; from kernelevolve.registry import Registry\n"
            "from kernelevolve.registry.loader import load_kernel\n"
            "reg = Registry.open(sys.argv[1]); k = load_kernel(reg, reg.get('rmsnorm'))\n"
            "print(k.folder, k.folder.is_dir())")
    r = subprocess.run([sys.executable, "-c", code, str(reg.root)], capture_output=True,
                       text=True, timeout=120, env={**os.environ, "TMPDIR": str(served)})
    assert r.returncode == 0 and r.stdout.split()[1] == "True", r.stderr
    assert list(served.iterdir()) == []
    lib = reg.get("rmsnorm").entry["libraries"][0]
    path = reg.objects.path(lib["object"])
    path.chmod(0o644)
    path.write_bytes(b"\0" + path.read_bytes()[1:])
    monkeypatch.setattr(tempfile, "tempdir", str(served))
    with pytest.raises(RegistryError, match="does not match its recorded hash"):
        load_kernel(reg, reg.get("rmsnorm"))
    assert list(served.iterdir()) == []


def test_coverage_flushes_to_the_registry_and_the_cli_shows_it(reg, searched):
    net = Net(_model_cls(searched)).eval()
    with torch.no_grad(), patching.patched(net, reg) as session:
        net.norm(torch.randn(100, 1024))
        net.norm(torch.randn(8, 1024))
        session.flush()
        session.flush()  # nothing new: no second row
    stats = reg.stats("rmsnorm")[("rmsnorm", 1)]
    assert stats["calls"] == 2 and stats["served"] == 1 and stats["fallbacks"] == {"shape": 1}
    out = run_cli("registry", "stats", "--registry", str(reg.root))
    assert out.returncode == 0, out.stderr
    assert "rmsnorm  v1       2      1 (50%)  shape 1" in out.stdout


@pytest.mark.slow
def test_custom_op_is_opaque_to_torch_compile(reg, searched):
    net = Net(_model_cls(searched)).eval()
    seen = []

    def backend(gm, example_inputs):
        seen.extend(str(n.target) for n in gm.graph.nodes)
        return gm

    x = torch.randn(100, 1024)
    with torch.no_grad(), patching.patched(net, reg):
        torch._dynamo.reset()
        got = torch.compile(net, backend=backend, fullgraph=True)(x)
    torch._dynamo.reset()
    assert any(t.startswith("kernelevolve.rmsnorm_v1") for t in seen), seen
    with torch.no_grad():
        torch.testing.assert_close(got, net(x), atol=1e-5, rtol=1e-5)



def test_a_tampered_version_arriving_live_falls_back_instead_of_raising(reg, searched):
    """At patch time a tampered artifact is an error; promoted later into a live model it must
    not break the model's forward: its calls fall back, counted, and the reason is kept."""
    net = Net(_model_cls(searched)).eval()
    x = torch.randn(64, 1024)
    with torch.no_grad(), patching.patched(net, reg, refresh_s=0) as session:
        net.norm(x)
        entry = json.loads(json.dumps(reg.get("rmsnorm", 1).entry))
        entry["libraries"][0]["sha256"] = "0" * 64  # what the registry says != the bytes
        reg.add("rmsnorm", entry, state="default", who="test")
        out = net.norm(x)
        again = patching.patch(net, reg)  # the same modules twice: the second one skips
    torch.testing.assert_close(out, type(net.norm).forward(net.norm, x))
    cov = patching.coverage("rmsnorm")
    assert cov["served_by_version"] == {"1": 1} and cov["fallbacks"] == {"artifact": 1}
    assert "does not match its recorded hash" in session.problems[0]
    assert again.dispatchers == [] and again.report()[0]["skipped"].startswith("already patched")


def test_reset_coverage_zeroes_the_counters_live_dispatchers_still_use():
    """A dispatcher keeps the Coverage object it started with: reset must zero that object,
    not forget it (coverage() came back empty while calls went on being counted)."""
    from kernelevolve.registry.dispatch import Coverage

    live = patching._COVERAGE.setdefault("reset_probe", Coverage("reset_probe"))
    live.calls, live.fallbacks = 3, {"shape": 3}
    patching.reset_coverage()
    assert patching.coverage("reset_probe")["calls"] == 0
    live.calls += 1  # what a dispatcher does on its next call
    assert patching.coverage("reset_probe")["calls"] == 1
    patching._COVERAGE.pop("reset_probe")