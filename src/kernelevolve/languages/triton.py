"""Triton: `@triton.jit` kernels, compiled in the candidate's process (interpreted on CPU)."""
from __future__ import annotations

import ast

from kernelevolve.languages.base import Language, imports_module


class TritonLanguage(Language):
    name = "triton"
    summary = "Triton kernels (@triton.jit); on cpu checked under the interpreter, not timed"
    priority = 30
    synthesizer = "kernelevolve.synth.emit_triton"  # the synthesizer writes it (synth/api.py)
    imports = ("triton",)
    guard = "kernelevolve.runtime.triton_guard:install"
    launch_kinds = ("triton",)
    cache_env = {"TRITON_CACHE_DIR": "triton"}
    preloads = ("triton",)
    env_names = ("TRITON_PTXAS_PATH", "TRITON_LIBCUDA_PATH", "TRITON_INTERPRET")
    libraries = ("triton",)
    knowledge_patterns = (r"\btriton\b", r"\btl\.", r"@triton", r"num_warps", r"constexpr")

    def detects(self, tree: ast.Module) -> bool:
        return imports_module(tree, "triton")
