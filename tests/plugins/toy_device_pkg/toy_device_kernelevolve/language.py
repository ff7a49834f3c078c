"""The `toydl` language: kernels are calls of the `toydev` module's functions."""
from __future__ import annotations

import ast

from kernelevolve.languages.base import Language, imports_module


class ToyDeviceLanguage(Language):
    name = "toydl"
    summary = "toydev kernels (toydev.relu), the toy accelerator's language"
    priority = 25
    imports = ("toydev",)                # added to the static gate's import allow-list
    launch_kinds = ("toydev",)           # toydev records each launch under this kind
    preloads = ("toydev",)
    libraries = ("toydev",)              # its version is part of the fingerprint
    contract = ("- toydl: `import toydev`; `toydev.relu(x)` runs a ReLU kernel on the toy "
                "accelerator; work is queued on its current stream (no other streams).")

    def detects(self, tree: ast.Module) -> bool:
        return imports_module(tree, "toydev")
