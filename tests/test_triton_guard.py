"""Tests for kernelevolve.runtime.triton_guard: Triton launch counting and the interpreter's
out-of-bounds checker.

Each scenario runs in a fresh interpreter (`TRITON_INTERPRET=1`) in a subprocess: triton reads the
flag when a kernel is decorated, install() patches triton's classes for the life of the process,
and an unchecked out-of-bounds store could corrupt the heap of whoever runs it. The script is a
file, not `-c`, because the Triton interpreter re-reads a kernel's source.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from kernelevolve.runtime.triton_guard import TritonOutOfBoundsError

needs_triton = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="triton not installed")

PRELUDE = '''
import json, pickle
from kernelevolve.runtime import triton_guard
from kernelevolve.runtime.launches import launch_counts, reset_launch_counts
import torch, triton, triton.language as tl

{install}

@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@triton.jit
def off_by_one_load_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs <= n)
    tl.store(out_ptr + offs, x, mask=offs < n)


@triton.jit
def unmasked_store_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n, other=1.0))


@triton.jit
def over_read_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # reads BLOCK elements whatever n is
    tl.store(out_ptr + offs, x, mask=offs < n)


def outcome(fn):
    """Run fn; return what the parent test asserts on."""
    try:
        fn()
    except Exception as exc:
        clone = pickle.loads(pickle.dumps(exc))
        return {{"error": type(exc).__name__, "message": str(exc), "clone": type(clone).__name__,
                 "kernel": getattr(clone, "kernel", None), "op": getattr(clone, "op", None),
                 "lanes": getattr(clone, "lanes", None), "count": launch_counts()["triton"]}}
    return {{"error": None, "count": launch_counts()["triton"]}}


result = {{}}
'''


def run_scenario(tmp_path, body: str, *, install: str = "triton_guard.install()") -> dict:
    script = tmp_path / "scenario.py"
    script.write_text(PRELUDE.format(install=install) + textwrap.dedent(body)
                      + "\nprint('RESULT ' + json.dumps(result))\n")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, f"scenario crashed (rc={proc.returncode}):\n{proc.stderr[-4000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.slow
@needs_triton
def test_masked_kernel_passes_and_counts_one_launch_per_call(tmp_path):
    res = run_scenario(tmp_path, """
        x = torch.arange(10, dtype=torch.float32)
        out = torch.zeros(10)
        result["first"] = outcome(lambda: copy_kernel[(2,)](x, out, 10, BLOCK=8))
        result["second"] = outcome(lambda: copy_kernel[(2,)](x, out, 10, BLOCK=8))
        result["correct"] = bool(torch.equal(out, x))
        reset_launch_counts()
        result["after_reset"] = launch_counts()["triton"]
        copy_kernel.warmup(x, out, 10, BLOCK=8, grid=(2,))  # a warm-up launches nothing
        result["after_warmup"] = launch_counts()["triton"]
        result["installed"] = triton_guard.installed()
    """)
    assert res["first"] == {"error": None, "count": 1}
    assert res["second"] == {"error": None, "count": 2}
    assert res["correct"] and res["installed"]
    assert res["after_reset"] == 0 and res["after_warmup"] == 0


@pytest.mark.slow
@needs_triton
def test_off_by_one_mask_raises_on_load(tmp_path):
    res = run_scenario(tmp_path, """
        x = torch.arange(10, dtype=torch.float32)
        out = torch.zeros(10)
        result["bad"] = outcome(lambda: off_by_one_load_kernel[(2,)](x, out, 10, BLOCK=8))
    """)["bad"]
    assert res["error"] == "TritonOutOfBoundsError" and res["clone"] == "TritonOutOfBoundsError"
    assert res["kernel"] == "off_by_one_load_kernel" and res["op"] == "load" and res["lanes"] == 1
    message = res["message"]
    assert "\n" not in message
    assert message.startswith("out-of-bounds load in kernel 'off_by_one_load_kernel'")
    assert "byte offset 40 of argument 'x_ptr', which holds 40 bytes = 10 x fp32" in message
    assert "offs <= n" in message  # the offending source line is quoted
    assert res["count"] == 0  # a launch that failed is not counted


@pytest.mark.slow
@needs_triton
def test_out_of_bounds_store_is_caught_before_memory_is_written(tmp_path):
    res = run_scenario(tmp_path, """
        x = torch.arange(10, dtype=torch.float32)
        out = torch.full((10,), -1.0)
        result["bad"] = outcome(lambda: unmasked_store_kernel[(1,)](x, out, 10, BLOCK=16))
        # Not even the in-bounds lanes were written: the check runs before the store.
        result["untouched"] = bool((out == -1.0).all())
    """)
    bad = res["bad"]
    assert bad["error"] == "TritonOutOfBoundsError" and bad["op"] == "store"
    assert bad["lanes"] == 6 and "argument 'out_ptr'" in bad["message"]
    assert res["untouched"]


@pytest.mark.slow
@needs_triton
def test_view_inside_storage_passes_but_reading_past_the_storage_fails(tmp_path):
    res = run_scenario(tmp_path, """
        big = torch.arange(32, dtype=torch.float32)
        view = big[8:18]
        out = torch.zeros(10)
        result["view_copy"] = outcome(lambda: copy_kernel[(2,)](view, out, 10, BLOCK=8))
        result["correct"] = bool(torch.equal(out, view))
        # 16 unmasked lanes from element 8 stay inside the 32-element storage: allowed.
        result["inside"] = outcome(lambda: over_read_kernel[(1,)](view, out, 10, BLOCK=16))
        # From element 24 they run past the storage's end.
        result["past_end"] = outcome(lambda: over_read_kernel[(1,)](big[24:], out, 8, BLOCK=16))
    """)
    assert res["view_copy"]["error"] is None and res["correct"]
    assert res["inside"]["error"] is None
    past = res["past_end"]
    assert past["error"] == "TritonOutOfBoundsError" and past["lanes"] == 8
    assert "byte offset 128 of argument 'x_ptr', which holds 128 bytes" in past["message"]


@pytest.mark.slow
@needs_triton
def test_autotuned_and_heuristics_kernels_count_one_launch_per_call(tmp_path):
    res = run_scenario(tmp_path, """
        @triton.autotune(configs=[triton.Config({"BLOCK": 4}), triton.Config({"BLOCK": 8})], key=["n"])
        @triton.jit
        def tuned_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        @triton.heuristics({"BLOCK": lambda args: 8})
        @triton.jit
        def heuristic_copy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        x = torch.arange(10, dtype=torch.float32)
        out = torch.zeros(10)
        grid = lambda meta: (triton.cdiv(10, meta["BLOCK"]),)
        # The first call benchmarks both configs, then launches: still one user launch.
        result["tuned1"] = outcome(lambda: tuned_copy[grid](x, out, 10))
        result["tuned2"] = outcome(lambda: tuned_copy[grid](x, out, 10))
        result["correct"] = bool(torch.equal(out, x))
        reset_launch_counts()
        result["heur"] = outcome(lambda: heuristic_copy[(2,)](x, out, 10))
    """)
    assert res["tuned1"] == {"error": None, "count": 1}
    assert res["tuned2"] == {"error": None, "count": 2}
    assert res["correct"]
    assert res["heur"] == {"error": None, "count": 1}


@pytest.mark.slow
@needs_triton
def test_install_is_idempotent_and_covers_kernels_defined_before_and_after(tmp_path):
    res = run_scenario(tmp_path, """
        result["before"] = triton_guard.installed()
        triton_guard.install()
        triton_guard.install()

        @triton.jit
        def late_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)

        x = torch.arange(4, dtype=torch.float32)
        out = torch.zeros(4)
        result["early"] = outcome(lambda: copy_kernel[(1,)](x, out, 4, BLOCK=4))
        result["late"] = outcome(lambda: late_kernel[(1,)](x, out, 4, BLOCK=4))
        result["after"] = triton_guard.installed()
    """, install="")
    assert res["before"] is False and res["after"] is True
    assert res["early"]["count"] == 1 and res["late"]["count"] == 2


@pytest.mark.slow
@needs_triton
def test_block_pointers_and_atomics_are_checked(tmp_path):
    res = run_scenario(tmp_path, """
        import warnings
        warnings.simplefilter("ignore")

        @triton.jit
        def block_copy(x_ptr, out_ptr, M, N, BM: tl.constexpr, BN: tl.constexpr, CHECK: tl.constexpr):
            src = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
            dst = tl.make_block_ptr(out_ptr, (M, N), (N, 1), (0, 0), (BM, BN), (1, 0))
            if CHECK:
                tl.store(dst, tl.load(src, boundary_check=(0, 1)), boundary_check=(0, 1))
            else:
                tl.store(dst, tl.load(src))

        @triton.jit
        def atomic_sum(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            tl.atomic_add(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs <= n)

        x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
        out = torch.zeros(3, 4)
        result["checked"] = outcome(lambda: block_copy[(1,)](x, out, 3, 4, BM=4, BN=4, CHECK=True))
        result["correct"] = bool(torch.equal(out, x))
        result["unchecked"] = outcome(lambda: block_copy[(1,)](x, out, 3, 4, BM=4, BN=4, CHECK=False))
        result["atomic"] = outcome(lambda: atomic_sum[(1,)](torch.ones(8), torch.zeros(8), 8, BLOCK=16))
    """)
    assert res["checked"]["error"] is None and res["correct"]
    assert res["unchecked"]["error"] == "TritonOutOfBoundsError" and res["unchecked"]["op"] == "load"
    assert res["atomic"]["error"] == "TritonOutOfBoundsError" and res["atomic"]["op"] == "atomic"


def test_install_without_triton_is_a_no_op(tmp_path):
    code = textwrap.dedent("""
        import sys
        sys.modules["triton"] = None  # makes `import triton` raise ImportError
        from kernelevolve.runtime import triton_guard
        triton_guard.install()
        triton_guard.install()
        print("installed", triton_guard.installed())
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "installed False" in proc.stdout


def test_error_pickles_with_its_fields():
    err = TritonOutOfBoundsError("out-of-bounds load in kernel 'k': ...", kernel="k", op="load", lanes=3)
    clone = pickle.loads(pickle.dumps(err))
    assert isinstance(clone, RuntimeError) and type(clone) is TritonOutOfBoundsError
    assert (str(clone), clone.kernel, clone.op, clone.lanes) == (str(err), "k", "load", 3)


def test_gpu_hooks_count_leaf_launches_once_per_outer_scope(monkeypatch):
    """The GPU path (JITFunction.run, Autotuner.run, CompiledKernel[grid]) needs a GPU to run for
    real; here the same wrappers go around stand-ins with triton's signatures."""
    import types

    from kernelevolve.runtime import launches, triton_guard as guard

    class KernelInterface:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    class JITFunction(KernelInterface):
        def run(self, *args, grid, warmup, **kwargs):
            return None if kwargs.get("async_miss") else "compiled"

    class Autotuner(KernelInterface):
        def __init__(self, fn):
            self.fn = fn

        def run(self, *args, **kwargs):
            for _ in range(3):  # benchmark launches
                self.fn.run(*args, **kwargs)
            return self.fn.run(*args, **kwargs)

    class CompiledKernel:
        def __getitem__(self, grid):
            return lambda *args, stream=None: None

    fake = types.SimpleNamespace(KernelInterface=KernelInterface, JITFunction=JITFunction,
                                 Autotuner=Autotuner, CompiledKernel=CompiledKernel)
    guard._patch(fake, "KernelInterface", "__getitem__", guard._scoped_getitem)
    guard._patch(fake, "JITFunction", "run", guard._leaf_run(needs_result=True))
    guard._patch(fake, "JITFunction", "run", guard._leaf_run(needs_result=True))  # idempotent
    guard._patch(fake, "Autotuner", "run", guard._scoped_run)
    guard._patch(fake, "CompiledKernel", "__getitem__", guard._compiled_getitem)
    monkeypatch.setattr(launches, "_counts", {"cpp": 0, "triton": 0})

    kernel = JITFunction()
    kernel[(1,)]()
    kernel.run(grid=(1,), warmup=False)
    assert launches.launch_counts()["triton"] == 2
    kernel.run(grid=(1,), warmup=True)
    kernel[(1,)](async_miss=True)
    assert launches.launch_counts()["triton"] == 2
    Autotuner(kernel)[(1,)]()  # 3 benchmark launches + 1 real one = one user launch
    Autotuner(kernel).run(grid=(1,), warmup=False)
    assert launches.launch_counts()["triton"] == 4
    CompiledKernel()[(1, 1, 1)]()
    assert launches.launch_counts()["triton"] == 5
