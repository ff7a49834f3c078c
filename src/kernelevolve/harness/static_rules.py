"""Integrity rules of the static gate: an AST walk over the candidate's source; nothing is run.

`find_violations` returns one line per finding, "line N: `<source line>`: <reason>", in line
order. The rules (an import allow-list, forbidden builtins, interpreter internals, patching of
imported names, torch/numpy/ctypes members that escape the harness) are tabled in
harness/static_allow.py and documented in docs/SECURITY.md. This gate is one layer: it turns the
obvious cheats away early with a reason the model can act on; process isolation, trusted
comparison and the runtime checks hold without it.
"""
from __future__ import annotations

import ast

from kernelevolve.harness import static_allow as A

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_MAX_LINE = 100
_TYPE = "type()"  # binding marker: a name holding type(x), i.e. some class the candidate got


def find_violations(tree: ast.AST, source: str, filename: str) -> list[str]:
    gate = _Gate(source, tree)
    gate.visit(tree)
    return gate.report()


def _import_bindings(tree: ast.AST) -> dict[str, str]:
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


def _scope_names(scope: ast.AST) -> set[str]:
    """Names bound in one scope (module, class, function, lambda or comprehension)."""
    names: set[str] = set()
    declared_global: set[str] = set()
    if isinstance(scope, _FUNCS):
        a = scope.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
        names.update(p.arg for p in params if p)
        todo = list(scope.body) if isinstance(scope.body, list) else [scope.body]
    elif isinstance(scope, _COMPS):
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
        elif isinstance(node, (ast.Lambda, *_COMPS)):
            continue
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update(a.asname or a.name.split(".")[0] for a in node.names if a.name != "*")
        elif isinstance(node, ast.Global):
            declared_global.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return names - declared_global


class _Gate(ast.NodeVisitor):
    def __init__(self, source: str, tree: ast.AST):
        self.lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.found: list[tuple[int, int, str]] = []
        self.bound = _import_bindings(tree)  # name -> import-rooted dotted path, or _TYPE
        self.scopes: list[tuple[ast.AST, set[str]]] = []
        self.module_names = _scope_names(tree)
        self.module_names |= {n for g in ast.walk(tree) if isinstance(g, ast.Global)
                              for n in g.names}
        self.call_funcs: set[int] = set()  # id() of the Name nodes that are called
        self._aliases(tree)

    def _aliases(self, tree: ast.AST) -> None:
        """`G = torch.nn.functional` makes G import-rooted too; `T = type(x)` makes T a class."""
        pairs = [pair for node in ast.walk(tree) for pair in _assigned_pairs(node)]
        for _ in range(4):
            changed = False
            for name, value in pairs:
                path = _TYPE if _is_type_call(value) else self.chain(value)[1]
                if path and self.bound.get(name) != path:
                    self.bound[name], changed = path, True
            if not changed:
                return

    def report(self) -> list[str]:
        ordered = sorted(self.found, key=lambda f: (f[0], f[1]))
        return list(dict.fromkeys(text for _, _, text in ordered))

    def flag(self, node: ast.AST, reason: str) -> None:
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        if len(text) > _MAX_LINE:
            text = text[:_MAX_LINE - 3] + "..."
        col = getattr(node, "col_offset", 0)
        self.found.append((line, col, f"line {line}: `{text}`: {reason}"))

    # ---- attribute chains ----
    def chain(self, node: ast.AST) -> tuple[list[str], str | None, ast.AST]:
        """(components, dotted path when import-rooted, base node) of `a.b.c` / getattr(a, "b")."""
        attrs: list[str] = []
        while isinstance(node, ast.Attribute) or _literal_getattr(node):
            attrs.append(node.attr if isinstance(node, ast.Attribute) else node.args[1].value)
            node = node.value if isinstance(node, ast.Attribute) else node.args[0]
        attrs.reverse()
        if not isinstance(node, ast.Name):
            return attrs, None, node
        root = self.bound.get(node.id)
        if root is None or root == _TYPE:
            return [node.id, *attrs], None, node
        parts = root.split(".") + attrs
        return parts, ".".join(parts), node

    def check_chain(self, node: ast.AST, parts: list[str], path: str | None, base: ast.AST,
                    first_attr: int) -> None:
        """All rules on one chain; parts[first_attr:] are its attribute components."""
        for i, name in enumerate(parts[first_attr:], start=first_attr):
            sentence = A.ANY_ATTRIBUTE.get(name)
            if sentence and not (name in A.SELF_ONLY_ATTRIBUTES and i == first_attr
                                 and _is_self_or_super(base)):
                self.flag(node, sentence.format(name))
        if path is None:
            return
        for pair in zip(parts, parts[1:]):
            reason = A.MEMBER_REASONS.get(pair)
            if reason is None and pair[1] not in A.ANY_ATTRIBUTE:
                reason = A.ANY_MEMBER_OF.get(pair[0])
            if reason:
                self.flag(node, f"{pair[0]}.{pair[1]} is not allowed: {reason}")
        reason = A.path_reason(parts)
        if reason:
            self.flag(node, reason)

    # ---- scopes (so that a parameter named `input` or `open` is not the builtin) ----
    def is_builtin(self, name: str) -> bool:
        innermost = len(self.scopes) - 1
        for i, (scope, names) in enumerate(self.scopes):
            if name in names and (not isinstance(scope, ast.ClassDef) or i == innermost):
                return False
        return name not in self.module_names

    def in_scope(self, scope: ast.AST, body: list[ast.AST]) -> None:
        self.scopes.append((scope, _scope_names(scope)))
        for node in body:
            self.visit(node)
        self.scopes.pop()

    def _outer_parts(self, args: ast.arguments, *more: ast.AST | None) -> None:
        """Defaults, annotations, decorators: evaluated in the enclosing scope."""
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        annotations = [p.annotation for p in params if p]
        for node in [*args.defaults, *args.kw_defaults, *annotations, *more]:
            if node is not None:
                self.visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._outer_parts(node.args, *node.decorator_list, node.returns)
        self.in_scope(node, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._outer_parts(node.args)
        self.in_scope(node, [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(expr)
        self.in_scope(node, node.body)

    def _visit_comp(self, node: ast.AST) -> None:
        first, *others = node.generators
        self.visit(first.iter)
        inner: list[ast.AST] = [first.target, *first.ifs]
        for g in others:
            inner += [g.target, g.iter, *g.ifs]
        inner += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._targets([g.target for g in node.generators])
        self.in_scope(node, inner)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comp

    # ---- imports ----
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self.allowed_top(node, alias.name):
                self.check_chain(node, alias.name.split("."), alias.name, node, 1)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag(node, "relative imports are not allowed: a candidate is a single module; "
                      + A.allowed_hint())
        elif self.allowed_top(node, node.module or ""):
            for alias in node.names:
                if alias.name == "*":
                    self.flag(node, "star imports are not allowed: import the names you use")
                else:
                    dotted = f"{node.module}.{alias.name}"
                    self.check_chain(node, dotted.split("."), dotted, node, 1)

    def allowed_top(self, node: ast.AST, dotted: str) -> bool:
        top = dotted.split(".")[0]
        if top not in A.allowed_modules():
            self.flag(node, f"importing {top} is not allowed: "
                            f"{A.MODULE_REASONS.get(top, A.allowed_hint())}")
        return top in A.allowed_modules()

    # ---- names, attributes, calls ----
    def visit_Name(self, node: ast.Name) -> None:
        name, load = node.id, isinstance(node.ctx, ast.Load)
        if name in A.FORBIDDEN_NAMES:
            self.flag(node, f"`{name}` is not allowed: {A.FORBIDDEN_NAMES[name]}")
        elif name in A.FORBIDDEN_BUILTINS and load and self.is_builtin(name):
            if name not in A.CALL_ONLY_BUILTINS or id(node) in self.call_funcs:
                self.flag(node, f"`{name}` is not allowed: {A.FORBIDDEN_BUILTINS[name]}")
        elif name in A.ATTR_BUILTINS and load and id(node) not in self.call_funcs \
                and self.is_builtin(name):
            self.flag(node, f"`{name}` may only be called directly, with a string literal name")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        """Checks the whole chain once, then visits its base and any getattr(...) links in it."""
        parts, path, base = self.chain(node)
        links, inner = 0, node
        while isinstance(inner, ast.Attribute) or _literal_getattr(inner):
            links += 1
            if isinstance(inner, ast.Call):
                self.visit(inner)
            inner = inner.value if isinstance(inner, ast.Attribute) else inner.args[0]
        self.check_chain(node, parts, path, base, len(parts) - links)
        self.visit(base)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name):
            self.call_funcs.add(id(node.func))
            if node.func.id in A.ATTR_BUILTINS and self.is_builtin(node.func.id):
                self.check_attr_builtin(node, node.func.id)
        self.generic_visit(node)

    def check_attr_builtin(self, node: ast.Call, fn: str) -> None:
        """getattr/setattr/delattr/hasattr: a literal name is checked like `obj.name`."""
        if len(node.args) < 2 or not _is_str(node.args[1]):
            self.flag(node, f"`{fn}` with a computed attribute name hides what is reached; use "
                            f"plain attribute access or a string literal")
            return
        if fn == "hasattr":  # returns a bool: nothing is reached
            return
        parts, path, base = self.chain(node.args[0])
        name = node.args[1].value
        if path is not None and fn == "getattr":
            self.flag(node, f"getattr on the imported name {path} is not allowed: write "
                            f"`{path}.{name}`")
        elif path is not None:
            self.flag(node, _patch_reason(f"{path}.{name}"))
        elif fn != "getattr" and self.is_type_root(base):
            self.flag(node, A.TYPE_PATCH_REASON)
        self.check_chain(node, [*parts, name], path and f"{path}.{name}", base, len(parts))

    # ---- assignment targets: monkeypatching ----
    def _targets(self, targets: list[ast.AST]) -> None:
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)):
                self._targets(list(target.elts))
            elif isinstance(target, ast.Starred):
                self._targets([target.value])
            elif isinstance(target, (ast.Attribute, ast.Subscript)):
                parts, path, base = self.chain(
                    target.value if isinstance(target, ast.Subscript) else target)
                if path is not None:
                    self.flag(target, _patch_reason(path))
                elif self.is_type_root(base):
                    self.flag(target, A.TYPE_PATCH_REASON)

    def is_type_root(self, base: ast.AST) -> bool:
        return _is_type_call(base) or (isinstance(base, ast.Name)
                                       and self.bound.get(base.id) == _TYPE)

    def visit_Assign(self, node: ast.AST) -> None:
        """Assign, AugAssign, AnnAssign, Delete, For: the targets, then everything."""
        targets = getattr(node, "targets", None)
        self._targets(targets if targets is not None else [node.target])
        self.generic_visit(node)

    visit_AugAssign = visit_AnnAssign = visit_Delete = visit_For = visit_AsyncFor = visit_Assign

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._targets([node.optional_vars])
        self.generic_visit(node)


def _assigned_pairs(node: ast.AST) -> list[tuple[str, ast.AST]]:
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


def _patch_reason(path: str) -> str:
    if path.startswith("torch.backends."):
        return f"assigning {path} is not allowed: {A.BACKENDS_REASON}"
    return (f"monkeypatching {path} is not allowed: the harness and the reference rely on it; "
            f"define your own function or class instead")


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def _literal_getattr(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "getattr" and len(node.args) >= 2 and _is_str(node.args[1])
            and not node.keywords)


def _is_type_call(node: ast.AST) -> bool:
    """`type(x)` of something other than self/cls (the candidate's own class is its to change)."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "type" and len(node.args) == 1
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id in ("self", "cls")))


def _is_self_or_super(base: ast.AST) -> bool:
    return ((isinstance(base, ast.Name) and base.id == "self")
            or (isinstance(base, ast.Call) and isinstance(base.func, ast.Name)
                and base.func.id == "super"))
