"""Tunable constants of a candidate: parse `TUNABLES` with `ast`, rewrite constants in place.

A candidate declares its search space as a module-level dict literal whose keys name
module-level constants assigned elsewhere in the same source:

    ROWS_PER_TASK = 0            # 0: one contiguous block of rows per thread
    TUNABLES = {"ROWS_PER_TASK": [0, 4, 16, 64]}

Each constant must have exactly one module-scope binding, `NAME = <literal>` (int, float,
bool or str; a leading sign is fine), so the value is known without running anything and a
rewrite is one splice. `rewrite` replaces exactly the characters of those literals (found
from the AST nodes' line/column offsets) and leaves every other byte alone, comments and
formatting included, so a tuned candidate diffs against its parent in the constants only.

A current value that is missing from its list is not an error: it becomes one more allowed
value (in sorted position when the list is sorted, else at the end). A parent whose constant
was edited by hand or by another operator stays tunable, and its own configuration is
always a point of its space, so "the parent's config is already seen" holds. `strict=True`
turns that case into a `TunablesError` instead (for linting a candidate).
"""
from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

Value = int | float | bool | str
_SCALARS = (bool, int, float, str)


class TunablesError(ValueError):
    """A malformed TUNABLES declaration; `line` is the 1-based source line when known."""

    def __init__(self, message: str, line: int | None = None):
        self.line = line
        super().__init__(f"line {line}: {message}" if line else message)

    def __reduce__(self):  # picklable with both arguments (errors cross process boundaries)
        return (_rebuild_error, (str(self), self.line))


def _rebuild_error(text: str, line: int | None) -> TunablesError:
    err = TunablesError.__new__(TunablesError)
    ValueError.__init__(err, text)
    err.line = line
    return err


@dataclass(frozen=True)
class Constant:
    name: str
    value: Value
    line: int                  # 1-based line of the literal's first character
    start: int                 # character offsets of the literal in the source
    end: int


@dataclass(frozen=True)
class Tunables:
    space: dict[str, list[Value]]          # name -> allowed values, in declaration order
    current: dict[str, Value]              # name -> value the source assigns now
    constants: dict[str, Constant]
    warnings: tuple[str, ...] = field(default=())

    def size(self) -> int:
        return math.prod(len(v) for v in self.space.values())


# ---- public API ---------------------------------------------------------------------------

def parse(source: str, *, strict: bool = False) -> Tunables | None:
    """The tunables of `source`, or None when it declares no TUNABLES."""
    tree = _parse_module(source)
    bindings = _module_bindings(tree)
    decl = _find_tunables(bindings)
    if decl is None:
        return None
    declared = _read_space(decl)
    lines = _Lines(source)
    space: dict[str, list[Value]] = {}
    current: dict[str, Value] = {}
    constants: dict[str, Constant] = {}
    warnings: list[str] = []
    for name, (values, line) in declared.items():
        const = _constant(name, bindings.get(name, []), line, lines)
        constants[name], current[name] = const, const.value
        values = list(values)
        if index_of(values, const.value) is None:
            msg = (f"{name} = {const.value!r} is not in TUNABLES[{name!r}] = {values!r}; "
                   f"it is treated as one more allowed value")
            if strict:
                raise TunablesError(msg.split(";")[0], const.line)
            warnings.append(f"line {const.line}: {msg}")
            values = _with_extra(values, const.value)
        space[name] = values
    return Tunables(space, current, constants, tuple(warnings))


def unread(source: str, tun: Tunables) -> set[str]:
    """Tunables no code reads: the name is loaded nowhere in the module (its assignment and its
    TUNABLES entry aside), so every value gives a byte-identical program apart from that one
    literal, and the tuner holds it at its current value instead of spending evaluations."""
    loaded = {node.id for node in ast.walk(_parse_module(source))
              if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return {name for name in tun.space if name not in loaded}


def pinned(tun: Tunables, names: set[str]) -> Tunables:
    """`tun` with `names` held at their current values."""
    return dataclasses.replace(tun, space={n: [tun.current[n]] if n in names else v
                                           for n, v in tun.space.items()})


def read_config(source: str) -> dict[str, Value] | None:
    """The current value of every tunable constant, or None when there is no TUNABLES."""
    tun = parse(source)
    return None if tun is None else dict(tun.current)


def space(source: str) -> dict[str, list[Value]]:
    """Name -> allowed values (the current value included); {} when there is no TUNABLES."""
    tun = parse(source)
    return {} if tun is None else {k: list(v) for k, v in tun.space.items()}


def space_size(source: str) -> int:
    """Number of configurations in the space (0 when there is no TUNABLES)."""
    tun = parse(source)
    return 0 if tun is None else tun.size()


def rewrite(source: str, config: dict[str, Value], *, tunables: Tunables | None = None) -> str:
    """`source` with each constant named in `config` set to its value; nothing else changes.

    Every name must be a tunable and every value one of its allowed values.
    """
    tun = tunables or parse(source)
    if tun is None:
        raise TunablesError("the source declares no TUNABLES")
    edits: dict[str, str] = {}
    for name, value in config.items():
        if name not in tun.space:
            raise TunablesError(f"{name!r} is not a tunable (tunables: "
                                f"{', '.join(tun.space) or 'none'})")
        if index_of(tun.space[name], value) is None:
            raise TunablesError(f"{value!r} is not an allowed value of {name} "
                                f"(allowed: {tun.space[name]!r})", tun.constants[name].line)
        const = tun.constants[name]
        edits[name] = _render(value, source[const.start:const.end])
    return _splice(source, tun, edits)


def family_key(source: str, *, tunables: Tunables | None = None) -> str:
    """Hash of the source with the tunable literals masked: equal for sources that differ
    only in their tunable values, so configurations are comparable within one family."""
    tun = tunables or parse(source)
    if tun is None:
        return hashlib.sha256(source.encode()).hexdigest()[:16]
    masked = _splice(source, tun, {name: "\x00" for name in tun.space})
    return hashlib.sha256(masked.encode()).hexdigest()[:16]


def config_key(config: dict[str, Any]) -> str:
    """Canonical JSON of a configuration (sorted keys, no spaces): equal configs, equal keys.

    JSON keeps int, float, bool and str apart (8 vs 8.0 vs true), as `index_of` does.
    """
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=False)


def index_of(values: list[Value], value: Any) -> int | None:
    """Position of `value` in `values`, comparing type as well (True is not 1, 8 is not 8.0)."""
    for i, v in enumerate(values):
        if type(v) is type(value) and v == value:
            return i
    return None


# ---- parsing ------------------------------------------------------------------------------

def _parse_module(source: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise TunablesError(f"the source does not parse: {exc.msg}", exc.lineno) from None


def _find_tunables(bindings: dict[str, list[tuple[ast.AST, ast.expr | None]]]
                   ) -> ast.Dict | None:
    found = bindings.get("TUNABLES", [])
    if not found:
        return None
    if len(found) > 1:
        lines = ", ".join(str(n.lineno) for n, _ in found)
        raise TunablesError(f"TUNABLES is assigned more than once (lines {lines})",
                            found[1][0].lineno)
    node, value = found[0]
    if value is None or not isinstance(value, ast.Dict):
        raise TunablesError("TUNABLES must be one top-level dict literal: "
                            'TUNABLES = {"NAME": [value, ...], ...}', node.lineno)
    return value


def _read_space(decl: ast.Dict) -> dict[str, tuple[list[Value], int]]:
    out: dict[str, tuple[list[Value], int]] = {}
    for key, val in zip(decl.keys, decl.values):
        line = (key or val).lineno
        if key is None:
            raise TunablesError("TUNABLES may not use ** unpacking", line)
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            raise TunablesError("TUNABLES keys must be string literals naming constants", line)
        name = key.value
        if not name.isidentifier():
            raise TunablesError(f"TUNABLES key {name!r} is not a Python name", line)
        if name in out:
            raise TunablesError(f"TUNABLES lists {name!r} twice", line)
        if not isinstance(val, (ast.List, ast.Tuple)) or not val.elts:
            raise TunablesError(f"TUNABLES[{name!r}] must be a non-empty list of literals", line)
        values: list[Value] = []
        for elt in val.elts:
            v = _literal(elt)
            if v is None:
                raise TunablesError(f"TUNABLES[{name!r}] holds `{ast.unparse(elt)}`, which is not "
                                    "an int, float, bool or str literal", elt.lineno)
            if index_of(values, v) is not None:
                raise TunablesError(f"TUNABLES[{name!r}] lists {v!r} twice", elt.lineno)
            values.append(v)
        out[name] = (values, line)
    return out


def _literal(node: ast.expr) -> Value | None:
    """The value of a scalar literal (a signed number counts), else None."""
    inner = node.operand if isinstance(node, ast.UnaryOp) and isinstance(
        node.op, (ast.USub, ast.UAdd)) else node
    if not isinstance(inner, ast.Constant) or type(inner.value) not in _SCALARS:
        return None
    if inner is not node and type(inner.value) not in (int, float):
        return None  # -True, -"x"
    value = ast.literal_eval(node)
    if isinstance(value, float) and not math.isfinite(value):
        return None  # repr(inf) is not Python source
    return value


def _module_bindings(tree: ast.Module) -> dict[str, list[tuple[ast.AST, ast.expr | None]]]:
    """Every module-scope binding of each name: (statement, assigned expression or None).

    None means a binding tune cannot read or rewrite: one nested in if/try/for/with (it may
    not run), augmented, chained or unpacking assignment, for/with/import/def targets, or
    `global` in a function.
    """
    out: dict[str, list[tuple[ast.AST, ast.expr | None]]] = {}

    def add(name: str, stmt: ast.AST, value: ast.expr | None) -> None:
        out.setdefault(name, []).append((stmt, value))

    def names_in(target: ast.AST) -> list[str]:
        return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]

    def visit(stmts: list[ast.stmt], top: bool) -> None:
        for stmt in stmts:
            if isinstance(stmt, ast.Assign):
                simple = top and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
                for target in stmt.targets:
                    for name in names_in(target):
                        add(name, stmt, stmt.value if simple else None)
            elif isinstance(stmt, ast.AnnAssign):
                for name in names_in(stmt.target):
                    simple = top and isinstance(stmt.target, ast.Name)
                    add(name, stmt, stmt.value if simple else None)
            elif isinstance(stmt, ast.AugAssign):
                for name in names_in(stmt.target):
                    add(name, stmt, None)
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                add(stmt.name, stmt, None)
                for inner in ast.walk(stmt):  # `global NAME` inside makes it module-scope
                    if isinstance(inner, ast.Global):
                        for name in inner.names:
                            add(name, inner, None)
            elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for a in stmt.names:
                    add(a.asname or a.name.split(".")[0], stmt, None)
            else:
                for target in _extra_targets(stmt):
                    for name in names_in(target):
                        add(name, stmt, None)
                for body in ("body", "orelse", "finalbody"):
                    visit(getattr(stmt, body, []) or [], False)
                for handler in getattr(stmt, "handlers", []) or []:
                    if handler.name:
                        add(handler.name, handler, None)
                    visit(handler.body, False)
                for case in getattr(stmt, "cases", []) or []:
                    visit(case.body, False)

    visit(tree.body, True)
    # Walrus anywhere at module scope binds a module name too.
    for node in ast.walk(tree):
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            add(node.target.id, node, None)
    return out


def _extra_targets(stmt: ast.stmt) -> list[ast.AST]:
    if isinstance(stmt, (ast.For, ast.AsyncFor)):
        return [stmt.target]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [i.optional_vars for i in stmt.items if i.optional_vars is not None]
    return []


def _constant(name: str, bindings: list[tuple[ast.AST, ast.expr | None]], decl_line: int,
              lines: _Lines) -> Constant:
    if not bindings:
        raise TunablesError(f"TUNABLES names {name!r}, but the module never assigns it; "
                            f"add a module-level `{name} = <literal>`", decl_line)
    if len(bindings) > 1:
        lines = ", ".join(str(getattr(s, "lineno", "?")) for s, _ in bindings)
        raise TunablesError(f"{name} is assigned more than once (lines {lines}); tune needs a "
                            f"single `{name} = <literal>`", getattr(bindings[1][0], "lineno", None))
    stmt, value = bindings[0]
    line = getattr(stmt, "lineno", decl_line)
    if value is None:
        raise TunablesError(f"{name} must be bound by one plain top-level `{name} = <literal>` "
                            "statement", line)
    literal = _literal(value)
    if literal is None:
        raise TunablesError(f"{name} = `{ast.unparse(value)}` is not an int, float, bool or str "
                            "literal, so tune can neither read nor rewrite it", value.lineno)
    start = lines.offset(value.lineno, value.col_offset)
    end = lines.offset(value.end_lineno, value.end_col_offset)
    return Constant(name, literal, value.lineno, start, end)


# ---- splicing -----------------------------------------------------------------------------

class _Lines:
    """Source lines as the tokenizer counts them (\n, \r\n or \r), with character offsets.

    ast column offsets are UTF-8 byte counts; splicing works on characters, so a column is
    converted through its line's text (a non-ASCII character earlier on the line would
    otherwise shift the splice).
    """

    def __init__(self, source: str):
        self.lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$", source)
        self.starts, pos = [], 0
        for text in self.lines:
            self.starts.append(pos)
            pos += len(text)
        self.starts.append(pos)

    def offset(self, lineno: int, byte_col: int) -> int:
        text = self.lines[lineno - 1] if lineno - 1 < len(self.lines) else ""
        col = byte_col if text.isascii() else len(text.encode()[:byte_col].decode())
        return self.starts[lineno - 1] + col


def _splice(source: str, tun: Tunables, edits: dict[str, str]) -> str:
    out, pos = [], 0
    for const in sorted((tun.constants[n] for n in edits), key=lambda c: c.start):
        out.append(source[pos:const.start])
        out.append(edits[const.name])
        pos = const.end
    out.append(source[pos:])
    return "".join(out)


def _render(value: Value, old_text: str) -> str:
    """`repr(value)`, in double quotes when the old literal used them and that is exact."""
    text = repr(value)
    if isinstance(value, str) and old_text.startswith('"') and text.startswith("'"):
        swapped = '"' + text[1:-1] + '"'
        if '"' not in value and "\\" not in text and ast.literal_eval(swapped) == value:
            return swapped
    return text


def _with_extra(values: list[Value], extra: Value) -> list[Value]:
    numeric = all(type(v) in (int, float) for v in [*values, extra])
    if numeric and values == sorted(values):
        return sorted([*values, extra])
    if numeric and values == sorted(values, reverse=True):
        return sorted([*values, extra], reverse=True)
    return [*values, extra]
