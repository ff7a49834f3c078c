"""The code's shape in figures, for reviews and issue notes: files and lines per package,
`dict[str, Any]` annotations, string-key reads (`x["key"]`, `x.get("key")`) in harness/, and
import cycles between modules, at module level and with function-level imports included.

    python3 benchmarks/structure.py [--json]

The import graph is the one tests/test_imports.py checks (loaded from that file, not copied).
"""
from __future__ import annotations

import ast
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "kernelevolve"


def _import_test_module():
    spec = importlib.util.spec_from_file_location("_layer_test", ROOT / "tests" / "test_imports.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def per_package() -> dict[str, tuple[int, int]]:
    files: Counter = Counter()
    lines: Counter = Counter()
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE).parts
        key = parts[0] if len(parts) > 1 else "(top level)"
        if key == "harness" and len(parts) > 2:
            key = f"harness/{parts[1]}"
        files[key] += 1
        lines[key] += len(path.read_text().splitlines())
    return {k: (files[k], lines[k]) for k in sorted(files)}


def _is_str(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def key_reads(tree: ast.AST) -> int:
    count = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_str(node.slice):
            count += isinstance(node.ctx, ast.Load)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault") and node.args
              and _is_str(node.args[0])):
            count += 1
    return count


def dict_any(text: str) -> int:
    return text.count("dict[str, Any]") + text.count("Dict[str, Any]")


def figures() -> dict:
    harness = list((PACKAGE / "harness").rglob("*.py"))
    everything = list(PACKAGE.rglob("*.py"))
    layer_test = _import_test_module()
    graph = layer_test.import_graph()
    eager = {m: {d for d, lazy in deps if not lazy and d in graph and d != m}
             for m, deps in graph.items()}
    every = {m: {d for d, _ in deps if d in graph and d != m} for m, deps in graph.items()}
    return {
        "packages": {k: {"files": f, "lines": n} for k, (f, n) in per_package().items()},
        "dict_str_any": {"harness": sum(dict_any(p.read_text()) for p in harness),
                         "all": sum(dict_any(p.read_text()) for p in everything)},
        "string_key_reads": {
            "harness": sum(key_reads(ast.parse(p.read_text())) for p in harness),
            "all": sum(key_reads(ast.parse(p.read_text())) for p in everything)},
        "cycles_module_level": layer_test.cycles(eager),
        "cycles_with_function_level": layer_test.cycles(every),
    }


def main() -> None:
    data = figures()
    if "--json" in sys.argv:
        print(json.dumps(data, indent=1))
        return
    print(f"{'package':<28}{'files':>6}{'lines':>8}")
    for name, row in data["packages"].items():
        print(f"{name:<28}{row['files']:>6}{row['lines']:>8}")
    print(f"dict[str, Any] annotations: harness {data['dict_str_any']['harness']}, "
          f"all {data['dict_str_any']['all']}")
    print(f"string-key reads: harness {data['string_key_reads']['harness']}, "
          f"all {data['string_key_reads']['all']}")
    for label in ("cycles_module_level", "cycles_with_function_level"):
        found = data[label]
        print(f"{label.replace('_', ' ')}: {len(found)}")
        for ring in found:
            print("  " + " <-> ".join(m.removeprefix("kernelevolve.") for m in ring))


if __name__ == "__main__":
    main()
