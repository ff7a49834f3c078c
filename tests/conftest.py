"""Shared fixtures: one warm sandboxed evaluator per session (starting one costs ~1.5 s)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CORPUS = Path(__file__).resolve().parent / "corpus"
PROBLEMS = Path(__file__).resolve().parent / "problems"

# Triton runs only in its interpreter here (no GPU). Set before anything imports triton: its
# standard-library functions are made interpretable only when the variable is set at import.
os.environ.setdefault("TRITON_INTERPRET", "1")

# A compile cache of the session's own: corpus attacks aim at the cache, and a defence that failed
# must not poison the user's (the driver is the only writer, candidates see it read-only). One
# for both xdist workers (named by the session's run id): the harness's own libraries, the
# machine's measured figures and the kernels both workers evaluate are built once, not once per
# worker. Concurrent drivers share a cache safely (runtime/cpp_cache.py: a lock per key, every
# write a rename), as a user's parallel runs do.
if "KERNELEVOLVE_CACHE_DIR" not in os.environ:
    import tempfile

    _session = os.environ.get("PYTEST_XDIST_TESTRUNUID", "")
    if _session.isalnum():
        _cache = Path(tempfile.gettempdir()) / f"kernelevolve-test-cache-{_session}"
        _cache.mkdir(mode=0o700, exist_ok=True)
        os.environ["KERNELEVOLVE_CACHE_DIR"] = str(_cache)
    else:
        os.environ["KERNELEVOLVE_CACHE_DIR"] = tempfile.mkdtemp(prefix="kernelevolve-test-cache-")

# Quick timing budgets for every run the tests start (optimize, bench, tune-model read
# KERNELEVOLVE_CONFIG when no --config is given): the default final re-measurement alone (30 reps,
# 1-6 s per case, three finalists) was most of a small search's time.
os.environ.setdefault("KERNELEVOLVE_CONFIG", str(Path(__file__).resolve().parent / "quick_timing.toml"))

# Short stage timeouts so the hang tests finish quickly; generous enough for a loaded CI box.
TEST_STAGE_TIMEOUTS = {"start": 60, "problem": 120, "load": 120, "run": 10, "compile": 600,
                       "timing": 120}


def example(name: str) -> Path:
    return EXAMPLES / name / "problem.py"


@pytest.fixture(scope="session")
def evaluator():
    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
    from kernelevolve.harness.driver.pool import Limits
    from kernelevolve.harness.protocol.timing import TimingPolicy

    # Short, but a case whose interval is wider than 1.5 (a busy neighbour) is timed on, up to
    # 1 s: the examples' and the corpus's measured verdicts must not flip with the machine's load
    # (the softmax example read 0.537x, interval 0.495-1.702, after 5 reps beside one).
    options = EvalOptions(timing=TimingPolicy(min_reps=5, min_time_s=0.1, max_time_s=1.0,
                                              tight=1.5))
    ev = Evaluator("cpu", limits=Limits(stage_timeouts=dict(TEST_STAGE_TIMEOUTS)), options=options)
    yield ev
    ev.close()


def _once_per_session(tmp_path_factory, name: str, build) -> dict:
    """What `build(root)` returns (a JSON-able dict), built once per session across xdist
    workers too: the first to take the lock in the session's shared temp folder builds it in
    `root`, the others read what it wrote."""
    import fcntl
    import json

    shared = tmp_path_factory.getbasetemp()
    shared = shared.parent if os.environ.get("PYTEST_XDIST_WORKER") else shared
    root = shared / name
    with open(shared / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = root / "run.json"
        if not done.exists():
            root.mkdir(exist_ok=True)
            done.write_text(json.dumps(build(root)))
        return json.loads(done.read_text())


@pytest.fixture(scope="session")
def rmsnorm_run(tmp_path_factory):
    """(workspace, run id, problem path): one real search (the synthesizer on a copy of
    problems/registry_rmsnorm.py, one evaluation) that test_registry*.py and test_share.py
    promote from, each into registries of their own. Searched once per session, across xdist
    workers too. Nobody edits the copy (a test that needs a changed problem copies it)."""
    import kernelevolve

    def build(root: Path) -> dict:
        problem = root / "rmsnorm.py"
        problem.write_text((PROBLEMS / "registry_rmsnorm.py").read_text())
        run = kernelevolve.optimize(str(problem), workspace=root / "ws", max_evals=1,
                                    operators=["synth"])
        return {"run": run.id, "root": str(root)}

    got = _once_per_session(tmp_path_factory, "rmsnorm_run", build)
    root = Path(got["root"])
    return root / "ws", got["run"], root / "rmsnorm.py"


@pytest.fixture(scope="session")
def tunable_run(tmp_path_factory):
    """One `kernelevolve optimize` (the CLI, the suite's quick timing) of the tune operator over
    the whole 8-point space of problems/tunable_scale_candidate.py from its REPEAT = 64 seed:
    test_optimize.py's end-to-end tests read it, and test_ray_executor.py compares its Ray run's
    verdicts with it. Searched once per session, across xdist workers too; nobody writes to its
    workspace. {"ws", "summary", "proc": the CompletedProcess (returncode, stdout, stderr)}."""
    import json
    import subprocess

    def build(root: Path) -> dict:
        ws, summary = root / "ws", root / "s.json"
        r = run_cli("optimize", str(PROBLEMS / "tunable_scale.py"), "--seed-candidate",
                    str(PROBLEMS / "tunable_scale_candidate.py"), "--operator", "tune",
                    "--max-evals", "8", "--workspace", str(ws), "--json", str(summary),
                    timeout=600)
        return {"ws": str(ws), "summary": str(summary), "rc": r.returncode,
                "stdout": r.stdout, "stderr": r.stderr}

    got = _once_per_session(tmp_path_factory, "tunable_run", build)
    summary = Path(got["summary"])
    return {"ws": Path(got["ws"]),
            "summary": json.loads(summary.read_text()) if summary.exists() else None,
            "proc": subprocess.CompletedProcess([], got["rc"], got["stdout"], got["stderr"])}


@pytest.fixture
def searched(rmsnorm_run):
    """`rmsnorm_run` under the name test_registry*.py use."""
    return rmsnorm_run


@pytest.fixture
def reg(searched, tmp_path):
    """A registry of this test's own holding the session search's kernel as `rmsnorm` v1,
    default (registry_parts.promoted)."""
    from registry_parts import promoted

    yield from promoted(searched, tmp_path)


# Where the secret-file attacks (tests/corpus/bad_secret_file_*.py) look for a project's `.env`:
# the driver's current folder, the problem's own folder, and a folder under /opt. The names are
# fixed so that a candidate can find them; the value is new every session and must never appear
# in anything the harness hands back (result, reason, logs, JSON, prompt).
SECRET_FILE_NAME = "kernelevolve_corpus_secret.env"
SECRET_PROJECT = PROBLEMS / "secret_project"
SECRET_OPT = Path("/opt/kernelevolve_corpus_secret")


def secret_file_paths() -> list[Path]:
    return [Path.cwd() / SECRET_FILE_NAME, SECRET_PROJECT / ".env", SECRET_OPT / ".env"]


@pytest.fixture(scope="session")
def planted_secrets():
    """Plant the session's secret in every place a project's secrets live; yield the secret."""
    import secrets as _secrets

    value = "KE_CORPUS_SECRET_" + _secrets.token_hex(12)
    planted: list[Path] = []
    for path in secret_file_paths():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"OPENAI_API_KEY={value}\n")
            planted.append(path)
        except OSError as exc:  # e.g. /opt not writable for a non-root user
            print(f"planted_secrets: could not write {path}: {exc}")
    yield value
    for path in planted:
        path.unlink(missing_ok=True)
    try:
        SECRET_OPT.rmdir()
    except OSError:
        pass


@pytest.fixture
def private_cache(tmp_path):
    """A compile cache of the test's own (the corpus's cache attacks must not reach the session's)."""
    from kernelevolve import knobs

    with knobs.override(KERNELEVOLVE_CACHE_DIR=str(tmp_path / "cache")):
        yield tmp_path / "cache"


@pytest.fixture
def write(tmp_path):
    """Write a file under tmp_path and return its path."""
    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path
    return _write


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 600):
    import subprocess

    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-m", "kernelevolve.cli", *args], capture_output=True,
                          text=True, cwd=cwd, env=full_env, timeout=timeout)


# The fast tier (`python3 -m pytest -q -m "not slow"`, the edit-test loop) leaves out what takes
# seconds: every test that evaluates through the sandboxed worker pool, or shares a fixture that
# does, is slow by that fact; the others are marked where they are (real CLI runs, searches,
# compiles of many kernels: anything measured at 0.4 s or more).
HEAVY_FIXTURES = {
    "evaluator",
    # module-scoped fixtures that run real CLI evaluations and searches, shared by their tests
    "full_runs", "usage_runs", "first_run", "evals", "wire", "searched",
    # session-scoped: real searches shared across files (and xdist workers)
    "rmsnorm_run", "tunable_run",
}


# The full suite's files, heaviest first (seconds of test time on 2 idle cores, a full run's
# junit summed per file, 2026-12-06): `--dist loadfile` hands each worker the next file in
# collection order (pyproject's addopts turn off xdist's reordering by test count), so the long
# files start first and the short ones fill in at the end; in name order a 60 s file started
# last and one worker idled for its tail. Unlisted files keep their order after these. A hint
# only: a stale figure costs balance, never a test.
FILE_SECONDS = {
    "test_corpus": 240, "test_synth_drafts": 87, "test_ray_executor": 73, "test_optimize": 71,
    "test_measure": 67, "test_model_tune": 64, "test_run_feedback": 63, "test_agent": 62,
    "test_plugins": 59, "test_prompt_context": 54, "test_synth_ops": 52, "test_share": 45,
    "test_registry_ops": 45,  # test_registry.py's 54 s, split (its first file searches: ~20 s)
    "test_llm_operator": 50, "test_resume": 45, "test_containment": 44,
    "test_containment_jobs": 36, "test_containment_runs": 32, "test_aten_suite": 30,
    "test_candidate_text": 28, "test_synth_fuzz": 28, "test_synth": 25, "test_bench": 25,
    "test_synth_argscan": 24, "test_cli": 23, "test_examples": 21, "test_sandbox": 18,
    "test_timing_stats": 17, "test_triton_guard": 16, "test_llm_calls": 16,
    "test_synth_capture": 15, "test_registry": 20,
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
    # a stable sort: each file's tests stay together and in their own order
    items.sort(key=lambda item: -FILE_SECONDS.get(item.path.stem, 0))
