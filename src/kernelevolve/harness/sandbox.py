"""Worker isolation, driver side: the scrubbed environment and the command that starts a worker.

`bwrap` gives a network namespace, a read-only view of the filesystem (writable: the worker's
scratch root and the compile cache) and private pid/ipc namespaces; `unshare -n` gives only the
network namespace; `none` runs unprotected and says so in every result's sandbox facts.
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

from kernelevolve.errors import SandboxError

# Names of variables that must never reach candidate code: secrets by name, and whole provider
# families whose variables configure credentials even when not named like one.
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "COOKIE")
_PROVIDER_PREFIXES = ("OPENAI", "ANTHROPIC", "AZURE", "AWS", "GOOGLE", "GCLOUD", "GEMINI", "HF_",
                      "HUGGING", "MISTRAL", "COHERE", "GROQ", "TOGETHER", "OPENROUTER", "DEEPSEEK",
                      "XAI", "FIREWORKS", "REPLICATE", "VERTEX", "LITELLM", "OLLAMA", "VLLM",
                      "GITHUB", "GH_", "GITLAB", "WANDB", "NPM_", "PYPI", "TWINE",
                      # a Ray actor's variables say how to reach its cluster; a worker needs none
                      "RAY_")
_CREDENTIAL_DIRS = (".ssh", ".aws", ".azure", ".gnupg", ".kube", ".docker", ".config/gcloud",
                    ".config/gh", ".config/openai", ".config/anthropic", ".cache/huggingface",
                    ".ray")  # Ray's cluster authentication token
_CREDENTIAL_FILES = (".netrc", ".git-credentials", ".pypirc", ".npmrc", ".bash_history")
_PROXY = re.compile(r"^(https?|ftp|all|no)_proxy$", re.IGNORECASE)


def is_sensitive(name: str) -> bool:
    upper = name.upper()
    return (any(word in upper for word in _SECRET_WORDS)
            or any(upper.startswith(p) for p in _PROVIDER_PREFIXES)
            or bool(_PROXY.match(name)))


def scrubbed_env(base: dict[str, str] | None = None,
                 extra: dict[str, str] | None = None,
                 also_drop: tuple[str, ...] = ()) -> tuple[dict[str, str], int]:
    """The environment a worker gets: `base` minus anything sensitive (and `also_drop`, e.g.
    an API-key variable with an unusual name), plus `extra`."""
    base = dict(os.environ if base is None else base)
    env = {k: v for k, v in base.items() if not is_sensitive(k) and k not in also_drop}
    removed = len(base) - len(env)
    env.update(extra or {})
    return env, removed


@lru_cache(maxsize=None)
def _works(cmd: tuple[str, ...]) -> bool:
    try:
        return subprocess.run([*cmd, "true"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def bwrap_available() -> bool:
    path = shutil.which("bwrap")
    return bool(path) and _works((path, "--ro-bind", "/", "/", "--dev", "/dev", "--proc",
                                  "/proc", "--unshare-net", "--unshare-pid", "--die-with-parent"))


def unshare_command() -> list[str] | None:
    path = shutil.which("unshare")
    if not path:
        return None
    for cmd in ((path, "-n"), (path, "-rn")):
        if _works(cmd):
            return list(cmd)
    return None


@dataclass
class SandboxPlan:
    method: str
    prefix: list[str] = field(default_factory=list)
    network_isolated: bool = False
    filesystem_readonly: bool = False
    warnings: list[str] = field(default_factory=list)


def plan(mode: str, writable: list[Path], devices: list[str],
         hidden: tuple[str, ...] = ()) -> SandboxPlan:
    """Choose the isolation method; `auto` takes the strongest available and warns if none.

    `hidden`: folders replaced by an empty tmpfs under bwrap (a Ray node's session folder, whose
    unix sockets reach the cluster: a network namespace does not cover path-bound sockets)."""
    if mode not in ("auto", "bwrap", "unshare", "none"):
        raise SandboxError(f"unknown sandbox mode {mode!r}; use auto, bwrap, unshare or none")
    if mode in ("auto", "bwrap") and bwrap_available():
        return SandboxPlan("bwrap", _bwrap_prefix(writable, devices, hidden), True, True)
    if mode == "bwrap":
        raise SandboxError("bubblewrap (bwrap) is not usable here; install it "
                           "(apt-get install bubblewrap) or choose --sandbox unshare")
    if mode in ("auto", "unshare"):
        cmd = unshare_command()
        if cmd:
            warn = [] if mode == "unshare" else [
                "bubblewrap unavailable: network isolated with unshare, but the filesystem is "
                "writable by candidates; install bubblewrap"]
            return SandboxPlan("unshare", cmd, True, False, warn)
        if mode == "unshare":
            raise SandboxError("`unshare -n` is not permitted here; install bubblewrap or run "
                               "with --sandbox none (unprotected)")
    return SandboxPlan("none", [], False, False, [
        "NO SANDBOX: candidates run with network access and a writable filesystem; install "
        "bubblewrap (apt-get install bubblewrap)"])


def _bwrap_prefix(writable: list[Path], devices: list[str],
                  hidden: tuple[str, ...] = ()) -> list[str]:
    # Everything read-only (problem and candidate files may live anywhere, /tmp included), with
    # the usual credential stores hidden, and only the scratch root and cache writable.
    cmd = [shutil.which("bwrap") or "bwrap", "--ro-bind", "/", "/", "--dev", "/dev",
           "--proc", "/proc", "--tmpfs", "/dev/shm"]
    home = Path.home()
    for name in _CREDENTIAL_DIRS:
        if (home / name).is_dir():
            cmd += ["--tmpfs", str(home / name)]
    for name in _CREDENTIAL_FILES:
        if (home / name).is_file():
            cmd += ["--ro-bind", "/dev/null", str(home / name)]
    # Ray's default session folder: its unix sockets reach a local Ray cluster, if one runs here.
    ray_default = os.path.join(tempfile.gettempdir(), "ray")
    for folder in dict.fromkeys((*hidden, ray_default)):
        if os.path.isdir(folder):
            cmd += ["--tmpfs", folder]
    for dev in devices:
        if os.path.exists(dev):
            cmd += ["--dev-bind", dev, dev]
    for path in writable:
        path.mkdir(parents=True, exist_ok=True)
        cmd += ["--bind", str(path), str(path)]
    cmd += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--die-with-parent", "--new-session"]
    return cmd
