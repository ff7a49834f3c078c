"""Containment, checked from outside the candidate's process: nothing a job does reaches the
driver, other evaluations, the compile cache, secrets, or the machine after its job ends.

The corpus (tests/corpus/, tests/test_corpus.py) checks each attack's verdict layer by layer;
the tests here check what matters to the user directly: the planted library never runs, a
tampered cache entry is rebuilt, no secret leaves under any name, the driver returns, no job
process survives, and job children hold nothing but their own descriptors.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import CORPUS, TEST_STAGE_TIMEOUTS, example
from kernelevolve import knobs
from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
from kernelevolve.harness.driver.pool import Limits
from kernelevolve.harness.protocol.timing import TimingPolicy
from kernelevolve.runtime.cpp_cache import LibraryCache, sha256_file

pytestmark = pytest.mark.slow

# What these tests check is containment, not figures: one case of softmax (its smallest) takes a
# candidate through the same gates (load, check, integrity, timing) at a third of the work.
ONE_CASE = ("tail_131x999",)
FAST = EvalOptions(timing=TimingPolicy(min_reps=3, min_time_s=0.05, max_time_s=0.3),
                   only_cases=ONE_CASE)
LAYERS = {"all layers": FAST,
          "no inspection": replace(FAST, static_rules=False, inspect_libraries=False),
          "sandbox only": replace(FAST, static_rules=False, inspect_libraries=False,
                                  syscall_filter=False)}
SECRETS = {"DATABASE_URL": "postgres://app:hunter2-db@db.internal/prod",
           "KE_DB_PASS": "hunter2-pass", "SENTRY_DSN": "https://hunter2-sentry@o1.ingest.io/7",
           "SLACK_WEBHOOK_URL": "https://hooks.slack.invalid/hunter2-slack",
           "KE_INNOCENT_LOOKING": "hunter2-innocent", "OPENAI_API_KEY": "sk-hunter2-openai"}


def _evaluator() -> Evaluator:
    return Evaluator("cpu", limits=Limits(stage_timeouts=dict(TEST_STAGE_TIMEOUTS)), options=FAST)


def _markers(root: Path) -> list[Path]:
    return sorted(root.rglob("kernelevolve_escape_*"))


def _manifests_hold(cache: LibraryCache) -> None:
    for manifest in cache.root.glob("*.json"):
        meta = json.loads(manifest.read_text())
        lib = manifest.with_suffix(".so")
        assert sha256_file(lib) == meta["sha256"], f"{lib.name} does not match its manifest"


# ---- the compile cache -----------------------------------------------------------------------

def test_planted_library_is_not_loaded_by_the_next_evaluation(private_cache):
    with _evaluator() as ev:
        for name, opts in LAYERS.items():
            planted = ev.evaluate(example("softmax"), CORPUS / "bad_cache_plant.py", options=opts)
            good = ev.evaluate(example("softmax"), CORPUS / "good_softmax_cpp.py")
            assert good.accepted, good.reason
            assert not _markers(private_cache), f"{name}: the planted library ran"
            if name == "sandbox only":  # the plant ran and failed: the cache is read-only
                assert planted.accepted, planted.reason
            else:
                assert planted.stage == "load", (name, planted.reason)
    _manifests_hold(LibraryCache(private_cache / "harness"))
    _manifests_hold(LibraryCache(private_cache / "cpp"))


def test_tampered_cache_entries_are_rebuilt_never_loaded(private_cache, tmp_path):
    """Something outside the harness rewrites cached libraries (a library whose constructor
    leaves a marker): the hash check rebuilds them, so the marker never appears."""
    from kernelevolve.runtime import load_cpp

    with _evaluator() as ev:
        assert ev.evaluate(example("softmax"), CORPUS / "good_softmax_cpp.py").accepted
    marker = tmp_path / "kernelevolve_escape_tampered"
    with knobs.override(KERNELEVOLVE_CACHE_DIR=str(tmp_path / "elsewhere")):
        hostile = load_cpp(f'''
#include <cstdio>
__attribute__((constructor)) static void ran() {{
    FILE* f = std::fopen("{marker}", "w"); if (f) std::fclose(f);
}}
extern "C" int ke_warm_omp() {{ return 1; }}
extern "C" void softmax_rows(const float*, float*, long, long) {{}}
''', name="hostile")
    marker.unlink(missing_ok=True)
    tampered = [*(private_cache / "harness").glob("*.so"), *(private_cache / "cpp").glob("*.so")]
    assert len(tampered) >= 2
    for lib in tampered:
        lib.write_bytes(Path(hostile._name).read_bytes())
    with _evaluator() as ev:
        result = ev.evaluate(example("softmax"), CORPUS / "good_softmax_cpp.py")
    assert result.accepted, result.reason
    assert not marker.exists(), "a tampered cache entry was loaded"
    _manifests_hold(LibraryCache(private_cache / "harness"))
    _manifests_hold(LibraryCache(private_cache / "cpp"))


# ---- the driver never reads a worker's files by path -------------------------------------------

DRIVER_SCRIPT = r'''
import json, sys
from dataclasses import replace
from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
from kernelevolve.harness.protocol.timing import TimingPolicy
fast = EvalOptions(timing=TimingPolicy(min_reps=3, min_time_s=0.05, max_time_s=0.3),
                   only_cases=("tail_131x999",))
layers = [fast, replace(fast, static_rules=False, inspect_libraries=False),
          replace(fast, static_rules=False, inspect_libraries=False, syscall_filter=False)]
out = []
with Evaluator("cpu", options=fast) as ev:
    for path in sys.argv[2:]:
        for opts in layers:
            out.append(ev.evaluate(sys.argv[1], path, options=opts).to_dict())
print(json.dumps(out))
'''


def test_log_symlinks_and_fifos_reach_nothing_in_the_driver(tmp_path, private_cache):
    """The driver, with a secret in its own initial environment (what /proc/self/environ
    shows), evaluates candidates that turn their logs into symlinks and FIFOs: it returns, and
    the secret appears nowhere in what it reports."""
    secret = "sk-hunter2-driver-environ"
    env = {**os.environ, "KE_TEST_DRIVER_TOKEN": secret, "KERNELEVOLVE_CACHE_DIR": str(private_cache)}
    proc = subprocess.run([sys.executable, "-c", DRIVER_SCRIPT, str(example("softmax")),
                           str(CORPUS / "bad_log_symlink.py"), str(CORPUS / "bad_log_fifo.py")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    assert len(results) == 6
    assert secret not in proc.stdout and secret not in proc.stderr
    assert [r["stage"] for r in results[2::3]] == ["accepted", "accepted"]  # sandbox alone


# ---- secrets ------------------------------------------------------------------------------------

def test_secrets_under_any_name_never_leave(monkeypatch, private_cache):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    with _evaluator() as ev:
        results = [ev.evaluate(example("softmax"), CORPUS / "bad_secret_names.py", options=opts)
                   for opts in LAYERS.values()]
        facts = ev.pool.sandbox_facts
    assert facts.scrubbed_vars >= len(SECRETS)
    for result in results[1:]:
        assert result.accepted, result.reason
        assert "DATABASE_URL=" in result.logs.get("check.stdout", "")  # the dump ran
    dumped = json.dumps([r.to_dict() for r in results])
    for value in SECRETS.values():
        assert value not in dumped


def test_sandbox_facts_say_what_contained_the_candidate(evaluator):
    result = evaluator.evaluate(example("softmax"), CORPUS / "good_softmax_cpp.py",
                                options=replace(evaluator.options, only_cases=ONE_CASE))
    facts = result.sandbox
    assert facts.method == "bwrap" and facts.pid_namespace and facts.capabilities == "none"
    assert facts.syscall_filter == "notify"
    assert facts.landlock_abi == _kernel_landlock_abi()  # 0 on kernels without Landlock


def _kernel_landlock_abi() -> int:
    """The kernel's Landlock ABI, asked here (landlock_create_ruleset with the VERSION flag)."""
    import ctypes
    import platform

    if platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("the Landlock probe knows the syscall number on x86_64 and aarch64 only")
    number = {"x86_64": 444, "aarch64": 444}[platform.machine()]
    got = ctypes.CDLL(None, use_errno=True).syscall(number, None, ctypes.c_size_t(0),
                                                    ctypes.c_uint32(1))
    return max(got, 0)


# ---- what the filter allows --------------------------------------------------------------------

MAKEDIRS_CANDIDATE = '''
import ctypes
import os

import torch
import torch.nn as nn

from kernelevolve.runtime import load_cpp, ptr

os.makedirs(os.getcwd(), exist_ok=True)  # exists: answered EEXIST, harmless
if {create}:
    os.makedirs(os.path.join(os.environ["TMPDIR"], "new_folder"), exist_ok=True)

lib = load_cpp(r"""
#include <cstdint>
extern "C" void copy(const float* x, float* y, int64_t n) {{ for (int64_t i = 0; i < n; ++i) y[i] = x[i]; }}
""", name="makedirs_copy")
lib.copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]


class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        lib.copy(ptr(x.contiguous()), ptr(y), x.numel())
        return y
'''


def test_makedirs_of_an_existing_folder_passes_a_new_one_is_refused(evaluator, write):
    problem = write("identity.py", "import torch\nimport torch.nn as nn\n\n"
                    "class Model(nn.Module):\n    def forward(self, x):\n        return x.clone()\n\n"
                    "def get_inputs():\n    return [torch.randn(64)]\n\n"
                    "def get_init_inputs():\n    return []\n")
    opts = replace(evaluator.options, static_rules=False)
    fine = evaluator.evaluate(problem, write("exists.py", MAKEDIRS_CANDIDATE.format(create=False)),
                              options=replace(opts, integrity=replace(opts.integrity,
                                                                      allow_no_kernel=True)))
    assert fine.stage in ("accepted", "integrity"), fine.reason   # not stopped by the filter
    assert "syscall filter" not in fine.reason
    refused = evaluator.evaluate(problem, write("creates.py",
                                                MAKEDIRS_CANDIDATE.format(create=True)), options=opts)
    assert refused.stage == "load" and "`mkdir(" in refused.reason, refused.reason
    assert "new_folder" in refused.reason  # the path, read from the stopped thread
