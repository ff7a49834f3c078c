"""The `toyl` language: kernels are calls of the `toykern` module's functions."""
from __future__ import annotations

import ast

from kernelevolve.languages.base import Language, imports_module


class ToyLanguage(Language):
    name = "toyl"
    summary = "toykern kernels (toykern.relu), the plug-in test's DSL"
    priority = 25
    imports = ("toykern",)               # added to the static gate's import allow-list
    launch_kinds = ("toy",)              # toykern records each launch under this kind
    preloads = ("toykern",)
    libraries = ("toykern",)             # its version is part of the fingerprint
    knowledge_patterns = (r"\btoykern\b",)
    contract = ("- toyl: `import toykern`; `toykern.relu(x, chunks=N)` runs a ReLU kernel over "
                "N chunks of a contiguous tensor.")

    def detects(self, tree: ast.Module) -> bool:
        return imports_module(tree, "toykern")
