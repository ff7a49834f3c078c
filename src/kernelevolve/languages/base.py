"""What a candidate language must provide: detection, imports, launch counting, prompt contract.

A language is one class (a `Language` subclass) in one module, registered by name: the built-ins
in `kernelevolve/plugins.py`, others through the `kernelevolve.languages` entry-point group
(`name = "package.module:Class"`). Everything the harness, the prompts and the knowledge base
need to know about a language is an attribute or a method here; no other module branches on a
language's name. Driver-side members are read in the trusted process; `guard` and `cache_env`
are applied in the sandboxed worker before candidate code is imported.
"""
from __future__ import annotations

import ast
import importlib
from typing import Any


class Language:
    name: str = ""
    summary: str = ""                    # one line for `kernelevolve targets`
    # Detection: the static gate asks the platform's languages, highest priority first, whether
    # the candidate's syntax tree is theirs; the first that says yes names it. `python` (0) is
    # the fallback.
    priority: int = 0
    # Top-level modules a candidate in this language may import, beyond the common allow-list
    # (harness/gates/static_allow.py); their private (`_x`) members stay off limits.
    imports: tuple[str, ...] = ()
    # "module:function" the worker calls before importing a candidate, on platforms that run
    # this language (it must make every kernel launch call `runtime.launches.record(kind)`).
    guard: str = ""
    launch_kinds: tuple[str, ...] = ()   # the counter names its launches are recorded under
    # Compiler caches: environment variable -> subfolder of the job's own folder, set for jobs
    # whose compiler runs inside the candidate's process (the syscall filter's "jit" profile).
    cache_env: dict[str, str] = {}
    preloads: tuple[str, ...] = ()       # modules the worker server imports before forking
    env_names: tuple[str, ...] = ()      # variables of the user's environment workers get
    # Fingerprint keys of libraries whose minor version decides whether a kernel measured
    # before still holds (registry compatibility, note staleness, resume).
    libraries: tuple[str, ...] = ()
    # Regexes (lower-case text) that mark a knowledge-note section as about this language.
    knowledge_patterns: tuple[str, ...] = ()
    # The prompt contract's language part: text, or the name of a packaged prompt file
    # (operators/prompts/contract-<name>.md is read when `contract` is empty).
    contract: str = ""
    # Platforms this language runs on besides those that list it themselves: a language added to
    # a built-in platform declares it here (plugins.get_platform appends it to the platform's
    # languages), so no platform module is edited. `timed`: such a platform also measures it.
    platforms: tuple[str, ...] = ()
    timed: bool = True
    # The synthesizer's emitter for this language: a module with `emit_source(plan, problem,
    # text)` (synth/api.py), or "" when the synthesizer does not write it.
    synthesizer: str = ""

    def detects(self, tree: ast.Module) -> bool:
        """Whether the candidate's syntax tree is written in this language (source only)."""
        return False

    def versions(self) -> dict[str, Any]:
        """Fingerprint fields for this language's toolchain (worker side), e.g. {"triton": "3.6"}."""
        out: dict[str, Any] = {}
        for lib in self.libraries:
            try:
                out[lib] = importlib.import_module(lib).__version__
            except Exception:  # noqa: BLE001 - a missing library is a fact, not a crash
                out[lib] = None
        return out

    def install_guard(self) -> None:
        """Worker side, before a candidate is imported: install `guard` if there is one."""
        if self.guard:
            module, _, func = self.guard.partition(":")
            getattr(importlib.import_module(module), func or "install")()


def imports_module(tree: ast.AST, top: str) -> bool:
    """`import top...` or `from top... import ...` anywhere in the tree."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == top for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] == top:
            return True
    return False


def call_name(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def calls(tree: ast.AST, names: tuple[str, ...]) -> bool:
    """A call of a function or method named one of `names` anywhere in the tree."""
    return any(isinstance(node, ast.Call) and call_name(node.func) in names
               for node in ast.walk(tree))
