"""The sandbox's allowlist of paths, checked from inside real workers and compilers: nothing of
the user's (planted secrets, the driver's and the problem's folders, $HOME) exists for them.
(Split from tests/test_sandbox.py, which kept the environment, network and mode tests.)"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from kernelevolve import knobs
from kernelevolve.harness.driver.pool import WorkerPool
from test_sandbox import _reference_params


# ---- the allowlist of paths: nothing of the user's exists for a worker or a compiler ---------

ALLOWLIST_PROBE = '''
import os

import torch
import torch.nn as nn

TARGETS = {targets!r}  # planted secret files: driver's folder, problem folders, /opt
FOLDERS = {folders!r}  # the driver's folder, the problem's, $HOME, /opt, /srv


def _readable(path):
    try:
        with open(path, "rb") as fh:
            fh.read(1)
        return 1.0
    except OSError:
        return 0.0


def _listable(path):
    try:
        os.listdir(path)
        return 1.0
    except OSError:
        return 0.0


def probe():
    facts = [_readable(p) for p in TARGETS] + [_listable(p) for p in FOLDERS]
    facts.append(_readable("/etc/shadow"))
    import kernelevolve.harness.containment.allowlist  # noqa: F401  (the harness's own package)
    facts.append(float(torch.ones(4).sum().item() == 4.0))
    facts.append(_readable(os.__file__))  # the standard library
    return facts


class Model(nn.Module):
    def forward(self, x):
        return x


def get_inputs():
    return [torch.tensor(probe())]


def get_init_inputs():
    return []
'''


def _allowlist_probe(tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    from conftest import SECRET_PROJECT, secret_file_paths

    (tmp_path / ".env").write_text("OPENAI_API_KEY=next-to-the-problem\n")
    targets = [str(p) for p in secret_file_paths()] + [str(tmp_path / ".env")]
    folders = [os.getcwd(), str(tmp_path), str(SECRET_PROJECT), str(Path.home()), "/opt", "/srv"]
    problem = tmp_path / "allowlist_probe.py"
    problem.write_text(ALLOWLIST_PROBE.format(targets=targets, folders=folders))
    return problem, targets, folders


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["bwrap", "unshare", "none"])
def test_a_worker_reads_nothing_outside_its_allowlist(tmp_path, planted_secrets, mode):
    """From inside a real worker's job: the planted secrets (driver's folder, problem folders,
    /opt) cannot be read, those folders and $HOME cannot be listed, /etc/shadow is unreadable;
    torch, the harness and the standard library work. Under bwrap the mounts and Landlock
    stand; under unshare and none there are no mounts and Landlock's read rules hold alone."""
    from kernelevolve.harness.containment import sandbox

    if mode == "bwrap" and not sandbox.bwrap_available():
        pytest.skip("bubblewrap is not usable here")
    if mode == "unshare" and not sandbox.unshare_command():
        pytest.skip("unshare is not permitted here")
    problem, targets, folders = _allowlist_probe(tmp_path)
    assert all(Path(t).read_text() for t in targets[1:])  # planted, readable from outside
    with WorkerPool("cpu", sandbox_mode=mode) as pool:
        landlock = pool.sandbox_facts.landlock_abi
        out = pool.run("reference", _reference_params(problem))
    assert out.status == "ok", out.describe()
    facts = out.result["cases"]["default"]["outputs"][0][0].tolist()
    n, m = len(targets), len(folders)
    if mode != "bwrap" and landlock < 1:
        pytest.skip("this kernel has no Landlock: only the bwrap mounts keep files out")
    assert facts[:n] == [0.0] * n, dict(zip(targets, facts))
    assert facts[n:n + m] == [0.0] * m, dict(zip(folders, facts[n:]))
    assert facts[n + m:] == [0.0, 1.0, 1.0]  # /etc/shadow no; torch and the stdlib yes


@pytest.mark.slow
def test_the_mounts_alone_hold_only_the_allowlist(tmp_path, planted_secrets):
    """The bwrap mounts without Landlock: the user's folders, /opt, /srv, /home and /etc/shadow
    do not exist; /etc holds only the loader's and libc's files; the harness still imports."""
    import json
    import subprocess
    import sys

    from kernelevolve.harness.containment import allowlist, sandbox

    if not sandbox.bwrap_available():
        pytest.skip("bubblewrap is not usable here")
    problem, targets, folders = _allowlist_probe(tmp_path)
    layout = sandbox.Layout(tmp_path / "w" / "jobs", tmp_path / "w" / "scratch",
                            tmp_path / "cache")
    code = ("import json, os, sys, torch, kernelevolve.harness.worker.jobs\n"
            "paths, folders = json.loads(sys.argv[1])\n"
            "print(json.dumps({'exists': [p for p in paths if os.path.exists(p)],"
            " 'listed': [os.path.join(f, e) for f in folders if os.path.isdir(f)"
            " for e in os.listdir(f)], 'etc': sorted(os.listdir('/etc'))}))\n")
    paths = [*targets, folders[2], str(problem), "/opt", "/srv", "/home", "/etc/shadow"]
    proc = subprocess.run([*sandbox._bwrap_worker(layout, []), sys.executable, "-c", code,
                           json.dumps([paths, [os.getcwd(), str(Path.home())]])],
                          capture_output=True, text=True, timeout=300, cwd=layout.jobs)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout)
    assert seen["exists"] == []
    # the driver's folder and $HOME exist only as the way to a mapped package, if at all
    mapped = allowlist.worker([str(layout.jobs), str(layout.cache)])
    assert all(any(m.startswith(entry + "/") or m == entry for m in mapped)
               for entry in seen["listed"]), seen["listed"]
    assert set(seen["etc"]) <= {Path(p).name for p in allowlist.ETC}


@pytest.mark.slow
def test_the_compile_sandbox_sees_no_project_folder(tmp_path, planted_secrets):
    """The compiler's sandbox: the planted secrets and the user's folders do not exist there,
    /etc/shadow neither, and g++ still builds."""
    import subprocess

    from conftest import secret_file_paths
    from kernelevolve.harness.containment import sandbox

    if not sandbox.bwrap_available():
        pytest.skip("bubblewrap is not usable here")
    work = tmp_path / "build"
    work.mkdir()
    prefix = sandbox.compiler_prefix(work, "bwrap")
    for path in [*secret_file_paths(), Path.cwd(), Path.home(), Path("/etc/shadow")]:
        proc = subprocess.run([*prefix, "test", "-e", str(path)], timeout=60)
        assert proc.returncode == 1, f"{path} is visible to the compiler"
    (work / "k.cpp").write_text('#include <cmath>\nextern "C" double f(double x) '
                                '{ return std::exp(x); }\n')
    proc = subprocess.run([*prefix, knobs.cxx(), "-O2", "-fPIC", "-shared", "k.cpp", "-o",
                           "k.so"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (work / "k.so").is_file()


def test_every_link_of_a_chain_is_mapped(tmp_path):
    """A venv's bin/python3 -> /root/.pyenv/.../bin/python3 -> python3.11: the middle link must
    be inside too, or bwrap cannot find the interpreter (seen: CI in a fresh venv)."""
    from kernelevolve.harness.containment import allowlist

    real = tmp_path / "base" / "python3.11"
    real.parent.mkdir()
    real.write_text("")
    (tmp_path / "base" / "python3").symlink_to("python3.11")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / "python3").symlink_to(tmp_path / "base" / "python3")
    got = allowlist._real([str(tmp_path / "venv" / "python3")])
    base = os.path.realpath(tmp_path)
    assert got == [f"{base}/venv/python3", f"{base}/base/python3", f"{base}/base/python3.11"]
