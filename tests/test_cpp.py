"""`load_cpp` with the real g++: compile, call, cache by hash, compile errors, launch counting."""
from __future__ import annotations

import ctypes
import pickle
import re

import pytest

from kernelevolve import knobs
from kernelevolve.errors import CppCompileError
from kernelevolve.runtime import launch_counts, load_cpp, ptr, reset_launch_counts

ADD_SRC = r"""
#include <cstdint>
extern "C" int add(int a, int b) { return a + b; }
extern "C" void scale(const float* x, float* y, int64_t n, float s) {
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] * s;
}
"""


@pytest.fixture
def cache(tmp_path):
    """A private compile cache, so every test compiles for real and can inspect the files."""
    with knobs.override(KERNELEVOLVE_CACHE_DIR=str(tmp_path / "cache")):
        yield tmp_path / "cache" / "cpp"


def _libs(cache_dir):
    return sorted(p for p in cache_dir.glob("*.so"))


def test_compiles_and_runs(cache):
    import torch

    lib = load_cpp(ADD_SRC, name="adder")
    assert isinstance(lib, ctypes.CDLL)
    assert lib.add(2, 3) == 5
    lib.scale.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float]
    lib.scale.restype = None
    x = torch.arange(7, dtype=torch.float32)
    y = torch.empty_like(x)
    lib.scale(ptr(x), ptr(y), x.numel(), 2.5)
    assert torch.equal(y, x * 2.5)
    # The library lives in the cache dir, named after `name`.
    (so,) = _libs(cache)
    assert so.name.startswith("adder-")
    assert lib._name == str(so)


def test_same_source_is_not_recompiled(cache):
    first = load_cpp(ADD_SRC, name="cached")
    (so,) = _libs(cache)
    before = so.stat()
    second = load_cpp(ADD_SRC, name="cached")
    after = so.stat()
    assert second._name == first._name == str(so)
    # A recompile would os.replace a new file in: new inode, new mtime.
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino, before.st_mtime_ns, before.st_size)
    assert _libs(cache) == [so]
    assert not [p for p in cache.iterdir() if p.name.startswith("kecc-")]  # no temp dirs left
    assert second.add(40, 2) == 42


def test_flags_and_source_change_the_library(cache):
    src = r'extern "C" int value() { return VALUE; }'
    one = load_cpp(src, name="flagged", flags=("-DVALUE=1",))
    two = load_cpp(src, name="flagged", flags=("-DVALUE=2",))
    assert one._name != two._name
    assert (one.value(), two.value()) == (1, 2)
    other = load_cpp(src + "\n// changed\n", name="flagged", flags=("-DVALUE=1",))
    assert other._name not in (one._name, two._name)
    assert len(_libs(cache)) == 3


def test_name_is_sanitised(cache):
    lib = load_cpp(ADD_SRC, name="../evil name!")
    (so,) = _libs(cache)
    assert so.parent == cache
    assert re.fullmatch(r"[A-Za-z0-9_]+-[0-9a-f]{20}\.so", so.name), so.name
    assert lib.add(1, 1) == 2


def test_compile_error_message(cache):
    src = "\n".join([
        "#include <cstdint>",
        'extern "C" int broken(int a) {',
        "    return a + undefined_thing;",
        "}",
    ])
    with pytest.raises(CppCompileError) as info:
        load_cpp(src, name="broken_kernel")
    lines = str(info.value).splitlines()
    assert lines[0] == "C++ compilation of broken_kernel.cpp failed (1 error(s)):"
    error = [line for line in lines if re.match(r"^broken_kernel\.cpp:3:\d+: error:", line)]
    assert error, lines
    assert "undefined_thing" in error[0]
    assert any("return a + undefined_thing;" in line for line in lines[1:]), lines
    assert any(re.search(r"\|\s*\^", line) for line in lines), lines  # the caret line
    # The temporary directory's path is not in the message, and the full log is kept.
    assert "kecc-" not in str(info.value)
    assert "undefined_thing" in info.value.log
    # Nothing half-built is left in the cache.
    assert _libs(cache) == []
    # It crosses process boundaries intact.
    copy = pickle.loads(pickle.dumps(info.value))
    assert (str(copy), copy.log) == (str(info.value), info.value.log)


def test_compile_error_counts_every_error(cache):
    src = 'extern "C" int f() { return a; }\nextern "C" int g() { return b; }\n'
    with pytest.raises(CppCompileError) as info:
        load_cpp(src, name="two")
    text = str(info.value)
    assert text.splitlines()[0] == "C++ compilation of two.cpp failed (2 error(s)):"
    assert re.search(r"^two\.cpp:1:\d+: error:", text, re.M)
    assert re.search(r"^two\.cpp:2:\d+: error:", text, re.M)


@pytest.mark.parametrize("source", ["", "   \n\t", None, b'extern "C" int f() { return 1; }'],
                         ids=["empty", "blank", "none", "bytes"])
def test_source_must_be_non_empty_text(cache, source):
    with pytest.raises(CppCompileError, match="source must be a non-empty string"):
        load_cpp(source)


def test_launch_counting(cache):
    lib = load_cpp(ADD_SRC, name="counted")
    reset_launch_counts()
    assert launch_counts()["cpp"] == 0
    fn = lib.add  # looking a function up is not a launch
    assert launch_counts()["cpp"] == 0
    for i in range(3):
        assert fn(i, 1) == i + 1
    lib.add(0, 0)
    assert launch_counts()["cpp"] == 4
    # Counting survives argtypes/restype being set, as candidates do.
    lib.scale.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float]
    lib.scale.restype = None
    import torch

    x = torch.ones(4)
    lib.scale(ptr(x), ptr(x), 4, 3.0)
    assert launch_counts()["cpp"] == 5
    assert torch.equal(x, torch.full((4,), 3.0))
    reset_launch_counts()
    assert launch_counts()["cpp"] == 0


def test_launch_counts_is_a_copy(cache):
    reset_launch_counts()
    counts = launch_counts()
    counts["cpp"] = 100
    assert launch_counts()["cpp"] == 0


STOP_COUNTING_SCRIPT = r"""
import ctypes, sys, torch
from kernelevolve.runtime import cpp, launch_counts, load_cpp, ptr
src = sys.stdin.read()
lib = load_cpp(src, name="timed")
lib.scale.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_float]
lib.scale.restype = None
kept = lib.add                      # a reference held elsewhere keeps counting
assert lib.add(1, 1) == 2 and launch_counts()["cpp"] == 1
cpp.stop_counting()
x = torch.ones(4)
lib.scale(ptr(x), ptr(x), 4, 3.0)   # the swapped function keeps its signature (a float)
assert torch.equal(x, torch.full((4,), 3.0)), x
assert lib.add(2, 3) == 5
later = load_cpp(src, name="later")
assert later.add(4, 4) == 8         # a library loaded after is plain too
assert launch_counts()["cpp"] == 1, launch_counts()
assert kept(1, 2) == 3 and launch_counts()["cpp"] == 2
print("ok")
"""


@pytest.mark.slow
def test_stop_counting_makes_calls_plain_and_keeps_their_signatures(cache):
    """The timed process stops counting: later calls (through the functions the glue looked up,
    with their argtypes, and libraries loaded after) are plain ctypes calls. Run in a child,
    since it is for the whole process."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", STOP_COUNTING_SCRIPT], input=ADD_SRC,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr
