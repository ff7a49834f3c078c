"""Plain PyTorch: the fallback language (no custom kernels, so launches are not counted)."""
from __future__ import annotations

import ast

from kernelevolve.languages.base import Language


class PythonLanguage(Language):
    name = "python"
    summary = "plain PyTorch, no custom kernel (accepted only with --allow-no-kernel)"
    priority = 0

    def detects(self, tree: ast.Module) -> bool:
        return True
