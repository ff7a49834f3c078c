"""Every environment variable kernelevolve reads is read in knobs.py (issue 17): elsewhere the
environment is only written (a child's scratch folders, Ray's settings before it starts) or
filtered whole by the allowlists knobs.py declares (the worker's and g++'s environments)."""
from __future__ import annotations

import pytest

import ast
from pathlib import Path

import kernelevolve
from kernelevolve import knobs

SRC = Path(kernelevolve.__file__).parent
# where the whole environment is filtered through a knobs.py allowlist, not read by name
FILTERS = {("harness/containment/sandbox.py", "worker_env"), ("harness/containment/sandbox.py", "compiler_env")}


def _reads(tree: ast.AST):
    """(function, line) of each read of os.environ / os.getenv: a call of get / getenv, a
    subscript that loads, `in`, or the mapping passed whole."""
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def function_of(node):
        while node in parents:
            node = parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return node.name
        return "<module>"

    for node in ast.walk(tree):
        is_environ = (isinstance(node, ast.Attribute) and node.attr == "environ"
                      and isinstance(node.value, ast.Name) and node.value.id == "os")
        is_getenv = (isinstance(node, ast.Attribute) and node.attr == "getenv"
                     and isinstance(node.value, ast.Name) and node.value.id == "os")
        if not (is_environ or is_getenv):
            continue
        parent = parents.get(node)
        if isinstance(parent, ast.Subscript) and isinstance(parent.ctx, ast.Store):
            continue                                   # os.environ[k] = v
        if isinstance(parent, ast.Attribute) and parent.attr in ("setdefault", "pop", "update"):
            continue                                   # writes
        yield function_of(node), node.lineno


def test_no_module_but_knobs_reads_the_environment():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "knobs.py":
            continue
        for function, line in _reads(ast.parse(path.read_text())):
            if (rel, function) not in FILTERS:
                found.append(f"{rel}:{line} ({function})")
    assert not found, "read the environment through knobs.py: " + ", ".join(found)


def test_knobs_read_what_they_say(monkeypatch):
    monkeypatch.setenv("KERNELEVOLVE_PRELOAD", "torch,numpy,")
    assert knobs.preload_modules() == ["torch", "numpy"]
    monkeypatch.delenv("KERNELEVOLVE_PRELOAD")
    assert knobs.preload_modules() == ["torch"]
    monkeypatch.setenv("TRITON_INTERPRET", "True")
    assert knobs.triton_interpret()
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not knobs.triton_interpret()
    monkeypatch.setenv("MY_KEY", "sk-123")
    assert knobs.secret("MY_KEY") == "sk-123" and knobs.secret("NO_SUCH_KEY_HERE") == ""
    with knobs.override(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=None):
        assert knobs.ray_auth() == ("token", None)
    assert knobs.compiler_env_names("LC_ALL") and not knobs.compiler_env_names("OPENAI_API_KEY")


@pytest.mark.parametrize("name", ["KERNELEVOLVE_THREADS", "KERNELEVOLVE_COMPILE_MEMORY_MB",
                                  "KERNELEVOLVE_COMPILE_CPU_S"])
def test_whole_number_knobs_refuse_other_values_with_one_line(monkeypatch, name):
    from kernelevolve import knobs
    from kernelevolve.errors import UsageError

    read = {"KERNELEVOLVE_THREADS": knobs.worker_threads,
            "KERNELEVOLVE_COMPILE_MEMORY_MB": knobs.compile_memory_mb,
            "KERNELEVOLVE_COMPILE_CPU_S": knobs.compile_cpu_s}[name]
    monkeypatch.delenv(name, raising=False)
    assert read() is None
    monkeypatch.setenv(name, "12")
    assert read() == 12
    for bad in ("abc", "0", "-3", "1.5"):
        monkeypatch.setenv(name, bad)
        with pytest.raises(UsageError, match=name):
            read()
