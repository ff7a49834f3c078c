"""Name resolution for the static gate (harness/gates/static_rules.py): what the candidate's imports
bind, which names each scope binds (so a parameter called `open` is not the builtin), simple
aliases (`G = torch.nn.functional`), and the shapes of attribute access the rules recognise."""
from __future__ import annotations

import ast

FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def import_bindings(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted path, for every import anywhere in the module."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                top = a.name.split(".")[0]
                bound[a.asname or top] = a.name if a.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            bound.update({a.asname or a.name: f"{node.module}.{a.name}"
                          for a in node.names if a.name != "*"})
    return bound


def scope_names(scope: ast.AST) -> set[str]:
    """Names bound in one scope (module, class, function, lambda or comprehension)."""
    names: set[str] = set()
    declared_global: set[str] = set()
    if isinstance(scope, FUNCS):
        a = scope.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
        names.update(p.arg for p in params if p)
        todo = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    elif isinstance(scope, COMPS):
        todo = [g.target for g in scope.generators]
    else:
        todo = list(getattr(scope, "body", []))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        elif isinstance(node, (ast.Lambda, *COMPS)):
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return names - declared_global


def assigned_pairs(node: ast.AST) -> list[tuple[str, ast.AST]]:
    """(name, value) for `name = value`, `a, b = x, y`, `name: T = value`, `(name := value)`."""
    if isinstance(node, ast.Assign):
        todo = [(t, node.value) for t in node.targets]
    elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        todo = [(node.target, node.value)]
    else:
        return []
    pairs = []
    while todo:
        target, value = todo.pop()
        if isinstance(target, ast.Name):
            pairs.append((target.id, value))
        elif (isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List))
              and len(target.elts) == len(value.elts)):
            todo.extend(zip(target.elts, value.elts))
    return pairs


def is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def literal_getattr(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and len(node.args) >= 2 and is_str(node.args[1])
            and not node.keywords)


def is_type_call(node: ast.AST) -> bool:
    """`type(x)` of something other than self/cls (the candidate's own class is its to change)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "type" and len(node.args) == 1
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls")))


def is_self_or_super(base: ast.AST) -> bool:
    return ((isinstance(base, ast.Name) and base.id == "self")
            or (isinstance(base, ast.Call) and isinstance(base.func, ast.Name)
                and base.func.id == "super"))
