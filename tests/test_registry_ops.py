"""The kernel registry's operations on a real run's kernel: the CLI (promote, list, show,
set-state and its errors), revalidation (a problem that now rejects the kernel, compiler drift),
a registry of a newer kernelevolve, and a Triton kernel served through the interpreter.

The kernel comes from the session's one search (conftest.py's `rmsnorm_run`); each test
promotes into a registry of its own.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3

import pytest
import torch

from conftest import PROBLEMS, run_cli
from kernelevolve.problem import import_module
from kernelevolve.registry import Registry, RegistryError
from kernelevolve.registry import patching
from kernelevolve.registry.promote import promote
from kernelevolve.store import Store
from registry_parts import QUICK


@pytest.mark.slow
def test_cli_promote_list_show_set_state_and_errors(searched, tmp_path):
    ws, run_id, _ = searched
    registry = str(tmp_path / "reg")
    out = run_cli("promote", "last", "--workspace", str(ws), "--registry", registry,
                  "--name", "norm", "--force")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("promoted norm v1 (shadow)")
    listed = json.loads(run_cli("registry", "list", "--registry", registry, "--json").stdout)
    assert [(r["name"], r["version"], r["state"]) for r in listed] == [("norm", 1, "shadow")]
    out = run_cli("registry", "set-state", "norm", "default", "--registry", registry,
                  "--why", "shadow clean for a day")
    assert out.stdout.strip() == "norm v1 is now default"
    shown = run_cli("registry", "show", "norm", "--registry", registry).stdout
    assert "input 0: float32 [63..256 x 1024..2048] on cpu, contiguous" in shown
    assert "shadow -> default" in shown and "shadow clean for a day" in shown
    for args, message in [
            (("registry", "show", "nope"), "no kernel named 'nope'"),
            (("registry", "set-state", "norm", "live"), "unknown state 'live'"),
            (("promote", "r-missing", "--workspace", str(ws)), "no run r-missing")]:
        out = run_cli(*args, "--registry", registry)
        assert out.returncode == 2 and message in out.stderr, (args, out.stderr)
        assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_revalidate_demotes_a_kernel_its_problem_now_rejects_and_keeps_a_good_one(
        reg, searched, tmp_path):
    strict = tmp_path / "strict_rmsnorm.py"
    shutil.copy(searched[2], strict)
    problem = {**reg.get("rmsnorm").entry["problem"], "path": str(strict)}
    entry = {**reg.get("rmsnorm").entry, "problem": problem}
    reg.add("strict", entry, state="default", who="test")
    strict.write_text(strict.read_text() + '\nTOLERANCE = {"atol": 0.0, "rtol": 0.0}\n')
    from kernelevolve.registry.revalidate import revalidate

    reports = {r["name"]: r for r in revalidate(reg, who="test", timing=QUICK)}
    good, bad = reports["rmsnorm"], reports["strict"]
    assert good["verdict"] == "kept" and good["why"].startswith("passed: ")
    assert bad["verdict"] == "demoted" and bad["problem_changed"]
    assert bad["why"].startswith("rejected at correctness")
    assert reg.get("rmsnorm").state == "default" and reg.get("strict").state == "retired"
    drift = good["drift"]
    assert drift["compiler"][0]["rebuilt"] and drift["compiler"][0]["same_binary"]
    assert drift["hardware"] == {}
    kinds = [(e.name, e.kind) for e in reg.events() if e.kind in ("revalidate", "demote")]
    assert kinds == [("rmsnorm", "revalidate"), ("strict", "demote")]


def test_registry_of_a_newer_kernelevolve_is_refused(tmp_path):
    Registry.open(tmp_path / "r").close()
    with sqlite3.connect(tmp_path / "r" / "registry.db") as conn:
        conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(RegistryError.__mro__[1], match="upgrade kernelevolve or use another "
                                                       "--registry"):
        Registry.open(tmp_path / "r")


@pytest.mark.slow
def test_revalidate_runs_the_registered_binary_when_a_rebuild_differs(reg, searched):
    """Compiler drift, simulated: the registered library is a different (still valid) binary
    than what this compiler rebuilds, so both go through the gates and both are reported."""
    entry = json.loads(json.dumps(reg.get("rmsnorm").entry))
    lib = entry["libraries"][0]
    other = reg.objects.path(lib["object"]).read_bytes() + b"\0" * 64  # trailing bytes: loads
    lib.update(sha256=hashlib.sha256(other).hexdigest(), object=reg.objects.put(other),
               compiler="g++ (an older one) 11.0")
    reg.add("rmsnorm", entry, state="default", who="test")
    from kernelevolve.registry.revalidate import revalidate

    report, = revalidate(reg, ["rmsnorm"], timing=QUICK)
    drift, = report["drift"]["compiler"]
    # The subject is drift: both binaries pass every gate. Whether each still beats eager is a
    # timing verdict (QUICK timing): on a loaded machine it may be "no longer beats", never a
    # rejection at a gate (CI saw a demotion once, with two test workers busy).
    for said in (report, drift["registered_binary"]):
        assert said["verdict"] == "kept" or said["why"].startswith("no longer beats"), report
    assert report["version"] == 2
    assert drift["rebuilt"] and not drift["same_binary"]
    assert drift["compiler_then"] == "g++ (an older one) 11.0"
    assert drift["compiler_now"].startswith("g++")
    assert drift["old_binary_loads"] == "yes"


@pytest.mark.slow
def test_a_triton_kernel_is_served_through_the_interpreter(tmp_path):
    """The GPU language's path on CPU: a Triton kernel (checked, unmeasured here, so promoted
    with force) is loaded from the registry and served; the interpreter runs it."""
    import kernelevolve
    from conftest import EXAMPLES

    run = kernelevolve.optimize(str(PROBLEMS / "registry_rmsnorm.py"), workspace=tmp_path / "ws",
                                seeds=[str(EXAMPLES / "rmsnorm" / "candidate_triton.py")],
                                max_evals=1, operators=["tune"])
    with Store.open(tmp_path / "ws") as store, Registry.open(tmp_path / "reg") as registry:
        with pytest.raises(RegistryError, match="not a safe win .* pass --force"):
            promote(store, registry, run.id, node=1)
        rec = promote(store, registry, run.id, node=1, force=True, state="default", name="tnorm")
        assert (rec.language, rec.entry["libraries"]) == ("triton", [])
        patching.reset_coverage()
        net = torch.nn.Sequential(import_module(PROBLEMS / "registry_rmsnorm.py").Model(1024, 1e-6))
        x = torch.randn(64, 1024)
        with torch.no_grad(), patching.patched(net.eval(), registry):
            got = net(x)
        torch.testing.assert_close(got, type(net[0]).forward(net[0], x), atol=1e-5, rtol=1e-5)
    assert patching.coverage("tnorm")["served"] == 1
