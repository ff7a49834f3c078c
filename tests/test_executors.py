"""Executor choice without a cluster: slot planning rules, configuration and one-line errors.

Everything that needs a running Ray instance is in tests/test_ray_executor.py.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import PROBLEMS, run_cli
from kernelevolve.config import RunConfig, build_config
from kernelevolve.errors import ExecutorError, UsageError
from kernelevolve.executors.ray_cluster import ActorPlan, plan_actors

PROBLEM = PROBLEMS / "tunable_scale.py"
CANDIDATE = PROBLEMS / "tunable_scale_candidate.py"


GPU = {"GPU": 1}  # what the cuda and rocm platforms declare (Platform.ray_resources)


def nodes(*resources: tuple[int, int]) -> list[dict]:
    return [{"node_id": f"n{i}", "ip": "10.0.0.%d" % i, "CPU": cpu, "GPU": gpu}
            for i, (cpu, gpu) in enumerate(resources)]


# ---- slot planning --------------------------------------------------------------------------

def test_gpu_platforms_get_one_actor_per_gpu():
    cluster = nodes((16, 0), (64, 8), (64, 4))  # a CPU head and two GPU workers
    assert plan_actors(cluster, resources=GPU, workers=None, threads=None) == ActorPlan(
        12, num_cpus=1, num_gpus=1, threads=None)
    assert plan_actors(cluster, resources=GPU, workers=3, threads=None).count == 3
    with pytest.raises(UsageError, match=r"--workers 13: the Ray cluster has 12 GPU\(s\)"):
        plan_actors(cluster, resources=GPU, workers=13, threads=None)
    with pytest.raises(ExecutorError, match="no GPU.*ray start --address"):
        plan_actors(nodes((16, 0)), resources=GPU, workers=None, threads=None)


def test_the_builtin_platforms_declare_their_ray_resources():
    from kernelevolve.plugins import get_platform

    assert get_platform("cpu").ray_resources == {}
    assert get_platform("cuda").ray_resources == get_platform("rocm").ray_resources == GPU
    plan = plan_actors(nodes((16, 0), (64, 2)), GPU, workers=None, threads=None)
    assert plan.options(3) == {"num_cpus": 1, "num_gpus": 1, "max_restarts": 3}


def test_a_device_ray_does_not_know_gets_one_actor_per_unit_of_its_own_resource():
    cluster = nodes((16, 0), (64, 0), (64, 0))
    cluster[1]["npu"], cluster[2]["npu"] = 4.0, 2.0
    plan = plan_actors(cluster, {"npu": 1}, workers=None, threads=None)
    assert plan == ActorPlan(6, num_cpus=1, num_gpus=0, threads=None, resources={"npu": 1})
    assert plan.options(0) == {"num_cpus": 1, "num_gpus": 0, "max_restarts": 0,
                               "resources": {"npu": 1}}
    assert plan_actors(cluster, {"npu": 2}, workers=None, threads=None).count == 3
    with pytest.raises(UsageError, match=r"--workers 7: the Ray cluster has 6 npu\(s\)"):
        plan_actors(cluster, {"npu": 1}, workers=7, threads=None)
    with pytest.raises(ExecutorError, match="no npu: start npu workers"):
        plan_actors(nodes((16, 0)), {"npu": 1}, workers=None, threads=None)


def test_cpu_clusters_default_to_one_actor_per_node_using_its_cpus():
    # The default matches a default local worker: all of a node's CPUs for one evaluation.
    assert plan_actors(nodes((8, 0), (8, 0)), resources={}, workers=None, threads=None) == \
        ActorPlan(2, num_cpus=8, num_gpus=0, threads=8)
    # --workers N shares the CPUs, as N local workers do (2 per actor here).
    assert plan_actors(nodes((8, 0), (8, 0)), resources={}, workers=8, threads=None) == \
        ActorPlan(8, num_cpus=2, num_gpus=0, threads=2)
    # An explicit thread count (KERNELEVOLVE_THREADS) sets the slot size.
    assert plan_actors(nodes((8, 0), (4, 0)), resources={}, workers=None, threads=4).count == 3
    with pytest.raises(UsageError, match=r"--workers 5: the Ray cluster's 4 CPU\(s\) hold 4"):
        plan_actors(nodes((2, 0), (2, 0)), resources={}, workers=5, threads=None)
    with pytest.raises(ExecutorError, match="no CPU"):
        plan_actors(nodes((0, 1)), resources={}, workers=None, threads=None)


def test_planning_reads_the_thread_knob(monkeypatch):
    monkeypatch.setenv("KERNELEVOLVE_THREADS", "2")
    assert plan_actors(nodes((8, 0)), resources={}, workers=None) == ActorPlan(
        4, num_cpus=2, num_gpus=0, threads=2)


# ---- configuration --------------------------------------------------------------------------

def test_config_keeps_the_executor_and_address(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('executor = "local"\nworkers = 2\n')
    config = build_config(cfg, {})
    assert (config.executor, config.ray_address, config.workers) == ("local", None, 2)
    again = RunConfig.from_dict(config.to_dict())  # what resume reads back from the store
    assert (again.executor, again.ray_address, again.workers) == ("local", None, 2)
    # A run stored before executors existed resumes on the local pool.
    old = config.to_dict()
    del old["executor"], old["ray_address"]
    assert RunConfig.from_dict(old).executor == "local"
    assert RunConfig().workers is None  # default: 1 locally, the cluster's slots on Ray


def test_bad_executor_settings_are_one_line_usage_errors():
    with pytest.raises(UsageError, match=r"--executor 'slurm': choose one of local, ray"):
        build_config(None, {"executor": "slurm"})
    with pytest.raises(UsageError, match="--ray-address needs --executor ray"):
        build_config(None, {"ray_address": "10.0.0.1:6379"})


def test_executor_ray_without_ray_installed_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(UsageError) as err:
        build_config(None, {"executor": "ray"})
    assert str(err.value) == ("--executor ray: ray is not installed: "
                              "pip install 'kernelevolve[ray]'")


@pytest.mark.slow
def test_cli_executor_errors_exit_2_with_one_line(tmp_path):
    ws = tmp_path / "ws"
    r = run_cli("optimize", str(PROBLEM), "--seed-candidate", str(CANDIDATE), "--executor",
                "slurm", "--workspace", str(ws), timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == ["error: --executor 'slurm': choose one of local, ray"]
    r = run_cli("optimize", str(PROBLEM), "--ray-address", "127.0.0.1:6379", "--workspace",
                str(ws), timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == ["error: --ray-address needs --executor ray"]
    # Without ray installed (hidden from this interpreter), `--executor ray` says how to get it.
    code = ("import sys; sys.modules['ray'] = None; from kernelevolve.cli import main; "
            "sys.argv = ['kernelevolve'] + sys.argv[1:]; main()")
    r = subprocess.run([sys.executable, "-c", code, "optimize", str(PROBLEM), "--executor", "ray",
                        "--workspace", str(ws)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: --executor ray: ray is not installed: pip install 'kernelevolve[ray]'"]
    assert not ws.exists()  # refused before a workspace was written


@pytest.mark.slow
def test_an_unreachable_ray_address_is_a_one_line_error_at_once(tmp_path):
    pytest.importorskip("ray")
    r = run_cli("optimize", str(PROBLEM), "--seed-candidate", str(CANDIDATE), "--executor", "ray",
                "--ray-address", "127.0.0.1:1", "--workspace", str(tmp_path / "ws"), timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        "error: --ray-address 127.0.0.1:1: cannot reach the Ray cluster: Connection refused"]
    r = run_cli("runs", "--workspace", str(tmp_path / "ws"), "--json", timeout=120)
    assert '"status": "interrupted"' in r.stdout  # resumable once the cluster is up


@pytest.mark.slow
def test_resume_with_a_ray_address_needs_a_ray_run(tmp_path):
    from kernelevolve.run import Run

    run = Run.create(PROBLEM, RunConfig(), seeds=[CANDIDATE], workspace=tmp_path / "ws")
    run.store.close()
    r = run_cli("resume", run.id, "--workspace", str(tmp_path / "ws"), "--ray-address",
                "127.0.0.1:6379", timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        f"error: --ray-address: run {run.id} evaluates with the local executor, not ray"]
