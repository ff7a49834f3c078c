"""Compilation as its own step: the driver builds what a job's `load_cpp` asks for.

A job's candidate process may not run a compiler or write a file (harness/containment/seccomp.py), so
`load_cpp` there sends (source, flags, name) to the driver through the worker server. The driver
checks the flags against an allowlist and the source's includes (harness/gates/cpp_rules.py: system
headers only), compiles in a sandbox of its own (sandbox.compiler_prefix: no network, the system
and toolchain only, one writable build folder) under memory, CPU and file-size limits
(runtime/cpp_limits.py), keeps only the diagnostics located in the source itself
(runtime/cpp_diagnostics.py), inspects the library
(native_inspect.py) and publishes it into the compile cache, which every sandbox sees read-only;
the answer is that path, or the compiler's errors, or the inspection's refusal. Cached libraries
are served only when their bytes match the recorded hash, so nothing planted under a known key
is ever loaded. Every answer is also logged for the job, so verdicts rest on what the driver did,
not on what the job reports.

The harness's own native helpers (the OpenMP warm-up) are built the same way into a folder of
their own (`cache/harness`) and handed to jobs as (path, sha256), verified before loading.
"""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from kernelevolve.errors import CppCompileError
from kernelevolve.harness.gates import cpp_rules, native_allow
from kernelevolve.harness.containment import sandbox
from kernelevolve.harness.gates.native_inspect import Inspection, inspect_library
from kernelevolve.harness.protocol.text import clean_tree
from kernelevolve.runtime import cpp_limits, launch_build
from kernelevolve.runtime.cpp import build, library_stem
from kernelevolve.runtime.cpp_cache import LIBRARIES_SUBDIR, LibraryCache

MAX_SOURCE = 8 << 20
class BuildService:
    def __init__(self, cache_dir: Path, sandbox_mode: str = "auto"):
        self.cache = LibraryCache(Path(cache_dir) / LIBRARIES_SUBDIR)
        self.helpers = LibraryCache(Path(cache_dir) / "harness")
        self.mode = sandbox_mode
        self.objdump = shutil.which("objdump")

    def _runner(self, workdir: Path):
        return sandbox.compiler_prefix(workdir, self.mode), sandbox.compiler_env(workdir)

    # ---- requests from jobs --------------------------------------------------------------
    def handle(self, request: Any, log: list[dict[str, Any]], inspect: bool = True
               ) -> dict[str, Any]:
        """Answer one request from a job (untrusted data); appends what happened to `log`.
        `inspect=False` (tests of the layers behind it) serves refused libraries too."""
        reply = clean_tree(self._answer(request, inspect))  # compiler output is candidate text
        entry = {k: v for k, v in reply.items() if k != "log"}
        if reply.get("ok"):  # what a registry needs to serve this library again (registry/)
            entry.update(source_sha256=hashlib.sha256(request["source"].encode()).hexdigest(),
                         flags=[str(f) for f in request["flags"]])
        log.append(entry)
        return reply

    def _answer(self, request: Any, inspect: bool) -> dict[str, Any]:
        if not isinstance(request, dict) or request.get("op") != "compile":
            return {"ok": False, "kind": "protocol", "message": "unknown build request"}
        source, flags, name = request.get("source"), request.get("flags"), request.get("name")
        if not isinstance(source, str) or not source.strip() or len(source) > MAX_SOURCE:
            return {"ok": False, "kind": "compile",
                    "message": f"load_cpp: source must be a string of 1 to {MAX_SOURCE} bytes"}
        if not isinstance(flags, list) or not isinstance(name, str) or len(name) > 200:
            return {"ok": False, "kind": "protocol", "message": "malformed build request"}
        stem = library_stem(name)
        bad = cpp_rules.check_flags(flags) or cpp_rules.check_source(source)
        if bad:
            return {"ok": False, "kind": "compile", "name": stem, "message": bad}
        try:
            lib, record = build(source, tuple(flags), stem, self.cache, runner=self._runner)
        except CppCompileError as exc:
            return {"ok": False, "kind": "compile", "name": stem, "message": str(exc),
                    "log": exc.log[-20000:]}
        verdict = self._inspection(lib, record, stem)
        reply = {"ok": verdict.ok or not inspect, "name": stem, "path": str(lib),
                 "sha256": record["sha256"], "compiler": record.get("compiler"),
                 "inspection": verdict.to_dict()}
        if not reply["ok"]:
            reply.update(kind="inspection", message=verdict.reason)
            reply.pop("path")
        return reply

    def _inspection(self, lib: Path, record: dict[str, Any], stem: str) -> Inspection:
        cached = record.get("inspection")
        if isinstance(cached, dict) and cached.get("version") == native_allow.VERSION:
            return Inspection(bool(cached.get("ok")), str(cached.get("reason", "")),
                              list(cached.get("refused", [])))
        objdump = ([*cpp_limits.default().prefix(),
                    *sandbox.compiler_prefix(None, self.mode, readonly=(lib.parent,))]
                   if self.objdump else None)
        verdict = inspect_library(lib, f"{stem}.so", objdump)
        with self.cache.locked(record["key"]):
            found = self.cache.lookup(stem, record["key"])
            if found is not None and found[1]["sha256"] == record["sha256"]:
                self.cache.write_manifest(self.cache.paths(stem, record["key"])[1],
                                          {**found[1], "inspection": verdict.to_dict()})
        return verdict

    # ---- the harness's own helpers -------------------------------------------------------
    def launcher(self) -> dict[str, str]:
        """The kernel launcher extension (runtime/launch_ext.cpp, our own source: built with the
        plain compiler); (path, sha256), or {"error": why} where it cannot be built here."""
        try:
            return launch_build.build(self.helpers.root)
        except CppCompileError as exc:
            return {"error": str(exc).splitlines()[0]}

    def helper(self, name: str, source: str) -> dict[str, str] | None:
        """Build a harness helper library; (path, sha256), or None without a compiler."""
        try:
            lib, record = build(source, (), library_stem(name), self.helpers, runner=self._runner)
        except CppCompileError:
            return None
        return {"path": str(lib), "sha256": record["sha256"]}
