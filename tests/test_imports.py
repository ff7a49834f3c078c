"""The import structure, checked: every module imports on its own (no import cycle that only
order hides), no module-level cycle, and every import follows the layer order declared in
docs/ARCHITECTURE.md (a package imports only from its own layer or the ones below), and no
function is 60 lines long or longer."""
from __future__ import annotations

import pytest

import ast
import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = SRC / "kernelevolve"
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def module_files() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _target(module: str, node: ast.ImportFrom, is_package: bool) -> str | None:
    if not node.level:
        return node.module
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(module: str, path: Path, known: dict) -> set[tuple[str, bool]]:
    """(imported kernelevolve module, lazy) pairs; lazy = inside a function. Imports under
    `if TYPE_CHECKING:` never run and are left out."""
    found: set[tuple[str, bool]] = set()
    is_package = path.name == "__init__.py"

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _is_type_checking(child):
                continue
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.update((a.name, inner) for a in child.names
                             if a.name.split(".")[0] == "kernelevolve")
            elif isinstance(child, ast.ImportFrom):
                target = _target(module, child, is_package)
                if target and target.split(".")[0] == "kernelevolve":
                    for alias in child.names:
                        full = f"{target}.{alias.name}"
                        found.add((full if full in known else target, inner))
            visit(child, inner)

    visit(ast.parse(path.read_text()), False)
    return found


def import_graph() -> dict[str, set[tuple[str, bool]]]:
    known = module_files()
    return {m: imports_of(m, p, known) for m, p in known.items()}


def unit(module: str) -> str:
    """The layer unit of a module: its top-level module or package under kernelevolve."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "kernelevolve"


def declared_layers() -> list[list[str]]:
    text = ARCHITECTURE.read_text()
    block = re.search(r"```layers\n(.*?)```", text, re.S)
    assert block, "docs/ARCHITECTURE.md has no ```layers block"
    layers = []
    for line in block.group(1).splitlines():
        names = line.split("#")[0].split()
        if names:
            layers.append(names)
    return layers


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def test_no_module_level_import_cycle():
    graph = import_graph()
    eager = {m: {d for d, lazy in deps if not lazy and d in graph and d != m}
             for m, deps in graph.items()}
    found = cycles(eager)
    assert not found, f"module cycles: {found}"


def test_no_module_cycle_even_through_function_level_imports():
    """A lazy import hides a cycle from the import order, not from the reader: two modules that
    need each other are one concept split in two (or a private name reached across)."""
    graph = import_graph()
    every = {m: {d for d, _ in deps if d in graph and d != m} for m, deps in graph.items()}
    found = cycles(every)
    assert not found, f"module cycles through function-level imports: {found}"


def declared_sides() -> dict[str, set[str]]:
    """docs/ARCHITECTURE.md's ```harness block: each harness subpackage and what it may import."""
    block = re.search(r"```harness\n(.*?)```", ARCHITECTURE.read_text(), re.S)
    assert block, "docs/ARCHITECTURE.md has no ```harness block"
    sides = {}
    for line in block.group(1).splitlines():
        line = line.split("#")[0]
        if "->" in line:
            name, allowed = line.split("->")
            sides[name.strip()] = set(allowed.split()) | {name.strip()}
    return sides


def test_harness_code_imports_only_across_the_declared_trust_boundaries():
    """Worker code (it runs inside the sandbox, beside the candidate) never imports driver code
    or the gates; the protocol both sides share imports nothing else of the harness."""
    sides = declared_sides()
    assert "driver" not in sides["worker"] and "gates" not in sides["worker"]

    def side(module: str) -> str | None:
        parts = module.split(".")
        return parts[2] if parts[:2] == ["kernelevolve", "harness"] and len(parts) > 2 else None

    graph = import_graph()
    flat = sorted(m for m in graph if side(m) and side(m) not in sides)
    assert not flat, f"harness modules outside the declared subpackages: {flat}"
    crossing = sorted(
        f"{module} imports {dep} ({'in a function' if lazy else 'at module level'})"
        for module, deps in graph.items() if side(module)
        for dep, lazy in deps if side(dep) and side(dep) not in sides[side(module)])
    assert not crossing, "imports across the harness's trust boundaries:\n" + "\n".join(crossing)


def test_no_cycle_between_packages_even_through_function_level_imports():
    packages: dict[str, set[str]] = defaultdict(set)
    for module, deps in import_graph().items():
        packages[unit(module)].update(unit(d) for d, _ in deps if unit(d) != unit(module))
    packages.pop("kernelevolve", None)  # the package root re-exports the public API
    found = cycles(dict(packages))
    assert not found, f"package cycles: {found}"


def test_every_import_follows_the_declared_layer_order():
    layers = declared_layers()
    rank = {name: i for i, names in enumerate(layers) for name in names}
    units = {unit(m) for m in module_files()}
    assert units - rank.keys() == set(), "declare these in docs/ARCHITECTURE.md's layers block"
    assert rank.keys() - units == set(), "the layers block names what does not exist"
    upward = sorted(
        f"{module} imports {dep} ({'in a function' if lazy else 'at module level'})"
        for module, deps in import_graph().items() for dep, lazy in deps
        if rank[unit(dep)] < rank[unit(module)])
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


ISOLATED = r"""
import importlib, json, os, sys, traceback
# Third-party libraries are loaded once, then each kernelevolve module is imported in a fresh
# forked child that has no other kernelevolve module loaded: a cycle that a lucky import order
# hides shows up here as an ImportError.
for heavy in ("torch", "numpy", "rich", "typer", "pydantic", "yaml", "elftools"):
    try:
        importlib.import_module(heavy)
    except ImportError:
        pass
assert not [m for m in sys.modules if m.split(".")[0] == "kernelevolve"]
failures = {}
for name in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            importlib.import_module(name)
            code = 0
        except BaseException:
            os.write(write, traceback.format_exc(limit=-3).encode()[-2000:])
            code = 1
        os._exit(code)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if status != 0:
        failures[name] = b"".join(chunks).decode(errors="replace") or f"status {status}"
print(json.dumps(failures))
"""


@pytest.mark.slow
def test_every_module_imports_on_its_own():
    names = sorted(module_files())
    assert len(names) > 100
    done = subprocess.run([sys.executable, "-c", ISOLATED, json.dumps(names)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60 + 5 * len(names))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == {}


LONGEST = 60  # lines, decorators excluded: a function this long is doing more than one thing


def test_no_function_reaches_the_length_limit():
    long = []
    for module, path in module_files().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines >= LONGEST:
                    long.append(f"{module}.{node.name}: {lines} lines")
    assert not long, f"split these below {LONGEST} lines:\n" + "\n".join(sorted(long))
