"""Platforms and languages as plug-ins (issue 17): the registry, and a toy platform and a toy
language from a package outside kernelevolve (tests/plugins/toy_pkg, found through its
entry points) driving `kernelevolve eval` and `optimize` end to end, as real subprocesses."""
from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest

from conftest import run_cli
from outcomes import assert_measured_exit
from one_finalist import one_finalist_config
from kernelevolve import plugins
from kernelevolve.errors import PlatformError

HERE = Path(__file__).resolve().parent
TOY_PKG = HERE / "plugins" / "toy_pkg"
TOY_CANDIDATE = HERE / "plugins" / "toy_relu.py"
RELU = HERE / "problems" / "kb_level1_relu.py"
SRC = HERE.parent / "src" / "kernelevolve"
# With the toy package on the path (absolute: the sandboxed worker starts elsewhere).
TOY_ENV = {"PYTHONPATH": os.pathsep.join(
    [str(TOY_PKG), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])}


def test_builtins_are_registered_and_unknown_names_list_them():
    assert plugins.platform_names()[:3] == ("cpu", "cuda", "rocm")
    assert set(plugins.language_names()) >= {"python", "cpp", "triton", "cuda-cpp", "hip"}
    for name in plugins.platform_names()[:3]:
        plat = plugins.get_platform(name)
        assert plat.name == name and plat.default_language in plat.languages
        assert all(lang in plugins.language_names() for lang in plat.languages)
    with pytest.raises(PlatformError, match=r"^unknown platform 'npu'; registered platforms: "
                                            r"cpu, cuda, rocm"):
        plugins.get_platform("npu")
    with pytest.raises(PlatformError, match=r"^unknown language 'tlx'; registered languages: "
                                            r"python, cpp, triton"):
        plugins.get_language("tlx")


@pytest.mark.parametrize("source, platform, expected", [
    ("import triton\n", "cpu", "triton"),
    ("from kernelevolve.runtime import load_cpp\nload_cpp('')\n", "cpu", "cpp"),
    ("from kernelevolve.runtime import load_cpp\nload_cpp('')\n", "cuda", "cpp"),
    ("from torch.utils.cpp_extension import load_inline\nload_inline()\n", "cuda", "cuda-cpp"),
    ("from torch.utils.cpp_extension import load_inline\nload_inline()\n", "rocm", "hip"),
    ("from torch.utils.cpp_extension import load_inline\nload_inline()\n", "cpu", "cuda-cpp"),
    ("import torch\n", "cuda", "python"),
])
def test_each_language_detects_its_own_candidates(source, platform, expected):
    assert plugins.detect_language(ast.parse(source), platform) == expected


@pytest.mark.slow
def test_targets_lists_builtins_and_the_toy_plugin():
    bare = run_cli("targets", "--json")
    assert bare.returncode == 0, bare.stderr
    names = [p["name"] for p in json.loads(bare.stdout)["platforms"]]
    assert names == ["cpu", "cuda", "rocm"]  # without the toy package on the path: not there
    proc = run_cli("targets", env=TOY_ENV)
    assert proc.returncode == 0, proc.stderr
    assert "toy " in proc.stdout and "entry point toy_kernelevolve.platform:ToyPlatform" in \
        proc.stdout
    assert "toyl " in proc.stdout and "toy-kernelevolve 0.1" in proc.stdout


@pytest.mark.slow
def test_unknown_platform_is_one_line_listing_the_registered_ones():
    proc = run_cli("eval", str(RELU), str(TOY_CANDIDATE), "--platform", "npu", env=TOY_ENV)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "error: unknown platform 'npu'; registered platforms: cpu, cuda, rocm, toy"]


@pytest.mark.slow
def test_eval_on_the_toy_platform_in_the_toy_language(tmp_path):
    out = tmp_path / "result.json"
    proc = run_cli("eval", str(RELU), str(TOY_CANDIDATE), "--platform", "toy", "--seed", "1",
                   "--json", str(out), "--timing-cap", "0.3", env=TOY_ENV)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["accepted"] and result["language"] == "toyl"
    assert result["speedup"] is not None  # toy times toyl: a real measurement
    fp = result["fingerprint"]
    assert fp["platform"] == "toy" and fp["toy_firmware"] == "1.0" and fp["toykern"] == "0.1"
    # the toy language's launch counter was read: the candidate launched kernels
    assert "toy" in json.dumps(result["integrity"])


@pytest.mark.slow
def test_the_toy_language_is_refused_on_a_platform_that_does_not_run_it():
    proc = run_cli("eval", str(RELU), str(TOY_CANDIDATE), "--platform", "cpu", env=TOY_ENV)
    assert proc.returncode == 1
    assert "toyl candidates cannot run on the cpu platform" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_optimize_on_the_toy_platform(tmp_path):
    out = tmp_path / "summary.json"
    proc = run_cli("optimize", str(RELU), "--seed-candidate", str(TOY_CANDIDATE),
                   "--platform", "toy", "--operator", "tune", "--max-evals", "3", "--quiet",
                   "--config", str(one_finalist_config(tmp_path)),  # no verdict asserted
                   "--workspace", str(tmp_path / "ws"), "--json", str(out), env=TOY_ENV)
    summary = json.loads(out.read_text())
    assert_measured_exit(proc.returncode, summary, proc.stdout + proc.stderr)
    assert summary["platform"] == "toy"
    assert summary["funnel"]["accepted"] == 3
    assert summary["operators"]["ran"] == {"seed": 1, "tune": 2}  # tune rewrote CHUNKS twice


# ---- only platforms/ and languages/ name a vendor or a language ---------------------------------
NAMES = {"triton", "cpp", "cuda", "cuda-cpp", "rocm", "hip", "nvidia", "amd"}
# Modules that implement one language (its runtime, its code generator): named after it, they
# are the language's own code, which its Language class points at.
IMPLEMENTATIONS = ("runtime/triton_guard.py", "runtime/triton_bounds.py", "runtime/cpp.py",
                   "runtime/cpp_cache.py", "runtime/inline_guard.py", "synth/")
# torch API paths that happen to contain a vendor's name (torch.cuda.cudart, torch.cuda's
# is_initialized), and the static gate's allow-list of the `triton` module's members: module
# paths the gate and the seeding read, not a branch on a platform or a language.
TORCH_PATHS = {("harness/gates/static_allow.py", "cuda"), ("harness/worker/session.py", "cuda"),
               ("harness/gates/static_members.py", "triton")}


def _named(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text())
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value.lower() in NAMES]


def test_only_platforms_and_languages_name_a_vendor_or_a_language():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(("platforms/", "languages/", "plugins.py")) or \
                rel.startswith(IMPLEMENTATIONS):
            continue
        found += [f"{rel}:{line}: {value!r}" for line, value in _named(path)
                  if (rel, value) not in TORCH_PATHS]
    assert not found, "branch on a name outside platforms/ and languages/:\n" + "\n".join(found)


@pytest.mark.slow
def test_a_broken_plugin_is_named_not_a_traceback(tmp_path):
    info = tmp_path / "broken_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[kernelevolve.platforms]\n"
                                           "npu = no_such_module.platform:NpuPlatform\n"
                                           "[kernelevolve.languages]\n"
                                           "cpp = no_such_module.language:Cpp\n")
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), *TOY_ENV["PYTHONPATH"].split(
        os.pathsep)[1:]])}
    listed = run_cli("targets", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    rows = {r["name"]: r for r in json.loads(listed.stdout)["platforms"]}
    assert "ModuleNotFoundError" in rows["npu"]["error"]
    langs = {r["name"]: r for r in json.loads(listed.stdout)["languages"]}
    assert langs["cpp"]["source"] == "built-in"  # a plug-in cannot replace a built-in
    proc = run_cli("eval", str(RELU), str(TOY_CANDIDATE), "--platform", "npu", env=env)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error: platform 'npu' (no_such_module.platform:NpuPlatform) failed to load: "
        "ModuleNotFoundError: No module named 'no_such_module'"]


PROBE = """
import ast, json, sys
from kernelevolve.operators.prompt import PromptBuilder
from kernelevolve.harness.gates.static_rules import find_violations
from kernelevolve.knowledge.notes import language_tags, platform_tags
from kernelevolve.plugins import get_platform
src = "import toykern\\n"
print(json.dumps({
    "contract": PromptBuilder(sys.argv[1], "toy", "toyl").contract(),
    "violations": find_violations(ast.parse(src), src, "c.py"),
    "tags": [platform_tags(), language_tags()],
    "env": get_platform("toy").worker_env(1).get("OMP_NUM_THREADS"),
}))
"""


@pytest.mark.slow
def test_the_toy_language_reaches_the_prompt_the_allow_list_and_the_notes():
    import subprocess
    import sys

    def probe(env):
        out = subprocess.run([sys.executable, "-c", PROBE, str(RELU)], capture_output=True,
                             text=True, env={**os.environ, **env}, timeout=120)
        return out

    got = probe(TOY_ENV)
    assert got.returncode == 0, got.stderr
    data = json.loads(got.stdout)
    assert "`toykern.relu(x, chunks=N)`" in data["contract"]
    assert "## Candidate contract" in data["contract"]  # the common rules come first
    assert data["violations"] == []                     # toykern is on the allow-list
    assert "toy" in data["tags"][0] and "toyl" in data["tags"][1]
    assert data["env"] == "1"
    bare = probe({})  # without the plug-in there is no toy platform (resolved first)
    assert bare.returncode != 0
    assert "unknown platform 'toy'; registered platforms: cpu, cuda, rocm" in bare.stderr


# ---- a non-CPU device, and a language added to a built-in platform (issue 28) -------------------
# tests/plugins/toy_device_pkg: the `toydev` accelerator (in-process timing with its own
# synchronize, its own Ray resource and stream module) with its `toydl` language;
# tests/plugins/toy_lang_pkg: the `toyc` language, declaring that it runs on the built-in `cpu`.
TOY_DEVICE_ENV = {"PYTHONPATH": os.pathsep.join(
    [str(HERE / "plugins" / "toy_device_pkg"), *TOY_ENV["PYTHONPATH"].split(os.pathsep)[1:]])}
TOY_LANG_ENV = {"PYTHONPATH": os.pathsep.join(
    [str(HERE / "plugins" / "toy_lang_pkg"), *TOY_ENV["PYTHONPATH"].split(os.pathsep)[1:]])}


def _eval_json(tmp_path, candidate: str, platform: str, env: dict) -> dict:
    out = tmp_path / "result.json"
    proc = run_cli("eval", str(RELU), str(HERE / "plugins" / candidate), "--platform", platform,
                   "--seed", "1", "--json", str(out), "--timing-cap", "0.3",  # no figure checked
                   env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())


@pytest.mark.slow
def test_eval_on_a_toy_accelerator_times_in_process_with_its_own_synchronize(tmp_path):
    result = _eval_json(tmp_path, "toydl_relu.py", "toydev", TOY_DEVICE_ENV)
    assert result["accepted"] and result["language"] == "toydl"
    assert result["speedup"] is not None
    # measured by the in-process protocol (Platform.measurement), not from outside
    assert result["integrity"]["profile_unavailable"].startswith("in-process timing")
    assert {k: result["fingerprint"][k] for k in ("platform", "toydev_firmware", "toydev")} == \
        {"platform": "toydev", "toydev_firmware": "2.0", "toydev": "0.1"}
    assert all(run == {"toydev": 1} for run in result["integrity"]["launches"]["default"])


@pytest.mark.slow
def test_a_language_added_to_the_cpu_platform_is_evaluated_there(tmp_path):
    result = _eval_json(tmp_path, "toyc_relu.py", "cpu", TOY_LANG_ENV)
    assert result["accepted"] and result["language"] == "toyc"
    assert result["speedup"] is not None  # Language.timed: the cpu platform measures it
    assert result["integrity"].get("profile_unavailable") is None  # timed from outside
    assert result["fingerprint"]["toycpu"] == "0.3"
    assert all(run == {"toycpu": 1} for run in result["integrity"]["launches"]["default"])


DEVICE_PROBE = """
import ast, json, sys
from types import SimpleNamespace
from kernelevolve.executors.ray_executor import actor_plan
from kernelevolve.harness.gates.static_rules import find_violations
from kernelevolve.operators.prompt import TIMING, PromptBuilder
from kernelevolve.target import resolve
target = resolve("toydev", "toydl")
node = {"Alive": True, "NodeID": "n1", "NodeManagerAddress": "10.0.0.1",
        "Resources": {"CPU": 16.0, "toydev": 2.0, "node:10.0.0.1": 1.0}}
ray = SimpleNamespace(nodes=lambda: [node, {**node, "NodeID": "n2", "Resources": {"CPU": 8.0}}])
plan = actor_plan(ray, "toydev", None, None)
src = "import toydev\\ns = toydev.Stream()\\n"
target_text = PromptBuilder(sys.argv[1], target, "toydl")._target(SimpleNamespace(fingerprint={}))
print(json.dumps({
    "device": target.device, "language": target.language_name,
    "measurement": target.platform.measurement, "options": plan.options(2),
    "count": plan.count, "violations": find_violations(ast.parse(src), src, "c.py"),
    "outside_note": TIMING in target_text,
    "cpu": list(resolve("cpu").platform.languages),
}))
"""


@pytest.mark.slow
def test_the_toy_accelerator_declares_its_resource_stream_and_timing():
    import subprocess
    import sys

    got = subprocess.run([sys.executable, "-c", DEVICE_PROBE, str(RELU)], capture_output=True,
                         text=True, env={**os.environ, **TOY_DEVICE_ENV}, timeout=120)
    assert got.returncode == 0, got.stderr
    data = json.loads(got.stdout)
    assert data["device"] == "cpu" and data["language"] == "toydl"  # tensors in host memory
    assert data["measurement"] == "inprocess"
    # the Ray executor asks for one unit of the device's own resource per actor, no GPU
    assert data["options"] == {"num_cpus": 1, "num_gpus": 0, "max_restarts": 2,
                               "resources": {"toydev": 1}}
    assert data["count"] == 2  # two toydev units in the cluster
    assert "toydev.Stream is not allowed: device streams hide work" in \
        json.dumps(data["violations"])
    assert data["outside_note"] is False  # the outside-timing note is the cpu platform's
    assert data["cpu"] == ["cpp", "triton", "python"]  # toydev adds no language to cpu


@pytest.mark.slow
def test_targets_shows_the_declared_properties_and_the_joined_language():
    both = os.pathsep.join([str(HERE / "plugins" / "toy_device_pkg"),
                            TOY_LANG_ENV["PYTHONPATH"]])
    proc = run_cli("targets", "--json", env={"PYTHONPATH": both})
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    rows = {r["name"]: r for r in found["platforms"]}
    assert rows["cpu"]["languages"] == ["cpp", "triton", "python", "toyc"]
    assert rows["cpu"]["measured"] == ["cpp", "python", "toyc"]
    assert {n: (rows[n]["measurement"], rows[n]["ray_resources"]) for n in rows} == {
        "cpu": ("outside", {}), "cuda": ("inprocess", {"GPU": 1}),
        "rocm": ("inprocess", {"GPU": 1}), "toydev": ("inprocess", {"toydev": 1})}
    langs = {r["name"]: r for r in found["languages"]}
    assert langs["toyc"]["platforms"] == ["cpu"] and langs["toydl"]["platforms"] == []


def test_a_language_declaring_a_platform_joins_its_languages(monkeypatch):
    from kernelevolve.languages.base import Language

    class Extra(Language):
        name = "extra"
        platforms = ("cpu",)
        timed = False

    monkeypatch.setattr(plugins, "languages", lambda: [Extra()])  # as if registered
    plugins.get_platform.cache_clear()
    try:
        plat = plugins.get_platform("cpu")
        assert plat.languages == ("cpp", "triton", "python", "extra")
        assert "extra" not in plat.measured_languages  # declared untimed
        with pytest.raises(PlatformError, match=r"^language 'hip' does not run on the cpu "
                                                r"platform; it runs cpp, triton, python, extra"):
            from kernelevolve.target import resolve
            resolve("cpu", "hip")
    finally:
        plugins.get_platform.cache_clear()
