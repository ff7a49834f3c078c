"""Integrity rules of the static gate: an AST walk over the candidate's source; nothing is run.

`find_violations` returns one line per finding, "line N: `<source line>`: <reason>", in line
order. The rules (an import allow-list, forbidden builtins, interpreter internals, patching of
imported names, torch/numpy/ctypes members that escape the harness, allow-lists of what may be
reached in modules that run strings, programs or files) are tabled in harness/gates/static_allow.py
and static_members.py, strings Python walks or evaluates (format strings, string annotations)
are read by static_strings.py, and names are resolved by static_scope.py; all are documented in
docs/SECURITY.md. This gate is one layer: it turns the
obvious cheats away early with a reason the model can act on; process isolation, trusted
comparison and the runtime checks hold without it.
"""
from __future__ import annotations

import ast

from kernelevolve.harness.gates import static_allow as A
from kernelevolve.harness.gates import static_inline as I
from kernelevolve.harness.gates import static_strings as S
from kernelevolve.harness.gates.static_scope import (assigned_pairs, import_bindings,
                                               is_self_or_super, is_str, is_type_call,
                                               literal_getattr, scope_names)

_MAX_LINE = 100
_TYPE = "type()"  # binding marker: a name holding type(x), i.e. some class the candidate got


def find_violations(tree: ast.AST, source: str, filename: str) -> list[str]:
    gate = _Gate(source, tree)
    gate.visit(tree)
    return gate.report()


class _Gate(ast.NodeVisitor):
    def __init__(self, source: str, tree: ast.AST):
        self.lines = source.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        self.found: list[tuple[int, int, str]] = []
        self.bound = import_bindings(tree)  # name -> import-rooted dotted path, or _TYPE
        self.scopes: list[tuple[ast.AST, set[str]]] = []
        self.module_names = scope_names(tree)
        self.module_names |= {n for g in ast.walk(tree) if isinstance(g, ast.Global)
                              for n in g.names}
        self.call_funcs: set[int] = set()  # id() of the Name nodes that are called
        self.tree = tree
        self._literals: S.LiteralStrings | None = None  # built at the first `.format`
        self.allowed = A.allowed_modules()
        self.str_format_calls: set[int] = set()  # id() of `str.format` nodes that are called
        self.attr_names: set[int] = set()  # id() of getattr(x, "name") literals, checked there
        self._aliases(tree)

    def _aliases(self, tree: ast.AST) -> None:
        """`G = torch.nn.functional` makes G import-rooted too; `T = type(x)` makes T a class."""
        pairs = [pair for node in ast.walk(tree) for pair in assigned_pairs(node)]
        for _ in range(4):
            changed = False
            for name, value in pairs:
                path = _TYPE if is_type_call(value) else self.chain(value)[1]
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
        while isinstance(node, ast.Attribute) or literal_getattr(node):
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
            sentence = A.ANY_ATTRIBUTE.get(name) or (
                A.UNROOTED_ATTRIBUTE.get(name) if path is None else None)
            if sentence and not (name in A.SELF_ONLY_ATTRIBUTES and i == first_attr
                                 and is_self_or_super(base)):
                self.flag(node, sentence.format(name))
        if path is None:
            return
        if len(parts) > 1:  # a member of an imported forbidden module (os.system, sys.exit);
            pair = (parts[0], parts[1])  # one reached through another module is refused there
            reason = A.MEMBER_REASONS.get(pair)
            if reason is None and pair[1] not in A.ANY_ATTRIBUTE:
                reason = A.ANY_MEMBER_OF.get(pair[0])
            if reason:
                self.flag(node, f"{pair[0]}.{pair[1]} is not allowed: {reason}")
        reason = A.path_reason(parts, self.allowed)
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
        self.scopes.append((scope, scope_names(scope)))
        for node in body:
            self.visit(node)
        self.scopes.pop()

    def _outer_parts(self, args: ast.arguments, *more: ast.AST | None) -> None:
        """Defaults, annotations, decorators: evaluated in the enclosing scope."""
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        annotations = [p.annotation for p in params if p and p.annotation]
        for node in annotations:
            self.check_annotation(node)
        for node in [*args.defaults, *args.kw_defaults, *annotations, *more]:
            if node is not None:
                self.visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if node.returns is not None:
            self.check_annotation(node.returns)
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
        if top not in self.allowed:
            self.flag(node, f"importing {top} is not allowed: "
                            f"{A.MODULE_REASONS.get(top) or A.allowed_hint()}")
        return top in self.allowed

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
        while isinstance(inner, ast.Attribute) or literal_getattr(inner):
            links += 1
            if isinstance(inner, ast.Call):
                self.visit(inner)
            elif inner.attr in S.FORMAT_METHODS:
                self.check_format_link(inner)
            inner = inner.value if isinstance(inner, ast.Attribute) else inner.args[0]
        self.check_chain(node, parts, path, base, len(parts) - links)
        self.visit(base)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name):
            self.call_funcs.add(id(node.func))
            if node.func.id in A.ATTR_BUILTINS and self.is_builtin(node.func.id):
                self.check_attr_builtin(node, node.func.id)
        elif self.is_str_format(node.func):  # str.format(template, ...)
            self.str_format_calls.add(id(node.func))
            template = node.args[0] if node.args else None
            self.check_format_template(node.func, node.func.attr, template)
        self.check_build_call(node)
        self.generic_visit(node)

    # ---- strings Python walks or evaluates (harness/gates/static_strings.py) ----
    def is_str_format(self, node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr in S.FORMAT_METHODS
                and isinstance(node.value, ast.Name) and node.value.id == "str"
                and self.is_builtin("str"))

    def literals(self) -> S.LiteralStrings:
        if self._literals is None:
            self._literals = S.LiteralStrings(self.tree)
        return self._literals

    def check_format_link(self, node: ast.Attribute) -> None:
        """`x.format`: x is the template, unless x is `str` (then the call's first argument)."""
        if not self.is_str_format(node):
            self.check_format_template(node, node.attr, node.value)
        elif id(node) not in self.str_format_calls:
            self.flag(node, f"`str.{node.attr}` may only be called directly, with a literal "
                            f"format string")

    def check_format_template(self, node: ast.AST, method: str, template: ast.AST | None) -> None:
        """The template of `.format` / `.format_map` must be a literal whose fields walk
        nothing (static_strings.py)."""
        values = None if template is None or isinstance(template, ast.Starred) \
            else self.literals().of(template)
        if values is None:
            self.flag(node, S.FORMAT_UNREADABLE.format(method))
            return
        for value in values:
            problem = S.format_problem(value)
            if problem:
                self.flag(node, problem)
                return

    def check_annotation(self, annotation: ast.AST) -> None:
        """String annotations are type expressions, checked by every rule as if written out."""
        for const in S.annotation_strings(annotation):
            tree, why = S.parse_annotation(const.value)
            if why:
                self.flag(const, why)
                continue
            for part in ast.walk(tree):
                ast.copy_location(part, const)
            self.check_annotation(tree.body)
            self.visit(tree.body)

    def check_build_call(self, node: ast.Call) -> None:
        """Compilers that run in the candidate's process: torch.compile(options=...) and
        load_inline's paths and flags (static_inline.py). Also through functools.partial."""
        path = self.chain(node.func)[1]
        if path in ("functools.partial", "functools.partialmethod") and node.args:
            path = self.chain(node.args[0])[1]
            node = ast.Call(node.args[0], node.args[1:], node.keywords, lineno=node.lineno,
                            col_offset=node.col_offset)
        if path == "torch.compile":
            if any(kw.arg is None or kw.arg == "options" for kw in node.keywords):
                self.flag(node, I.COMPILE_OPTIONS)
        elif path == I.LOAD_INLINE:
            problem = I.load_inline_problem(node, self.literals().of)
            if problem:
                self.flag(node, problem)

    def visit_Constant(self, node: ast.Constant) -> None:
        """A string naming a forbidden dunder (`type("C", (), {"__annotations__": ...})`)."""
        if isinstance(node.value, str) and node.value in A.DUNDER_STRINGS \
                and id(node) not in self.attr_names:
            self.flag(node, f"the string '{node.value}' is not allowed: it names interpreter "
                            f"internals; refer to your own names directly")

    def visit_keyword(self, node: ast.keyword) -> None:
        if node.arg in A.DUNDER_STRINGS:
            self.flag(node, f"the keyword {node.arg}= is not allowed: it names interpreter "
                            f"internals; refer to your own names directly")
        self.generic_visit(node)

    def check_attr_builtin(self, node: ast.Call, fn: str) -> None:
        """getattr/setattr/delattr/hasattr: a literal name is checked like `obj.name`."""
        if len(node.args) < 2 or not is_str(node.args[1]):
            self.flag(node, f"`{fn}` with a computed attribute name hides what is reached; use "
                            f"plain attribute access or a string literal")
            return
        self.attr_names.add(id(node.args[1]))
        if fn == "getattr" and node.args[1].value in S.FORMAT_METHODS:
            self.check_format_template(node, node.args[1].value, node.args[0])
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
        return is_type_call(base) or (isinstance(base, ast.Name)
                                       and self.bound.get(base.id) == _TYPE)

    def visit_Assign(self, node: ast.AST) -> None:
        """Assign, AugAssign, AnnAssign, Delete, For: the targets, then everything."""
        targets = getattr(node, "targets", None)
        self._targets(targets if targets is not None else [node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self.check_annotation(node.annotation)
        self.visit_Assign(node)

    visit_AugAssign = visit_Delete = visit_For = visit_AsyncFor = visit_Assign

    def visit_withitem(self, node: ast.withitem) -> None:
        if node.optional_vars is not None:
            self._targets([node.optional_vars])
        self.generic_visit(node)


def _patch_reason(path: str) -> str:
    if path.startswith("torch.backends."):
        return f"assigning {path} is not allowed: {A.BACKENDS_REASON}"
    return (f"monkeypatching {path} is not allowed: the harness and the reference rely on it; "
            f"define your own function or class instead")
