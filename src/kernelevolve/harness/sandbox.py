"""Worker isolation, driver side: the environment a worker gets and the commands that start one.

`bwrap` (bubblewrap) gives every worker server its own user, PID, network, IPC and UTS namespaces
with no capabilities, and a read-only view of the machine in which `$HOME`, `/tmp`, `/var/tmp`,
`/run` (daemon sockets), the workspace and the pool's own folder are replaced by empty tmpfs;
only what Python needs to import the harness is mapped back (read-only), plus the compile cache
(read-only: only the driver writes it) and the worker's job folder (read-only: the driver writes
each job's inputs there). The one writable place is a private tmpfs scratch. `unshare` gives only
the network (and, where permitted, user and PID) namespaces; `none` runs unprotected and says so
in every result's sandbox facts.

Compilers run in a sandbox of their own (`compiler_prefix`): the same read-only view, no network,
and a single writable build folder.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kernelevolve import knobs
from kernelevolve.errors import SandboxError

# A name on the allowlist is still dropped when it looks like a secret (belt and braces).
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
_PROXY = re.compile(r"^(https?|ftp|all|no)_proxy$", re.IGNORECASE)
# Hidden under bwrap whatever else is mapped: credentials in $HOME are covered by hiding $HOME.
_HIDDEN_ROOTS = ("/tmp", "/var/tmp", "/run")


def is_sensitive(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS) or bool(_PROXY.match(name))


def worker_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None,
               also_drop: tuple[str, ...] = ()) -> tuple[dict[str, str], int]:
    """The environment a worker gets: only the allowlisted names of `base` (knobs.py), none
    that looks like a secret or is in `also_drop` (an API-key variable), plus `extra`.
    Returns it and how many variables of `base` were left out."""
    base = dict(os.environ if base is None else base)
    names = set(knobs.WORKER_ENV_NAMES) | set(knobs.worker_env_extra())
    env = {k: v for k, v in base.items()
           if (k in names or k.startswith(knobs.WORKER_ENV_PREFIXES))
           and not is_sensitive(k) and k not in also_drop}
    removed = len(base) - len(env)
    env.update(extra or {})
    return env, removed


@lru_cache(maxsize=None)
def _works(cmd: tuple[str, ...]) -> bool:
    try:
        return subprocess.run([*cmd, "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


_BWRAP_NS = ("--unshare-user", "--unshare-net", "--unshare-pid", "--unshare-ipc",
             "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL")


def bwrap_available() -> bool:
    path = shutil.which("bwrap")
    return bool(path) and _works((path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
                                  "/proc", *_BWRAP_NS, "--die-with-parent"))


@lru_cache(maxsize=None)
def _bwrap_supports(option: str) -> bool:
    try:
        out = subprocess.run([shutil.which("bwrap") or "bwrap", "--help"], capture_output=True,
                             text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in out.stdout


def unshare_command() -> list[str] | None:
    path = shutil.which("unshare")
    if not path:
        return None
    # A user namespace first: without one a root driver's worker would keep its capabilities.
    for cmd in ((path, "-r", "-n", "-p", "-f", "--mount-proc"), (path, "-r", "-n"), (path, "-n")):
        if _works(cmd):
            return list(cmd)
    return None


@dataclass
class SandboxPlan:
    method: str
    prefix: list[str] = field(default_factory=list)
    network_isolated: bool = False
    filesystem_readonly: bool = False
    pid_namespace: bool = False
    warnings: list[str] = field(default_factory=list)


@dataclass
class Layout:
    """The paths a worker's sandbox is built around."""

    jobs: Path                      # driver-written job inputs (read-only inside)
    scratch: Path                   # the sandbox's private tmpfs (the only writable place)
    cache: Path                     # compile cache (read-only inside)
    hidden: tuple[str, ...] = ()    # more folders to replace by an empty tmpfs


def plan(mode: str, layout: Layout, devices: list[str]) -> SandboxPlan:
    """Choose the isolation method; `auto` takes the strongest available and warns if none."""
    if mode not in ("auto", "bwrap", "unshare", "none"):
        raise SandboxError(f"unknown sandbox mode {mode!r}; use auto, bwrap, unshare or none")
    if mode in ("auto", "bwrap") and bwrap_available():
        return SandboxPlan("bwrap", _bwrap_worker(layout, devices), True, True, True)
    if mode == "bwrap":
        raise SandboxError("bubblewrap (bwrap) is not usable here; install it "
                           "(apt-get install bubblewrap) or choose --sandbox unshare")
    if mode in ("auto", "unshare"):
        cmd = unshare_command()
        if cmd:
            warn = [] if mode == "unshare" else [
                "bubblewrap unavailable: network isolated with unshare, but the rest of the "
                "machine is visible (read-only to candidates only through Landlock and the "
                "syscall filter); install bubblewrap"]
            return SandboxPlan("unshare", cmd, True, False, "-p" in cmd, warn)
        if mode == "unshare":
            raise SandboxError("`unshare -n` is not permitted here; install bubblewrap or run "
                               "with --sandbox none (unprotected)")
    return SandboxPlan("none", [], False, False, False, [
        "NO SANDBOX: candidates run with network access and see the whole machine (Landlock and "
        "the syscall filter still apply); install bubblewrap (apt-get install bubblewrap)"])


def python_paths() -> list[str]:
    """What the interpreter needs to import the harness and torch, whatever is hidden."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)),
             str(Path(__file__).resolve().parents[2])]
    paths += [p for p in sys.path if p and os.path.exists(p)]
    return _outermost(os.path.realpath(p) for p in paths)


def _outermost(paths) -> list[str]:
    kept: list[str] = []
    for p in sorted(set(paths), key=len):
        if not any(p == k or p.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(p)
    return kept


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _hiding(extra: tuple[str, ...]) -> list[str]:
    roots = [*_HIDDEN_ROOTS, str(Path.home()), *extra]
    roots = [os.path.realpath(r) for r in roots if r and os.path.isdir(r)]
    return [r for r in _outermost(roots) if r != "/"]


def _base(hidden: list[str], readonly: list[str]) -> list[str]:
    cmd = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev",
           "--proc", "/proc", "--tmpfs", "/dev/shm"]
    for root in hidden:
        cmd += ["--tmpfs", root]
    for path in readonly:
        if _under(path, hidden) and os.path.exists(path):
            cmd += ["--ro-bind", path, path]
    return cmd


def _bwrap_worker(layout: Layout, devices: list[str]) -> list[str]:
    hidden = _hiding((*layout.hidden, str(layout.jobs.parent)))
    layout.cache.mkdir(parents=True, exist_ok=True)
    layout.jobs.mkdir(parents=True, exist_ok=True)
    layout.scratch.mkdir(parents=True, exist_ok=True)
    cache = os.path.realpath(layout.cache)
    cmd = _base(hidden, [*python_paths(), cache])
    if not _under(cache, hidden):
        cmd += ["--ro-bind", cache, cache]
    jobs, scratch = os.path.realpath(layout.jobs), os.path.realpath(layout.scratch)
    cmd += ["--ro-bind", jobs, jobs, "--tmpfs", scratch]
    for dev in devices:
        if os.path.exists(dev):
            cmd += ["--dev-bind", dev, dev]
    cmd += [*_BWRAP_NS, "--die-with-parent", "--new-session"]
    if _bwrap_supports("--disable-userns"):
        cmd += ["--disable-userns"]
    return cmd


def compiler_prefix(workdir: Path | None, mode: str | None = None,
                    readonly: tuple[Path, ...] = ()) -> list[str]:
    """The command prefix that runs a compiler (or objdump) on candidate code: no network,
    nothing secret visible, `workdir` its only writable folder, `readonly` visible. Without
    bubblewrap, `unshare -n` where permitted; nothing with `--sandbox none`."""
    mode = mode or knobs.sandbox_mode()
    if mode == "none":
        return []
    if mode in ("auto", "bwrap") and bwrap_available():
        hidden = _hiding(())
        shown = [os.path.realpath(p) for p in readonly]
        cmd = _base(hidden, [*python_paths(), *shown])
        for path in shown:
            if not _under(path, hidden):
                cmd += ["--ro-bind", path, path]
        if workdir is not None:
            work = os.path.realpath(workdir)
            cmd += ["--bind", work, work, "--chdir", work]
        return [*cmd, *_BWRAP_NS, "--die-with-parent", "--new-session"]
    return unshare_command() or []


def compiler_env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if knobs.compiler_env_names(k)}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(TMPDIR=str(workdir), HOME=str(workdir))
    return env


def temp_root(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
