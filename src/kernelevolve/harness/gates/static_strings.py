"""Strings that Python walks or evaluates: format strings and string annotations.

A format field walks attributes and indexes (`"{0.__globals__[os].environ}".format(f)` reaches
any module from any function) where the attribute rules see only a string literal; a string
annotation is evaluated as code by whatever resolves annotations (typing's resolvers,
functools.singledispatch). The gate reads both: a format string must be a literal it can parse
whose fields name arguments only, and a string annotation must be a type expression, which
harness/gates/static_rules.py then checks like code. Used by static_rules.py; nothing here runs the
candidate's strings (`string.Formatter.parse` and `ast.parse` only parse).
"""
from __future__ import annotations

import ast
import string

FORMAT_METHODS = frozenset({"format", "format_map"})
FORMAT_UNREADABLE = (
    "`.{}` on a string the gate cannot read is not allowed: a format string can walk "
    "attributes and indexes (`{{0.__globals__}}`) to anything; call it on a string literal or a "
    "module constant assigned one, or use an f-string")
_WALK = ("format field `{{{}}}` is not allowed: an attribute or index walk in a format string "
         "reaches globals, modules and builtins where the static rules cannot see it; pass the "
         "values you need as arguments, or use an f-string")
_MAX_DEPTH = 8


def format_problem(template: str, depth: int = 0) -> str | None:
    """Why the literal format string `template` is refused, or None: a field that walks
    attributes or indexes (`{0.x}`, `{0[k]}`), in the string or in a nested format spec."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError as exc:
        return f"the format string is malformed ({exc}); write a valid one or use an f-string"
    for _, name, spec, _ in fields:
        if name is None:
            continue
        if "." in name or "[" in name:
            return _WALK.format(name)
        if spec and "{" in spec and depth < _MAX_DEPTH:
            nested = format_problem(spec, depth + 1)
            if nested:
                return nested
    return None


class LiteralStrings:
    """The string values a receiver of `.format` can hold, when the source fixes them: a literal,
    a `+` of literals, or a name whose every binding in the module is a plain assignment of one
    (`SRC = "..."`). None for anything else: a parameter, an f-string (its `{{` becomes `{`),
    a name also bound by a loop, an import, `+=` or unpacking."""

    def __init__(self, tree: ast.AST):
        self.values: dict[str, list[ast.AST] | None] = {}
        plain: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.NamedExpr)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if len(targets) == 1 and isinstance(targets[0], ast.Name) and node.value:
                    plain.add(id(targets[0]))
                    self._bind(targets[0].id, node.value)
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load) \
                    and id(node) not in plain:
                self.values[node.id] = None
            elif isinstance(node, ast.arg):
                self.values[node.arg] = None
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.values[node.name] = None
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    self.values[(a.asname or a.name).split(".")[0]] = None
            elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
                self.values[node.name] = None
            elif isinstance(node, ast.MatchMapping) and node.rest:
                self.values[node.rest] = None

    def _bind(self, name: str, value: ast.AST) -> None:
        if self.values.get(name, []) is not None:
            self.values.setdefault(name, []).append(value)

    def of(self, node: ast.AST, depth: int = 0) -> list[str] | None:
        if depth > _MAX_DEPTH:
            return None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.of(node.left, depth + 1), self.of(node.right, depth + 1)
            if left is None or right is None or len(left) * len(right) > 64:
                return None
            return [a + b for a in left for b in right]
        if isinstance(node, ast.Name):
            bound = self.values.get(node.id)
            if not bound:
                return None
            out: list[str] = []
            for value in bound:
                one = self.of(value, depth + 1)
                if one is None:
                    return None
                out += one
            return out
        return None


# ---- string annotations ------------------------------------------------------------------------

ANNOTATION_NOT_TYPE = (
    "a string annotation may only name types (`\"Tensor\"`, `\"Optional[int]\"`): tools that "
    "resolve annotations (typing, functools.singledispatch) evaluate it as code; {}")
_TYPE_NODES = (ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.Tuple, ast.List,
               ast.Constant, ast.Load, ast.BinOp, ast.BitOr)


def annotation_strings(annotation: ast.AST) -> list[ast.Constant]:
    """String constants in an annotation expression that are evaluated as types (those inside
    `Literal[...]` are values and are not)."""
    found: list[ast.Constant] = []
    todo = [annotation]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append(node)
        elif isinstance(node, ast.Subscript) and _names_literal(node.value):
            continue
        else:
            todo.extend(ast.iter_child_nodes(node))
    return found


def parse_annotation(text: str) -> tuple[ast.Expression | None, str | None]:
    """(the parsed type expression, None) or (None, why it is refused)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None, ANNOTATION_NOT_TYPE.format("this one does not parse")
    for node in ast.walk(tree):
        if not isinstance(node, _TYPE_NODES):
            what = "a call" if isinstance(node, ast.Call) else type(node).__name__
            return None, ANNOTATION_NOT_TYPE.format(f"this one computes something ({what})")
        if isinstance(node, ast.BinOp) and not isinstance(node.op, ast.BitOr):
            return None, ANNOTATION_NOT_TYPE.format("only `|` may combine types")
    return tree, None


def _names_literal(node: ast.AST) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Literal") or \
        (isinstance(node, ast.Attribute) and node.attr == "Literal")
