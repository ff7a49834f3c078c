"""What CUDA C++ and HIP share: torch's `load_inline`, counted by runtime/inline_guard.py."""
from __future__ import annotations

import ast

from kernelevolve.languages.base import Language, calls


def mentions_cpp_extension(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and "cpp_extension" in node.module:
            return True
        if isinstance(node, ast.Attribute) and node.attr == "cpp_extension":
            return True
    return False


class InlineLanguage(Language):
    """Base of the load_inline languages (not registered itself)."""

    priority = 20
    guard = "kernelevolve.runtime.inline_guard:install"
    launch_kinds = ("inline",)
    preloads = ("torch.utils.cpp_extension",)  # ~0.2 s (setuptools), once per server

    def detects(self, tree: ast.Module) -> bool:
        return calls(tree, ("load_inline", "load")) and mentions_cpp_extension(tree)
