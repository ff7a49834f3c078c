"""Measurement from outside the candidate's process (harness/measure.py): the clock, the
reference and the checks live in a process that never loads candidate code.

What the corpus checks by verdict (tests/corpus/bad_cache_version, bad_capi_forward,
bad_busy_thread, ...), these tests check by figure: attacks that used to inflate a speedup
now measure what the kernel really does, and the pieces hold on their own.
"""
from __future__ import annotations

import os
import signal
from dataclasses import replace

import pytest
import torch

from conftest import CORPUS, PROBLEMS, example
from kernelevolve.harness import measure, timed_link
from kernelevolve.harness.integrity import (idle_cpu_problem, norm_ratio_problem,
                                            sampled_calls_problem)
from kernelevolve.harness.shared_inputs import ReadOnlySets, SharedSets

pytestmark = pytest.mark.slow


def _speedup(evaluator, candidate, **layers):
    opts = replace(evaluator.options, **layers)
    result = evaluator.evaluate(example("softmax"), candidate, options=opts)
    assert result.accepted, result.reason
    return result.speedup


def test_attacks_on_the_clock_and_the_baseline_measure_what_the_kernel_does(evaluator):
    """Each of these was accepted with an inflated speedup when the candidate's process held
    the clock and the baseline (6.98x, 1.55x, 1.39x for a 0.19x kernel, seen). Now each is
    within noise of the same kernel without the trick."""
    tricks = {"bad_capi_timer.py": dict(static_rules=False, inspect_libraries=False),
              "bad_cache_sampled.py": {}, "bad_cache_checksum.py": {},
              "bad_gc_introspection.py": dict(static_rules=False)}
    # The honest kernel is measured on both sides of each trick: on a loaded machine the round
    # trip grows and pulls a slow kernel's speedup towards 1, and load changes by the minute.
    # The bound is 3x the honest figure: the smallest inflation these tricks reached before the
    # fix was 7.3x (1.39x for a 0.19x kernel), while a 2-thread OpenMP kernel beside a busy
    # CI neighbour has been measured 1.8x apart from itself a minute later.
    before = _speedup(evaluator, CORPUS / "good_softmax_cpp.py")
    for name, layers in tricks.items():
        got = _speedup(evaluator, CORPUS / name, **layers)
        after = _speedup(evaluator, CORPUS / "good_softmax_cpp.py")
        honest = max(before, after)
        assert got < 1.0, f"{name}: {got:.3f}x, a win for a {honest:.3f}x kernel"
        assert got < 3.0 * honest, f"{name}: {got:.3f}x against the honest {honest:.3f}x"
        before = after


REFERENCE_ALONE = '''
import sys
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        loaded = [n for n in sys.modules if n.startswith("ke_candidate")]
        if loaded:  # the reference is timed where candidate code is loaded
            raise RuntimeError(f"candidate modules in the reference's process: {loaded}")
        return x * 2.0


def get_inputs():
    return [torch.randn(64, 256)]


def get_init_inputs():
    return []
'''

DOUBLER = '''
import ctypes
import torch
import torch.nn as nn
from kernelevolve.runtime import load_cpp, ptr

lib = load_cpp(r"""
#include <cstdint>
extern "C" void twice(const float* x, float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 2 * x[i]; }
""", name="doubler")
lib.twice.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        lib.twice(ptr(x), ptr(y), x.numel())
        return y
'''


def test_the_reference_is_timed_where_no_candidate_code_is_loaded(evaluator, write):
    result = evaluator.evaluate(write("reference_alone.py", REFERENCE_ALONE),
                                write("doubler.py", DOUBLER))
    assert result.accepted and result.measured, result.reason
    facts = result.integrity["outside"]["default"]
    assert facts["sampled_calls"] >= 3 and facts["calls_per_batch"] >= 1


def test_shared_input_sets_are_read_only_to_the_reader():
    template = [torch.arange(12, dtype=torch.float32).reshape(3, 4), 7]
    shared = SharedSets(template, 2)
    shared.fill(1, [torch.full((3, 4), 5.0), 9])
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the reader
        import faulthandler

        faulthandler.disable()  # the fault below is the point; no traceback for it
        code = 1
        try:
            reader = ReadOnlySets(os.dup(shared.fd), shared.spec())
            got = reader.get(1, {"1": 9})
            if float(got[0].sum()) == 60.0 and got[1] == 9:
                code = 0
                got[0].add_(1.0)  # a write into a read-only mapping: the process faults
                code = 3
        except BaseException:  # noqa: BLE001
            code = 4
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) in (signal.SIGSEGV, signal.SIGBUS)
    assert float(shared.sets[1][0].sum()) == 60.0  # untouched
    shared.close()


def test_calls_per_batch_follows_time_and_memory():
    assert measure.calls_per_batch(1e-6, 64, 64) == measure.MAX_CALLS
    assert measure.calls_per_batch(0.01, 64, 64) == 1
    assert measure.calls_per_batch(1e-4, 64, 64) == round(measure.BATCH_S / 1e-4)
    assert measure.calls_per_batch(1e-6, measure.SET_BUDGET // 3, 64) == 3


def test_outputs_are_read_from_the_candidates_memory_as_laid_out():
    me = timed_link.TimedProcess(os.getpid(), None, "candidate")
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    got = timed_link.read_tensor(me, t.data_ptr(), "float32", [4, 6], ["float32", [4, 6], [6, 1]])
    assert torch.equal(got, t)
    view = t.t()
    got = timed_link.read_tensor(me, view.data_ptr(), "float32", [6, 4],
                               ["float32", [6, 4], list(view.stride())])
    assert torch.equal(got, view)
    for bad in (["float64", [4, 6], [6, 1]], ["float32", [4, 5], [6, 1]],
                ["float32", [4, 6], [-6, 1]], ["float32", [4, 6], [600, 100]], "garbage"):
        assert timed_link.read_tensor(me, t.data_ptr(), "float32", [4, 6], bad) is None
    assert timed_link.read_tensor(me, 8, "float32", [4, 6], ["float32", [4, 6], [6, 1]]) is None


def test_sampled_calls_and_idle_cpu_verdicts():
    ref = [torch.ones(8)]
    good = [{"batch": 0, "call": 3, "ref": ref, "cand": [torch.ones(8)], "error": None}]
    assert sampled_calls_problem("c", good, None) is None
    stale = [{"batch": 4, "call": 1, "ref": ref, "cand": [torch.zeros(8)], "error": None}]
    assert "timed call 2 of batch 5" in sampled_calls_problem("c", stale, None)
    assert "could not be read" in sampled_calls_problem("c", [{"batch": 0, "call": 0, "ref": ref,
        "cand": None, "error": "the output of call 1 could not be read"}], None)
    assert sampled_calls_problem("c", [], None) and sampled_calls_problem("c", "junk", None)
    quiet = {"total_cpu_s": 0.101, "cand_batches_cpu_s": 0.1, "ref_batches_cpu_s": 0.0005,
             "ref_batches_wall_s": 0.1, "cand_batches_wall_s": 0.1}
    assert idle_cpu_problem("c", quiet) is None
    busy = dict(quiet, total_cpu_s=0.2, ref_batches_cpu_s=0.09)
    assert "90.0 ms of it while the reference" in idle_cpu_problem("c", busy)
    assert idle_cpu_problem("c", {"total_cpu_s": "x"}) is None


def test_rounding_noise_exempts_the_anti_zeros_check_and_nothing_else():
    ref = [torch.full((64,), 3e-6)]
    better = [torch.zeros(64)]
    assert norm_ratio_problem(ref, better)                  # no noise estimate: rejected
    assert norm_ratio_problem(ref, better, [1.0]) is None   # the reference is its own error
    assert norm_ratio_problem(ref, better, [1e-9])          # a reference with signal: rejected
    assert norm_ratio_problem(ref, better, [None])


ZEROS = '''
import ctypes
import torch
import torch.nn as nn
from kernelevolve.runtime import load_cpp, ptr

lib = load_cpp(r"""
#include <cstdint>
extern "C" void zeros(float* y, int64_t n) { for (int64_t i = 0; i < n; ++i) y[i] = 0.0f; }
""", name="zeros_rows")
lib.zeros.argtypes = [ctypes.c_void_p, ctypes.c_int64]


class ModelNew(nn.Module):
    def forward(self, a, b):
        y = torch.empty(a.shape[0], dtype=a.dtype)
        lib.zeros(ptr(y), y.numel())
        return y
'''


def test_zeros_are_the_truth_when_the_reference_is_noise(evaluator, write):
    """Both sides of the rule on real problems: zeros pass where the float64 model says the
    true result is zero (and the corpus's bad_zeros, on 1e-5 * tanh(x), is still rejected)."""
    result = evaluator.evaluate(PROBLEMS / "rounding_noise.py", write("zeros.py", ZEROS))
    assert "norm is" not in result.reason, result.reason  # the anti-zeros check stood aside


def test_the_device_protocol_runs_on_cpu_too(evaluator):
    """On GPUs the candidate is timed in its own process (harness/measure_inprocess.py); CI has
    no GPU, so the same job runs here on CPU: a real speedup, the torch.compile baseline timed
    beside it, and a result cache keyed by tensor version (48x for a 0.3x kernel when the
    timed input sets rotated unchanged) measured at the speed of the work it does."""
    opts = replace(evaluator.options, measurement="inprocess")
    honest = evaluator.evaluate(example("softmax"), CORPUS / "good_softmax_cpp.py",
                                options=replace(opts, baseline="compile"))
    assert honest.accepted, honest.reason
    assert honest.speedup is not None and 0.05 < honest.speedup < 20
    assert honest.compile_speedup is not None and honest.compile_speedup > 0
    assert honest.integrity["profile_unavailable"].startswith("in-process timing")
    cached = evaluator.evaluate(example("softmax"), CORPUS / "bad_cache_version.py",
                                options=opts)
    if cached.accepted:
        assert cached.speedup < 3.0 * honest.speedup, cached.reason
