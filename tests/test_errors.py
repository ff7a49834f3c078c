"""One error hierarchy: user errors are one line and exit 2; a kernelevolve bug shows its
traceback, asks for a report and exits 70 (never 1, eval's "rejected"). The CLI runs as a real
subprocess; the internal failure is injected into a command, as a fault, before `main()`."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kernelevolve import errors
from kernelevolve.store.errors import EvaluationExistsError, StoreError

# The fault goes into `kernelevolve runs` (its body runs inside the same `_user_errors()` handler
# as every command's): a command that imports no torch, so each process starts in well under a
# second (the `synth --explain` it used before loaded a problem, torch included: ~2 s of CPU).
INJECT = """
import sys
from kernelevolve import cli
import kernelevolve.report.runs as runs

def broken(*a, **k):
    raise {exc}
runs.print_runs = broken
sys.argv = ["kernelevolve", "runs", "--workspace", {workspace!r}]
cli.main()
"""


def _run_with(exc: str, workspace: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", INJECT.format(exc=exc, workspace=workspace)],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """The workspace the injected `runs` is given (never created: the fault comes first)."""
    return str(tmp_path_factory.mktemp("errors") / "ws")


@pytest.mark.slow
def test_an_internal_failure_shows_its_traceback_and_exits_70(workspace):
    proc = _run_with("RuntimeError('invariant broken')", workspace)
    assert proc.returncode == 70, proc.stderr
    assert "Traceback" in proc.stderr and "RuntimeError: invariant broken" in proc.stderr
    assert "is a bug in kernelevolve" in proc.stderr and "kernelevolve version" in proc.stderr


@pytest.mark.slow
def test_a_broken_invariant_of_the_store_is_internal(workspace):
    assert issubclass(EvaluationExistsError, errors.InternalError)
    assert not issubclass(EvaluationExistsError, errors.KernelevolveError)
    proc = _run_with("__import__('kernelevolve.store.errors', fromlist=['x'])"
                     ".EvaluationExistsError('node 3 already has an evaluation')", workspace)
    assert proc.returncode == 70 and "Traceback" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_user_errors_stay_one_line_with_exit_2(workspace):
    proc = _run_with("__import__('kernelevolve.errors', fromlist=['x'])"
                     ".UsageError('--frobnicate: no such thing; use --help')", workspace)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["error: --frobnicate: no such thing; use --help"]
    assert issubclass(StoreError, errors.KernelevolveError)


@pytest.mark.slow
def test_an_os_error_about_a_path_is_the_users_and_one_without_is_ours(workspace):
    about_path = _run_with("PermissionError(13, 'Permission denied', '/srv/ws/runs.db')", workspace)
    assert about_path.returncode == 2 and "Traceback" not in about_path.stderr
    assert "Permission denied: '/srv/ws/runs.db'" in about_path.stderr
    no_path = _run_with("ConnectionResetError(104, 'Connection reset by peer')", workspace)
    assert no_path.returncode == 70 and "Traceback" in no_path.stderr


def test_infra_errors_live_with_the_others():
    from kernelevolve.search import engine

    assert engine.InfraError is errors.InfraError
    assert not issubclass(errors.InfraError, (errors.KernelevolveError, errors.InternalError))
