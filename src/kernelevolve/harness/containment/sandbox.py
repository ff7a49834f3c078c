"""Worker isolation, driver side: the environment a worker gets and the commands that start one.

`bwrap` (bubblewrap) gives every worker server its own user, PID, network, IPC and UTS namespaces
with no capabilities, and a file system built from an allowlist (harness/containment/allowlist.py): the
system's libraries, the Python installation and the harness's own packages, read-only; the
compile cache (read-only: only the driver writes it) and the worker's job folder (read-only: the
driver writes each job's inputs there); a minimal /dev, its own /proc, and a private tmpfs
scratch, the one writable place. Nothing else exists inside: not the user's current folder, not
the problem's folder, not $HOME, /opt or any project tree. `unshare` gives only the network
(and, where permitted, user and PID) namespaces; `none` runs unprotected and says so in every
result's sandbox facts. In every mode the job child's Landlock rules allow reads beneath the
same allowlist only (`readable`).

Compilers run in a sandbox of their own (`compiler_prefix`): the system and toolchain only, no
network, a single writable build folder, under memory, CPU-time and file-size limits
(harness/compile_limits.py).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from kernelevolve import knobs
from kernelevolve.errors import SandboxError
from kernelevolve.harness.containment import allowlist

# A name on the allowlist is still dropped when it looks like a secret (belt and braces).
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
_PROXY = re.compile(r"^(https?|ftp|all|no)_proxy$", re.IGNORECASE)


def is_sensitive(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in _SECRET_WORDS) or bool(_PROXY.match(name))


def worker_env(extra: dict[str, str] | None = None, base: dict[str, str] | None = None,
               also_drop: tuple[str, ...] = ()) -> tuple[dict[str, str], int]:
    """The environment a worker gets: only the allowlisted names of `base` (knobs.py), none
    that looks like a secret or is in `also_drop` (an API-key variable), plus `extra`.
    Returns it and how many variables of `base` were left out."""
    base = dict(os.environ if base is None else base)
    from kernelevolve.plugins import worker_env_names

    names = set(knobs.WORKER_ENV_NAMES) | set(knobs.worker_env_extra()) | set(worker_env_names())
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
    hidden: tuple[str, ...] = ()    # folders to empty should a mapped one hold them (Ray's)
    shown: tuple[str, ...] = ()     # the platform's own read-only paths (Platform.sandbox_paths)


SANDBOX_MODES = ("auto", "bwrap", "unshare", "none")


def plan(mode: str, layout: Layout, devices: list[str]) -> SandboxPlan:
    """Choose the isolation method; `auto` takes the strongest available and warns if none."""
    if mode not in SANDBOX_MODES:
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
    """What the interpreter needs to import the harness and torch (harness/containment/allowlist.py)."""
    return allowlist.python_paths()


def readable(layout: Layout, devices: list[str]) -> list[str]:
    """Everything a worker's job may read: the allowlist, its job folder, the compile cache,
    the scratch, /proc (the sandbox's own under bwrap) and the device nodes it is given.
    Landlock's read rules in the job child (harness/worker/child.py) are built from this list."""
    return allowlist.outermost([
        *allowlist.worker([str(layout.jobs), str(layout.cache), str(layout.scratch),
                           *allowlist.existing(layout.shown)]), "/proc",
        *allowlist.existing(allowlist.DEVICES), *allowlist.existing(devices)])


def _mounts(shown: list[str], hidden: tuple[str, ...] = ()) -> list[str]:
    """bwrap arguments for a root file system holding `shown` (read-only) and nothing else:
    a fresh /dev and /proc, an empty /tmp, links kept as links. A `hidden` folder that a shown
    one happens to hold is emptied."""
    cmd = [shutil.which("bwrap") or "bwrap", "--dev", "/dev", "--proc", "/proc",
           "--tmpfs", "/dev/shm", "--tmpfs", "/tmp"]
    shown = allowlist.outermost(p for p in shown if not allowlist.under(p, ["/dev", "/proc"]))
    hide = [os.path.realpath(h) for h in hidden if h and os.path.isdir(h)]
    hide = [h for h in hide if any(allowlist.under(h, [s]) and h != s for s in shown)]
    ops = [(p, "bind") for p in shown] + [(h, "tmpfs") for h in hide]
    for path, op in sorted(ops, key=lambda o: (len(o[0]), o[0])):  # parents first
        if op == "tmpfs":
            cmd += ["--tmpfs", path]
        elif os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        else:
            cmd += ["--ro-bind", path, path]
    return cmd


def _bwrap_worker(layout: Layout, devices: list[str]) -> list[str]:
    layout.cache.mkdir(parents=True, exist_ok=True)
    layout.jobs.mkdir(parents=True, exist_ok=True)
    layout.scratch.mkdir(parents=True, exist_ok=True)
    cache = os.path.realpath(layout.cache)
    jobs, scratch = os.path.realpath(layout.jobs), os.path.realpath(layout.scratch)
    hidden = (*layout.hidden, str(Path.home()))
    cmd = _mounts(allowlist.worker([cache, jobs, *allowlist.existing(layout.shown)]), hidden)
    cmd += ["--tmpfs", scratch]
    for dev in devices:
        if os.path.exists(dev):
            cmd += ["--dev-bind", dev, dev]
    cmd += ["--remount-ro", "/", *_BWRAP_NS, "--die-with-parent", "--new-session"]
    if _bwrap_supports("--disable-userns"):
        cmd += ["--disable-userns"]
    return cmd


def compiler_prefix(workdir: Path | None, mode: str | None = None,
                    readonly: tuple[Path, ...] = ()) -> list[str]:
    """The command prefix that runs a compiler (or objdump) on candidate code: no network, the
    system and toolchain only (harness/containment/allowlist.py), `workdir` its only writable folder,
    `readonly` visible. Without bubblewrap, `unshare -n` where permitted; nothing with
    `--sandbox none` (the source checks of harness/gates/cpp_rules.py still apply)."""
    mode = mode or knobs.sandbox_mode()
    if mode == "none":
        return []
    if mode in ("auto", "bwrap") and bwrap_available():
        cmd = _mounts(allowlist.compiler([str(p) for p in readonly]), (str(Path.home()),))
        if workdir is not None:
            work = os.path.realpath(workdir)
            cmd += ["--bind", work, work, "--chdir", work]
        return [*cmd, "--remount-ro", "/", *_BWRAP_NS, "--die-with-parent", "--new-session"]
    return unshare_command() or []


def compiler_env(workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if knobs.compiler_env_names(k)}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(TMPDIR=str(workdir), HOME=str(workdir))
    return env


def temp_root(prefix: str) -> Path:
    return Path(tempfile.mkdtemp(prefix=prefix))
