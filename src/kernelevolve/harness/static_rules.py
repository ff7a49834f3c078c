"""Integrity rules of the static gate: an AST walk over the candidate's source, nothing executed.

`find_violations` returns one line per finding, `line N: `<source line>`: <reason>`, sorted by
line. The rules (imports on an allow-list, forbidden builtins, interpreter internals, patching of
imported modules, torch/numpy/ctypes members that escape the harness) are tabled in
harness/static_allow.py and documented in docs/SECURITY.md. The gate is one layer of several: it
turns away the obvious cheats early, with a reason the model can act on; process isolation,
trusted comparison and runtime checks hold without it.
"""
from __future__ import annotations

import ast

from kernelevolve.harness import static_allow as A

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_MAX_LINE = 100


def find_violations(tree: ast.AST, source: str, filename: str) -> list[str]:
    gate = _Gate(source)
    gate.run(tree)
    return gate.report()


# ---- name binding -------------------------------------------------------------------------------

def _import_bindings(tree: ast.AST) -> dict[str, str]:
    """Local name -> dotted path for every import in the module (any scope)."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                if a.name != "*":
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"
    return bound


def _scope_names(scope: ast.AST) -> tuple[set[str], set[str]]:
    """(names bound in this scope, names it declares global)."""
    names: set[str] = set()
    declared_global: set[str] = set()
    if isinstance(scope, _FUNCS):
        a = scope.args
        for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
            if arg is not None:
                names.add(arg.arg)
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
        elif isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            names.add(node.name)
        todo.extend(ast.iter_child_nodes(node))
    return names - declared_global, declared_global


class _Gate(ast.NodeVisitor):
    def __init__(self, source: str):
        self.lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.found: list[tuple[int, int, str]] = []
        self.bound: dict[str, str] = {}          # name -> import path (or "type()" marker)
        self.scopes: list[tuple[ast.AST, set[str]]] = []
        self.module_names: set[str] = set()
        self.call_funcs: set[int] = set()         # id() of Name nodes that are a call's func

    # ---- driver / output ----
    def run(self, tree: ast.AST) -> None:
        self.bound = _import_bindings(tree)
        self._aliases(tree)
        names, _ = _scope_names(tree)
        self.module_names = names
        for node in ast.walk(tree):
            if isinstance(node, ast.Global):
                self.module_names.update(node.names)
        self.visit(tree)

    def report(self) -> list[str]:
        out, seen = [], set()
        for line, _, text in sorted(self.found, key=lambda f: (f[0], f[1])):
            if text not in seen:
                seen.add(text)
                out.append(text)
        return out

    def flag(self, node: ast.AST, reason: str) -> None:
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        if len(text) > _MAX_LINE:
            text = text[:_MAX_LINE - 3] + "..."
        self.found.append((line, getattr(node, "col_offset", 0), f"line {line}: `{text}`: {reason}"))

    def _aliases(self, tree: ast.AST) -> None:
        """`F = torch.nn.functional` makes F an import-rooted name; `T = type(x)` a class."""
        for _ in range(4):
            changed = False
            for node in ast.walk(tree):
                if not isinstance(node, ast.Assign):
                    continue
                path = self.chain(node.value)[1] if not _is_type_call(node.value) else "type()"
                if path is None:
                    continue
                for target in node.targets:
                    if isinstance(target, ast.Name) and self.bound.get(target.id) != path:
                        self.bound[target.id] = path
                        changed = True
            if not changed:
                return

    # ---- chains ----
    def chain(self, node: ast.AST) -> tuple[list[str], str | None, ast.AST]:
        """(components, import path if import-rooted, base node) of `a.b.c` or getattr(a, "b")."""
        attrs: list[str] = []
        while True:
            if isinstance(node, ast.Attribute):
                attrs.append(node.attr)
                node = node.value
            elif _literal_getattr(node):
                attrs.append(node.args[1].value)
                node = node.args[0]
            else:
                break
        attrs.reverse()
        if isinstance(node, ast.Name):
            root = self.bound.get(node.id)
            if root is not None and root != "type()":
                parts = root.split(".") + attrs
                return parts, ".".join(parts), node
            return [node.id, *attrs], None, node
        return attrs, None, node

    def check_chain(self, node: ast.AST, parts: list[str], path: str | None, base: ast.AST,
                    first_attr: int) -> None:
        """Rules on a chain; `first_attr` is the index of the first component that is an attribute."""
        for i, name in enumerate(parts[first_attr:], start=first_attr):
            reason = A.ANY_ATTRIBUTE.get(name)
            if reason and not (name in A.SELF_ONLY_ATTRIBUTES and i == first_attr
                               and _is_self_or_super(base)):
                self.flag(node, f"`{name}` is not allowed: {reason}")
        for i in range(len(parts) - 1 if path is not None else 0):
            pair = (parts[i], parts[i + 1])
            if pair in A.MODULE_MEMBER_REASONS:
                self.flag(node, f"{'.'.join(pair)} is not allowed: {A.MODULE_MEMBER_REASONS[pair]}")
            elif parts[i] in A.MEMBER_OF_ANY and parts[i + 1] not in A.ANY_ATTRIBUTE:
                self.flag(node, f"{'.'.join(pair)} is not allowed: {A.MEMBER_OF_ANY[parts[i]]}")
        if path is not None:
            reason = self.path_reason(parts)
            if reason:
                self.flag(node, reason)

    def path_reason(self, parts: list[str]) -> str | None:
        top, rest, dotted = parts[0], parts[1:], ".".join(parts)
        for name in rest:  # a forbidden module reached through an allowed one (torch.os)
            if name in A.INDIRECT_MODULES and top in A.ALLOWED_MODULES:
                return f"reaching {name} through {top} is not allowed: {A.MODULE_REASONS[name]}"
        if top == "kernelevolve":
            if not any(p == dotted or p.startswith(dotted + ".") for p in A.KERNELEVOLVE_ALLOWED):
                return f"{dotted} is not allowed: {A.KERNELEVOLVE_REASON}"
            return None
        if top in ("torch", "triton", "numpy"):
            for name in rest:
                if name.startswith("_") and not _is_dunder(name):
                    return f"{dotted} is not allowed: private {top} internals are off limits"
        if top == "torch":
            return _torch_reason(rest, dotted)
        if top == "numpy":
            for prefix, reason in A.NUMPY_PREFIXES.items():
                if tuple(rest[:len(prefix)]) == prefix:
                    return f"{dotted} is not allowed: {reason}"
        if top == "ctypes" and rest and rest[0] not in A.CTYPES_ALLOWED:
            return f"{dotted} is not allowed: {A.CTYPES_REASON}"
        if rest and (top, rest[0]) in A.MODULE_MEMBERS:
            return f"{dotted} is not allowed: {A.MODULE_MEMBERS[top, rest[0]]}"
        return None

    # ---- scopes ----
    def is_builtin(self, name: str) -> bool:
        for i, (scope, names) in enumerate(self.scopes):
            if name in names and (not isinstance(scope, ast.ClassDef) or i == len(self.scopes) - 1):
                return False
        return name not in self.module_names

    def in_scope(self, scope: ast.AST, body: list[ast.AST]) -> None:
        self.scopes.append((scope, _scope_names(scope)[0]))
        for node in body:
            self.visit(node)
        self.scopes.pop()

    def _visit_args(self, args: ast.arguments, annotations: bool = True) -> None:
        for default in [*args.defaults, *args.kw_defaults]:
            if default is not None:
                self.visit(default)
        if annotations:
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    self.visit(arg.annotation)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        for expr in node.decorator_list:
            self.visit(expr)
        self._visit_args(node.args)
        if node.returns is not None:
            self.visit(node.returns)
        self.in_scope(node, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_args(node.args, annotations=False)
        self.in_scope(node, [node.body])

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for expr in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(expr)
        self.in_scope(node, node.body)

    def _visit_comp(self, node: ast.AST) -> None:
        gens = node.generators
        self.visit(gens[0].iter)
        rest: list[ast.AST] = [gens[0].target, *gens[0].ifs]
        for g in gens[1:]:
            rest += [g.target, g.iter, *g.ifs]
        rest += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
        self._targets(node, [g.target for g in gens])
        self.in_scope(node, rest)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comp

    # ---- imports ----
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if self.check_top(node, alias.name):
                self.check_import_path(node, alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            self.flag(node, "relative imports are not allowed: a candidate is a single module; "
                            + A.ALLOWED_HINT)
            return
        module = node.module or ""
        if not self.check_top(node, module):
            return
        for alias in node.names:
            if alias.name == "*":
                self.flag(node, "star imports are not allowed: import the names you use")
            else:
                self.check_import_path(node, f"{module}.{alias.name}")

    def check_top(self, node: ast.AST, dotted: str) -> bool:
        top = dotted.split(".")[0]
        if top in A.ALLOWED_MODULES:
            return True
        self.flag(node, f"importing {top} is not allowed: {A.MODULE_REASONS.get(top, A.ALLOWED_HINT)}")
        return False

    def check_import_path(self, node: ast.AST, dotted: str) -> None:
        self.check_chain(node, dotted.split("."), dotted, node, 1)

    # ---- names, attributes, calls ----
    def visit_Name(self, node: ast.Name) -> None:
        name = node.id
        if name in ("__builtins__", "__loader__", "__spec__"):
            self.flag(node, f"`{name}` is not allowed: {A.ANY_ATTRIBUTE[name]}")
        elif name in A.FORBIDDEN_BUILTINS and isinstance(node.ctx, ast.Load) and self.is_builtin(name):
            if name != "input" or id(node) in self.call_funcs:
                self.flag(node, f"`{name}` is not allowed: {A.FORBIDDEN_BUILTINS[name]}")
        elif (name in A.ATTR_BUILTINS and id(node) not in self.call_funcs
              and isinstance(node.ctx, ast.Load) and self.is_builtin(name)):
            self.flag(node, f"`{name}` may only be called directly, with a string literal name")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        parts, path, base = self.chain(node)
        n_attrs = _count_attrs(node)
        self.check_chain(node, parts, path, base, len(parts) - n_attrs)
        self.visit(base)
        for inner in _getattr_calls(node):
            self.visit(inner)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            self.call_funcs.add(id(func))
            if func.id in A.ATTR_BUILTINS and self.is_builtin(func.id):
                self.check_attr_builtin(node, func.id)
        self.generic_visit(node)

    def check_attr_builtin(self, node: ast.Call, fn: str) -> None:
        if len(node.args) < 2 or not _is_str(node.args[1]):
            self.flag(node, f"`{fn}` with a computed attribute name hides what is reached; use "
                            f"plain attribute access or a string literal")
            return
        if fn == "hasattr":
            return
        parts, path, base = self.chain(node.args[0])
        name = node.args[1].value
        if path is not None and fn == "getattr":
            self.flag(node, f"getattr on the module {path} is not allowed: write `{path}.{name}`")
        if path is not None and fn in ("setattr", "delattr"):
            self.flag(node, _patch_reason(f"{path}.{name}"))
        elif fn in ("setattr", "delattr") and _is_type_root(self, base):
            self.flag(node, "patching attributes of type(...) changes a class the harness shares")
        self.check_chain(node, [*parts, name], path and f"{path}.{name}", base, len(parts))

    # ---- assignment targets (monkeypatching) ----
    def _targets(self, node: ast.AST, targets: list[ast.AST]) -> None:
        for target in targets:
            if isinstance(target, (ast.Tuple, ast.List)):
                self._targets(node, list(target.elts))
            elif isinstance(target, ast.Starred):
                self._targets(node, [target.value])
            elif isinstance(target, (ast.Attribute, ast.Subscript)):
                inner = target.value if isinstance(target, ast.Subscript) else target
                parts, path, base = self.chain(inner)
                if path is not None:
                    self.flag(target, _patch_reason(path))
                elif _is_type_root(self, base):
                    self.flag(target, "patching attributes of type(...) changes a class the "
                                      "harness shares; define your own class instead")

    def visit_Assign(self, node: ast.Assign) -> None:
        self._targets(node, node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign | ast.AnnAssign) -> None:
        self._targets(node, [node.target])
        self.generic_visit(node)

    visit_AnnAssign = visit_AugAssign

    def visit_Delete(self, node: ast.Delete) -> None:
        self._targets(node, node.targets)
        self.generic_visit(node)

    def visit_For(self, node: ast.For | ast.AsyncFor) -> None:
        self._targets(node, [node.target])
        self.generic_visit(node)

    visit_AsyncFor = visit_For

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._targets(node.context_expr, [node.optional_vars])
        self.generic_visit(node)


# ---- helpers ------------------------------------------------------------------------------------

def _torch_reason(rest: list[str], dotted: str) -> str | None:
    if any(name in A.STREAM_NAMES for name in rest):
        return f"{dotted} is not allowed: {A.STREAM_REASON}"
    for prefix, reason in A.TORCH_PREFIXES.items():
        if tuple(rest[:len(prefix)]) == prefix:
            return f"{dotted} is not allowed: {reason}"
    for name in rest:
        if name in A.TORCH_ANYWHERE:
            return f"{dotted} is not allowed: {A.TORCH_ANYWHERE[name]}"
        if rest[0] == "backends" and name.startswith(("set_", "enable_")):
            return f"{dotted} is not allowed: {A.BACKENDS_REASON}"
        for start, reason in A.TORCH_PREFIX_NAMES.items():
            if name.startswith(start) and len(name) > len(start):
                return f"{dotted} is not allowed: {reason}"
    return None


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


def _is_dunder(name: str) -> bool:
    """`__init__`, `__call__`, `__version__`: protocol names, not private internals (the ones that
    reach interpreter internals are in ANY_ATTRIBUTE)."""
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def _is_type_root(gate: _Gate, base: ast.AST) -> bool:
    return _is_type_call(base) or (isinstance(base, ast.Name) and gate.bound.get(base.id) == "type()")


def _is_self_or_super(base: ast.AST) -> bool:
    return ((isinstance(base, ast.Name) and base.id == "self")
            or (isinstance(base, ast.Call) and isinstance(base.func, ast.Name)
                and base.func.id == "super"))


def _count_attrs(node: ast.AST) -> int:
    """Attribute components of a chain (getattr literals included) down to its base."""
    count = 0
    while isinstance(node, ast.Attribute) or _literal_getattr(node):
        count += 1
        node = node.value if isinstance(node, ast.Attribute) else node.args[0]
    return count


def _getattr_calls(node: ast.AST) -> list[ast.AST]:
    """The getattr(...) calls inside a chain, whose own rules and arguments still need a visit."""
    calls = []
    while isinstance(node, ast.Attribute) or _literal_getattr(node):
        if isinstance(node, ast.Call):
            calls.append(node)
            node = node.args[0]
        else:
            node = node.value
    return calls
