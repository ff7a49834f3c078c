"""The `toyc` language: kernels are calls of the `toycpu` module's functions, on the CPU."""
from __future__ import annotations

import ast

from kernelevolve.languages.base import Language, imports_module


class ToyCpuLanguage(Language):
    name = "toyc"
    summary = "toycpu kernels (toycpu.relu) on the built-in cpu platform"
    priority = 25
    platforms = ("cpu",)                 # joins the built-in platform, timed there
    imports = ("toycpu",)
    launch_kinds = ("toycpu",)
    preloads = ("toycpu",)
    libraries = ("toycpu",)
    contract = "- toyc: `import toycpu`; `toycpu.relu(x)` runs a ReLU kernel on the CPU."

    def detects(self, tree: ast.Module) -> bool:
        return imports_module(tree, "toycpu")
