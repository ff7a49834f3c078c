"""What a sandboxed process may read: an allowlist of paths, never the disk minus a denylist.

The same list builds the worker's and the compiler's mounts (harness/containment/sandbox.py: nothing else
exists inside) and the job child's Landlock read rules (harness/containment/landlock.py: nothing else can
be opened, which also holds under `--sandbox unshare` and `none`, where there are no mounts).
Absent, whatever they hold: the user's current folder, the problem's folder, /home, /root, /opt,
/srv, /var, project trees, and every file of /etc but the few below.

- the system: /usr and the merged-usr links (/bin, /lib*, /sbin), and the /etc files the loader
  and libc read. Never /etc wholesale: a root driver's worker is uid 0 inside its namespace, and
  uid 0 owns /etc/shadow;
- the Python installation, wherever it lives (a pyenv under /root: only that): the interpreter,
  its libpython, standard library, site-packages and headers (torch.compile builds against them);
- the packages the harness imports from outside the installation (an editable kernelevolve, a
  plug-in on PYTHONPATH): those packages and their metadata only, never the folder they sit in
  (a repo's src/, a PYTHONPATH entry, the current folder);
- hardware facts torch and the fingerprint read: /sys's CPU and NUMA topology, huge pages;
- for the compiler, the toolchain when it lives outside /usr.
The caller adds its own folders (the job folder, the compile cache, a build folder) and /proc
and a minimal /dev, which bwrap makes afresh.
"""
from __future__ import annotations

import functools
import glob
import importlib.util
import os
import shutil
import site
import sys
import sysconfig
from importlib import metadata

from kernelevolve import knobs

SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The loader's cache and configuration, compiler alternatives, the time zone, and the user and
# group names libc resolves (world-readable, no password hashes: those are in /etc/shadow).
ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
       "/etc/localtime", "/etc/timezone", "/etc/passwd", "/etc/group", "/etc/nsswitch.conf")
HARDWARE = ("/sys/devices/system/cpu", "/sys/devices/system/node",
            "/sys/kernel/mm/transparent_hugepage")
# Device nodes a job may open (Landlock; bwrap's own /dev has these and nothing else).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/shm")
_TOO_BROAD = ("/", "/home", "/root", "/opt", "/srv", "/var", "/tmp", "/etc", "/mnt", "/media")


def existing(paths) -> list[str]:
    """The paths that exist, each once, in order."""
    return [p for p in dict.fromkeys(paths) if p and os.path.lexists(p)]


def system() -> list[str]:
    return existing([*SYSTEM, *ETC, *HARDWARE])


@functools.lru_cache(maxsize=None)
def python_installation() -> tuple[str, ...]:
    """The interpreter, libpython, the standard library, site-packages and the headers."""
    paths = {k: v for k, v in sysconfig.get_paths().items() if k != "data"}  # data: the prefix
    found = [*paths.values(), *site.getsitepackages(), sys.executable,
             os.path.realpath(sys.executable)]
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    found += glob.glob(os.path.join(libdir, "libpython*")) if libdir else []
    for prefix in {sys.prefix, sys.exec_prefix}:  # a virtual environment's marker
        found.append(os.path.join(prefix, "pyvenv.cfg"))
    return tuple(existing(_real(found)))


def harness_modules() -> set[str]:
    """Top-level modules a worker imports: kernelevolve, every registered plug-in's package,
    and what platforms and languages preload or let candidates import."""
    from kernelevolve import plugins

    names = {"kernelevolve", *knobs.preload_modules()}
    for group in (plugins.PLATFORM_GROUP, plugins.LANGUAGE_GROUP):
        names.update(ep.value.split(":")[0] for ep in metadata.entry_points(group=group))
    for lang in plugins.languages():
        names.update((*lang.imports, *lang.preloads, *lang.libraries))
    for plat in plugins.platforms():
        names.update(plat.preload())
    return {n.split(".")[0] for n in names if n}


@functools.lru_cache(maxsize=None)
def _packages(names: frozenset[str], base: tuple[str, ...]) -> tuple[str, ...]:
    """Where the named top-level modules live outside `base` (the installation), with their
    distributions' metadata folders."""
    found: list[str] = []
    for name in sorted(names):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        if spec.submodule_search_locations:
            found += list(spec.submodule_search_locations)
        elif spec.origin and os.path.isabs(spec.origin):
            found.append(spec.origin)
    wanted = {n.lower() for n in names}
    for dist in metadata.distributions():
        where = getattr(dist, "_path", None)
        if where is None or under(os.path.realpath(str(where)), base):
            continue
        tops = (dist.read_text("top_level.txt") or "").split()
        plugin = any(ep.group.startswith("kernelevolve.") for ep in dist.entry_points)
        name = (dist.metadata["Name"] or "").lower().replace("-", "_")
        if plugin or name in wanted or wanted & {t.lower() for t in tops}:
            found.append(str(where))
    return tuple(p for p in existing(_real(found)) if not under(p, base))


def python_paths() -> list[str]:
    """What a worker needs to run the harness: the installation and the harness's packages
    from outside it (each package folder alone, never the folder around it)."""
    base = list(python_installation())
    return outermost(base + list(_packages(frozenset(harness_modules()), tuple(base))))


def toolkits() -> list[str]:
    """Toolkit folders named by the environment (CUDA_HOME, ROCM_PATH...) and the folders of
    LD_LIBRARY_PATH: what the user points the worker's libraries at."""
    paths = knobs.library_folders()
    return [p for p in existing(_real(paths)) if os.path.isdir(p) and p not in _TOO_BROAD]


def toolchain() -> list[str]:
    """The compiler's installation when it is not the system's (CXX=/opt/gcc-13/bin/g++): its
    prefix, the folder above its bin/."""
    found = shutil.which(knobs.cxx())
    if not found:
        return []
    real = os.path.realpath(found)
    if under(real, SYSTEM) or under(found, SYSTEM):
        return []
    prefix = os.path.dirname(os.path.dirname(real))
    return [] if prefix in _TOO_BROAD else [prefix]


def worker(extra: list[str]) -> list[str]:
    """Everything a worker server and its jobs read, besides /proc and /dev."""
    return outermost([*system(), *python_paths(), *toolkits(), *_real(extra)])


def compiler(extra: list[str]) -> list[str]:
    """Everything the compiler (and objdump) reads, besides /proc and /dev."""
    return outermost([*system(), *toolchain(), *_real(extra)])


# ---- path arithmetic -------------------------------------------------------------------------
def _real(paths) -> list[str]:
    """Resolved paths. A link keeps its own name (its folder resolved) and brings its target:
    /bin -> usr/bin, /etc/localtime, libpython3.11.so stay links inside, as outside."""
    out: list[str] = []
    for p in paths:
        if not p:
            continue
        hops = 0
        # every link of a chain: a venv's bin/python3 -> /root/.pyenv/.../bin/python3 ->
        # python3.11 needs the middle link inside too, or the interpreter is not found
        while os.path.islink(p) and hops < 40:
            link = os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))
            out.append(link)
            p = os.path.join(os.path.dirname(link), os.readlink(link))
            hops += 1
        out.append(os.path.realpath(p))
    return out


def under(path: str, roots) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def outermost(paths) -> list[str]:
    """Each path once, none beneath another that is listed (a mount covers what is under it)."""
    kept: list[str] = []
    for p in sorted(set(paths), key=lambda s: (len(s), s)):
        if not under(p, kept):
            kept.append(p)
    return kept
