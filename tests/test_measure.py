"""Measurement from outside the candidate's process (harness/worker/measure.py): the clock, the
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
from kernelevolve.harness.worker import measure, timed_link
from kernelevolve.harness.protocol import sampled_outputs
from kernelevolve.harness.gates.integrity import (idle_cpu_problem, norm_ratio_problem,
                                            sampled_calls_problem)
from kernelevolve.harness.worker.shared_inputs import ReadOnlySets, SharedSets

pytestmark = pytest.mark.slow


# softmax's main case (weight 2, 512x2048): what each trick inflates is per timed call, so one
# case shows it; the suite's timing policy is unchanged for it.
MAIN_CASE = ("512x2048",)
SMALL = PROBLEMS / "softmax_small.py"


def _speedup(evaluator, candidate, **layers):
    opts = replace(evaluator.options, only_cases=MAIN_CASE, **layers)
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


class _CountingReader(timed_link.TimedProcess):
    """This process's own memory through the real reader, counting what is read."""

    def __init__(self):
        super().__init__(os.getpid(), None, "candidate")
        self.bytes_read = self.reads = 0

    def read_runs(self, runs):
        self.bytes_read += sum(n for _, n in runs)
        self.reads += 1
        return super().read_runs(runs)


def _read(reader, t, spec=None):
    dtype = str(t.dtype).removeprefix("torch.")
    strides = sampled_outputs.described_strides([dtype, list(t.shape), list(t.stride())], dtype,
                                                list(t.shape))
    return sampled_outputs.read(reader, t.data_ptr(), dtype, list(t.shape), strides, spec)


def test_outputs_are_read_from_the_candidates_memory_whatever_their_strides():
    """Any layout the check job accepts is read back exactly: views of padded buffers (far more
    memory than elements: refused before), non-contiguous strides, permutations, broadcasts."""
    me = _CountingReader()
    padded = torch.randn(96, 16)
    wide = torch.randn(300, 4096)
    cube = torch.arange(2 * 3 * 5, dtype=torch.int64).reshape(2, 3, 5)
    views = [padded, padded[:, 0], padded[:, 1:2], padded.t(), padded[::3, ::5], wide[:, :1],
             wide[:, 7:9], torch.randn(5, 1).expand(5, 7), cube.permute(2, 0, 1),
             cube[:, ::2].transpose(0, 2), torch.rand(33, 65).to(torch.bfloat16)[:, 1::2],
             torch.rand(40, 40) > 0.5, torch.empty(0, 4)]
    for view in views:
        got = _read(me, view)
        assert got.shape == view.shape and torch.equal(got, view), (view.shape, view.stride())
    # a large output, read in blocks: the same elements as the reference's contiguous copy
    for view in (wide, wide.t(), wide[:, ::3], wide[::2]):
        shape, strides = list(view.shape), list(view.stride())
        spec = sampled_outputs.choose([("float32", shape, strides)])[0]
        assert spec is not None
        assert torch.equal(_read(me, view, spec), sampled_outputs.gather(view.contiguous(), spec))


def test_an_unreadable_output_names_its_reason():
    me = _CountingReader()
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    with pytest.raises(sampled_outputs.UnreadableOutput, match="not mapped"):
        sampled_outputs.read(me, 8, "float32", [4, 6], [6, 1], None)
    for described, why in ((["float64", [4, 6], [6, 1]], "float64 tensor"),
                           (["float32", [4, 5], [6, 1]], "shape"),
                           (["float32", [4, 6], [-6, 1]], "strides"),
                           (["float32", [4, 6], [1 << 60, 1]], "strides"),
                           ("garbage", "harness's reply was altered")):
        with pytest.raises(sampled_outputs.UnreadableOutput, match=why):
            strides = sampled_outputs.described_strides(described, "float32", [4, 6])
            sampled_outputs.read(me, t.data_ptr(), "float32", [4, 6], strides, None)


def test_every_batch_check_reads_a_bounded_amount_and_draws_new_blocks():
    """What one batch's check reads does not grow with the output (the old budget stopped
    checking instead), and each batch reads other blocks, drawn after it ran."""
    small = torch.randn(64, 64)  # 16 KiB: read whole
    me = _CountingReader()
    _read(me, small, sampled_outputs.choose([("float32", [64, 64], [64, 1])])[0])
    assert me.bytes_read == small.numel() * 4
    bound = sampled_outputs.SAMPLE_BYTES + sampled_outputs.MAX_RUNS * sampled_outputs.GAP_BYTES
    for rows in (1 << 10, 1 << 14, 1 << 16):  # 4 MiB, 64 MiB, 256 MiB
        big = torch.empty(rows, 1024)
        big[::97].fill_(1.0)
        layout = [("float32", [rows, 1024], [1024, 1])]
        drawn = []
        for _ in range(3):
            me = _CountingReader()
            spec = sampled_outputs.choose(layout)[0]
            got = _read(me, big, spec)
            assert me.bytes_read <= bound and got.numel() * 4 <= sampled_outputs.SAMPLE_BYTES
            # bitwise: the untouched pages of torch.empty may hold NaN patterns
            assert torch.equal(got.view(torch.int32),
                               sampled_outputs.gather(big, spec).view(torch.int32))
            drawn.append(tuple(spec["starts"]))
        assert len(set(drawn)) == 3, "the same blocks were drawn twice"
        del big


def test_a_scattered_output_is_read_in_a_bounded_number_of_reads():
    """One element per wide row: each is its own read, so at most MAX_RUNS of them."""
    col = torch.randn(20000, 512)[:, :1]
    spec = sampled_outputs.choose([("float32", [20000, 1], [512, 1])])[0]
    assert spec is not None and spec["block"] == 1
    assert len(spec["starts"]) == sampled_outputs.MAX_RUNS
    me = _CountingReader()
    assert torch.equal(_read(me, col, spec), sampled_outputs.gather(col.contiguous(), spec))
    assert me.bytes_read <= sampled_outputs.MAX_RUNS * 4


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
    forked = dict(quiet, others_cpu_s=0.3, other_processes=6)  # spinners in processes of its own
    assert "300.0 ms in 6 other process(es)" in idle_cpu_problem("c", forked)
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
    """On GPUs the candidate is timed in its own process (harness/worker/measure_inprocess.py); CI has
    no GPU, so the same job runs here on CPU: a real speedup, the torch.compile baseline timed
    beside it, and a result cache keyed by tensor version (48x for a 0.3x kernel when the
    timed input sets rotated unchanged) measured at the speed of the work it does. One case
    (the main one of softmax_small, examples/softmax's model at 16x fewer elements: the
    protocol, not the size, is the subject), at the suite's timing policy: torch.compile
    builds per shape, and its builds were most of this test's time with all the cases."""
    opts = replace(evaluator.options, measurement="inprocess", only_cases=("64x1024",))
    honest = evaluator.evaluate(SMALL, CORPUS / "good_softmax_cpp.py",
                                options=replace(opts, baseline="compile"))
    assert honest.accepted, honest.reason
    assert honest.speedup is not None and 0.05 < honest.speedup < 20
    assert honest.compile_speedup is not None and honest.compile_speedup > 0
    assert honest.integrity["profile_unavailable"].startswith("in-process timing")
    cached = evaluator.evaluate(SMALL, CORPUS / "bad_cache_version.py",
                                options=opts)
    if cached.accepted:
        assert cached.speedup < 3.0 * honest.speedup, cached.reason


def _spin(cpu_s: float) -> None:
    import time

    start = time.process_time()
    while time.process_time() - start < cpu_s:
        pass


def _candidate_side(go: int, done: int) -> None:  # pragma: no cover - a forked process
    """Starts, once told to, a child that spins and is reaped by the kernel at exit (SIGCHLD
    ignored: its time reaches no /proc file) and an orphan that spins and stays. Each says when
    its spinning is over."""
    import signal as sig

    os.read(go, 1)
    sig.signal(sig.SIGCHLD, sig.SIG_IGN)
    if os.fork() == 0:
        _spin(0.15)
        os.write(done, b"x")
        os._exit(0)
    if os.fork() == 0:
        if os.fork() == 0:  # re-parented to the coordinator, a subreaper
            _spin(0.15)
            os.write(done, b"x")
            os.read(go, 1)  # stays until the coordinator ends
        os._exit(0)
    os.read(go, 1)
    os._exit(0)


def test_every_process_of_the_candidates_side_is_counted():
    """A process the candidate started, reaped by the kernel the moment it exits, and an
    orphan re-parented to the coordinator: both are counted (perf), the orphan by /proc too."""
    import json

    from kernelevolve.harness.containment.reaper import become_subreaper, kill_leftovers
    from kernelevolve.harness.worker.side_cpu import SideAccount, SideCPU

    out_r, out_w = os.pipe()
    coordinator = os.fork()
    if coordinator == 0:  # pragma: no cover - the coordinator
        code = 1
        try:
            become_subreaper()
            go_r, go_w = os.pipe()
            done_r, done_w = os.pipe()
            cand = os.fork()
            if cand == 0:
                _candidate_side(go_r, done_w)
            side = SideCPU(cand, -1)
            side.attach()
            account = SideAccount(side)
            account.timed_pairs_start()
            own0 = timed_link.TimedProcess(cand, None, "candidate").cpu_s()
            os.write(go_w, b"x")
            for _ in range(2):
                os.read(done_r, 1)
            own = timed_link.TimedProcess(cand, None, "candidate").cpu_s() - own0
            result = account.result(own)
            result["unavailable"] = side.unavailable
            os.write(out_w, json.dumps(result).encode())
            side.close()
            code = 0
        finally:
            kill_leftovers(False)
            os._exit(code)
    os.close(out_w)
    data = b""
    while chunk := os.read(out_r, 1 << 16):
        data += chunk
    os.waitpid(coordinator, 0)
    got = json.loads(data)
    assert got["others_proc_s"] >= 0.12, got  # the orphan, by /proc
    if got["unavailable"] is None:
        assert got["others_perf_s"] >= 0.27, got  # both spinners, by perf
    assert got["others_cpu_s"] >= max(got["others_perf_s"] or 0.0, got["others_proc_s"])
