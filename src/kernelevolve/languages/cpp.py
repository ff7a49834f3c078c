"""C++ built by the harness's sandboxed g++ through `kernelevolve.runtime.load_cpp` (CPU)."""
from __future__ import annotations

import ast

from kernelevolve.languages.base import Language, calls


class CppLanguage(Language):
    name = "cpp"
    summary = "C++ through kernelevolve.runtime.load_cpp (sandboxed g++, inspected libraries)"
    priority = 10
    synthesizer = "kernelevolve.synth.cpp_module"  # the synthesizer writes it (synth/api.py)
    launch_kinds = ("cpp",)  # runtime/cpp.py records each call of a loaded function
    knowledge_patterns = (r"c\+\+", r"\bopenmp\b", r"#pragma omp", r"\bavx", r"g\+\+",
                          r"\bgcc\b", r"ctypes", r"\bcpu\b", r"__restrict__", r"\bsimd\b",
                          r"_mm\d*_")

    def detects(self, tree: ast.Module) -> bool:
        return calls(tree, ("load_cpp",))
