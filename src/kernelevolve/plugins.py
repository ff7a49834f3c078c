"""The registry of platforms and languages: built-ins plus Python entry points.

A name maps to "module:Class". The built-ins are listed here; a third-party package adds more
without editing kernelevolve by declaring entry points in the groups `kernelevolve.platforms`
and `kernelevolve.languages` (`toy = "toy_pkg.platform:ToyPlatform"`). A built-in name cannot
be replaced. An unknown name raises a one-line error listing what is registered. Instances are
made once per process (the worker's forked children inherit them).
"""
from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points
from typing import Any

from kernelevolve.errors import PlatformError
from kernelevolve.languages.base import Language
from kernelevolve.platforms.base import Platform

PLATFORM_GROUP = "kernelevolve.platforms"
LANGUAGE_GROUP = "kernelevolve.languages"

BUILTIN_PLATFORMS = {
    "cpu": "kernelevolve.platforms.cpu:CpuPlatform",
    "cuda": "kernelevolve.platforms.cuda:CudaPlatform",
    "rocm": "kernelevolve.platforms.rocm:RocmPlatform",
}
# Order matters where two languages detect the same source and neither is the platform's:
# the first listed names it in the static gate's refusal.
BUILTIN_LANGUAGES = {
    "python": "kernelevolve.languages.python:PythonLanguage",
    "cpp": "kernelevolve.languages.cpp:CppLanguage",
    "triton": "kernelevolve.languages.triton:TritonLanguage",
    "cuda-cpp": "kernelevolve.languages.cuda_cpp:CudaCppLanguage",
    "hip": "kernelevolve.languages.hip:HipLanguage",
}


@functools.lru_cache(maxsize=None)
def _table(group: str) -> dict[str, Any]:
    """name -> "module:Class" (built-in) or an entry point (installed package)."""
    table: dict[str, Any] = dict(BUILTIN_PLATFORMS if group == PLATFORM_GROUP
                                 else BUILTIN_LANGUAGES)
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        table.setdefault(ep.name, ep)
    return table


def _load(group: str, name: str, base: type, what: str) -> Any:
    table = _table(group)
    if name not in table:
        raise PlatformError(f"unknown {what} {name!r}; registered {what}s: "
                            f"{', '.join(table)}")
    target = table[name]
    try:
        if isinstance(target, str):
            module, _, attr = target.partition(":")
            cls = getattr(importlib.import_module(module), attr)
        else:
            cls = target.load()
    except Exception as exc:  # noqa: BLE001 - a broken plug-in is the user's to fix
        raise PlatformError(f"{what} {name!r} ({getattr(target, 'value', target)}) failed to "
                            f"load: {type(exc).__name__}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, base)) or cls.name != name:
        raise PlatformError(f"{what} {name!r} must be a {base.__name__} subclass whose name is "
                            f"{name!r}; got {cls!r}")
    return cls()


@functools.lru_cache(maxsize=None)
def get_platform(name: str) -> Platform:
    """The platform, its languages extended by every registered language that declares it
    (`Language.platforms`): a language joins a built-in platform without editing it."""
    plat = _load(PLATFORM_GROUP, name, Platform, "platform")
    added = [lang for lang in languages() if name in lang.platforms
             and lang.name not in plat.languages]
    if added:
        plat.languages = (*plat.languages, *(lang.name for lang in added))
        plat.measured_languages = (*plat.measured_languages,
                                   *(lang.name for lang in added if lang.timed))
    return plat


@functools.lru_cache(maxsize=None)
def get_language(name: str) -> Language:
    return _load(LANGUAGE_GROUP, name, Language, "language")


def platform_names() -> tuple[str, ...]:
    return tuple(_table(PLATFORM_GROUP))


def language_names() -> tuple[str, ...]:
    return tuple(_table(LANGUAGE_GROUP))


def languages() -> list[Language]:
    """Every registered language that loads (a broken plug-in is skipped here, named by
    get_language when asked for)."""
    out = []
    for name in language_names():
        try:
            out.append(get_language(name))
        except PlatformError:
            continue
    return out


def platforms() -> list[Platform]:
    out = []
    for name in platform_names():
        try:
            out.append(get_platform(name))
        except PlatformError:
            continue
    return out


def detect_language(tree: Any, platform: str) -> str:
    """The platform's languages first, highest priority first; then every registered one (so a
    refusal names what the candidate is written in); then a fallback (priority 0 or less) of
    the platform's, such as plain PyTorch."""
    runs = [get_language(n) for n in get_platform(platform).languages]
    for group in (runs, languages()):
        for lang in sorted(group, key=lambda lang: -lang.priority):
            if lang.priority > 0 and lang.detects(tree):
                return lang.name
    fallback = [lang for lang in runs if lang.priority <= 0 and lang.detects(tree)]
    return fallback[0].name if fallback else get_language("python").name


def device_stream_modules() -> tuple[str, ...]:
    """Every registered platform's stream modules (the static gate and the integrity probe
    refuse and watch them whatever the platform of the run)."""
    return tuple(dict.fromkeys(m for plat in platforms() for m in plat.device_stream_modules))


def library_keys() -> tuple[str, ...]:
    """Fingerprint keys of every registered language's libraries (e.g. triton)."""
    return tuple(dict.fromkeys(k for lang in languages() for k in lang.libraries))


def toolkit_labels() -> dict[str, str]:
    """Fingerprint key -> label of every registered platform's toolkit (e.g. cuda -> CUDA)."""
    out: dict[str, str] = {}
    for plat in platforms():
        out.update(plat.toolkits)
    return out


def fingerprint(platform: str, threads: int) -> dict[str, Any]:
    """The platform's fingerprint plus its languages' toolchain versions (worker side)."""
    plat = get_platform(platform)
    fp = plat.fingerprint(threads)
    for name in plat.languages:
        fp.update(get_language(name).versions())
    return fp


def worker_env_names() -> tuple[str, ...]:
    """What every registered platform and language passes from the user's environment."""
    names = [n for plat in platforms() for n in plat.env_names]
    names += [n for lang in languages() for n in lang.env_names]
    return tuple(dict.fromkeys(names))


def cache_env(platform: Platform) -> dict[str, str]:
    """Compiler cache variables of the platform's languages -> subfolder name."""
    out: dict[str, str] = {}
    for name in platform.languages:
        out.update(get_language(name).cache_env)
    return out


def preloads(platform: Platform) -> list[str]:
    """What the worker server imports before forking: the platform's and its languages'."""
    mods = list(platform.preload())
    for name in platform.languages:
        mods += get_language(name).preloads
    return list(dict.fromkeys(mods))


def _source(group: str, name: str) -> str:
    target = _table(group)[name]
    if isinstance(target, str):
        return "built-in"
    dist = getattr(target, "dist", None)
    return f"entry point {target.value}" + (f" ({dist.name} {dist.version})" if dist else "")


def describe() -> dict[str, list[dict[str, Any]]]:
    """What `kernelevolve targets` prints: every registered platform and language, where it
    comes from, and what it says of itself (or why it does not load)."""
    out: dict[str, list[dict[str, Any]]] = {"platforms": [], "languages": []}
    for name in platform_names():
        row: dict[str, Any] = {"name": name, "source": _source(PLATFORM_GROUP, name)}
        try:
            plat = get_platform(name)
            row.update(summary=plat.summary, device=plat.device, languages=list(plat.languages),
                       measured=list(plat.measured_languages),
                       default_language=plat.default_language, measurement=plat.measurement,
                       ray_resources=dict(plat.ray_resources))
        except PlatformError as exc:
            row["error"] = str(exc)
        out["platforms"].append(row)
    for name in language_names():
        row = {"name": name, "source": _source(LANGUAGE_GROUP, name)}
        try:
            lang = get_language(name)
            row.update(summary=lang.summary, imports=list(lang.imports),
                       platforms=list(lang.platforms))
        except PlatformError as exc:
            row["error"] = str(exc)
        out["languages"].append(row)
    return out
