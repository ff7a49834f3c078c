"""Static gate: the candidate parses, defines `ModelNew`, and uses a language the platform runs.

Runs in the driver on the source text only (nothing is imported or executed). The integrity
rules (forbidden calls and attributes) live in harness/gates/static_rules.py and are applied here.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field


@dataclass
class StaticReport:
    ok: bool
    reason: str = ""
    language: str = "python"
    findings: list[str] = field(default_factory=list)
    compiles_in_process: bool = False   # calls torch.compile: a compiler runs inside its process


def calls_torch_compile(tree: ast.AST) -> bool:
    """`torch.compile(...)`, `@torch.compile`, `compile(...)` imported from torch."""
    names = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and node.module == "torch" for a in node.names if a.name == "compile"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "compile" and \
                isinstance(node.value, ast.Name) and node.value.id == "torch":
            return True
        if isinstance(node, ast.Name) and node.id in names:
            return True
    return False


def detect_language(tree: ast.Module, platform: str) -> str:
    """The registered language the candidate is written in (each Language's `detects`)."""
    from kernelevolve.plugins import detect_language as detect

    return detect(tree, platform)


def defines_model_new(tree: ast.Module) -> bool:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew":
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "ModelNew" for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name) == "ModelNew" for a in node.names):
                return True
    return False


def syntax_error_text(exc: SyntaxError, filename: str) -> str:
    line = (exc.text or "").rstrip("\n")
    caret = " " * max((exc.offset or 1) - 1, 0) + "^"
    where = f"{filename}, line {exc.lineno}"
    return f"syntax error at {where}: {exc.msg}\n    {line}\n    {caret}"


def check_static(source: str, filename: str, platform: str, languages: tuple[str, ...],
                 rules: bool = True) -> StaticReport:
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return StaticReport(False, syntax_error_text(exc, filename))
    if not defines_model_new(tree):
        return StaticReport(False, "the candidate defines no `ModelNew` at module level; define "
                                   "`class ModelNew(nn.Module)` with Model's constructor and "
                                   "forward signature")
    language = detect_language(tree, platform)
    if language not in languages:
        return StaticReport(False, f"{language} candidates cannot run on the {platform} "
                                   f"platform (it runs: {', '.join(languages)})", language)
    if rules:
        from kernelevolve.harness.gates.static_rules import find_violations

        findings = find_violations(tree, source, filename)
        if findings:
            return StaticReport(False, "forbidden construct(s):\n" + "\n".join(findings[:8]),
                                language, findings)
    return StaticReport(True, "", language, compiles_in_process=calls_torch_compile(tree))
