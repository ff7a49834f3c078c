"""The Python glue around one C++ kernel call, before (ctypes) and after (the trusted launcher).

A relu-like kernel on 32768 float32 elements, one thread, called the way synthesized drafts call
it: the glue the C++ emitter wrote before the launcher (`.contiguous()`, the shape, `empty_like`,
two `.data_ptr()`, the ctypes call) and the glue it writes now: `kernel_launcher` (the same glue
without `.data_ptr()`, the launcher checking each tensor from C) and, for a flat kernel,
`elementwise_launcher` (the whole glue in one C call); each with the real kernel and with a
no-op kernel of the same signature: the no-op forward IS the glue's cost. ctypes is timed both ways it runs in
the harness: counted (the check job's forwards) and plain (the timed process: `stop_counting`).
Eager is the problem's own `torch.relu`, through `nn.Module.__call__` like both candidates.

Measured on this project's 2-core VM (shared, thread CPU time, one thread, issue 29): glue per
call (the no-op kernel's forward, nn.Module.__call__'s ~0.78 us included) 3.59 us counted / 3.06
us plain through ctypes, 2.83 us through kernel_launcher, 2.39 us through elementwise_launcher,
of which empty_like is ~0.78 us; eager's whole relu call 4.80 us. Synthesized single-op drafts on
32768 floats against eager, before (plain ctypes, as timed) and after: relu 0.87x -> 1.01x, abs
0.92x -> 1.02x (the rest is the kernel: ~2.5 us for relu against ATen's ~2 us).

    python benchmarks/call_glue.py [--numel 32768] [--rounds 30] [--calls 2000] [--threads 1]
                                   [--clock cpu|wall]

Rounds alternate the variants; each figure is the fastest round's per-call time (`calls` calls
back to back): on a shared machine the least disturbed round, the closest to the cost itself. By
default the clock is the thread's CPU time, which leaves out the time spent waiting for a core.
About 20 s.
"""
from __future__ import annotations

import argparse
import ctypes
import time

import torch
import torch.nn as nn

from kernelevolve.runtime import cpp, elementwise_launcher, kernel_launcher, launch, load_cpp

SRC = r"""
#include <cstdint>
extern "C" void relu(const float* x, float* y, int64_t n) {
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = x[i] < 0.0f ? 0.0f : x[i];
}
extern "C" void noop(const float* x, float* y, int64_t n) {}
"""


class Eager(nn.Module):
    def forward(self, x):
        return torch.relu(x)


class CtypesGlue(nn.Module):
    """The emitter's glue before the launcher (synth/cpp_module.py until issue 29)."""

    def __init__(self, lib, name):
        super().__init__()
        self.lib, self.name = lib, name

    def forward(self, x):
        k0_in0 = x.contiguous()
        k0_shape = k0_in0.shape
        out = torch.empty_like(k0_in0)
        if k0_shape.numel():
            getattr(self.lib, self.name)(k0_in0.data_ptr(), out.data_ptr(), k0_shape.numel())
        return out


class LauncherGlue(nn.Module):
    """The emitter's glue now: the launcher takes the tensors."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        k0_in0 = x.contiguous()
        k0_shape = k0_in0.shape
        out = torch.empty_like(k0_in0)
        if k0_shape.numel():
            self.k(k0_in0, out, k0_shape.numel())
        return out


class ElementwiseGlue(nn.Module):
    """The emitter's glue now for a flat kernel: the launcher does all of it."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return self.k(x)


CLOCK = [time.thread_time]  # --clock wall: time.perf_counter


def per_call_us(fn, x, calls: int) -> float:
    clock = CLOCK[0]
    start = clock()
    for _ in range(calls):
        fn(x)
    return (clock() - start) / calls * 1e6


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--numel", type=int, default=32768)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=["cpu", "wall"], default="cpu",
                    help="cpu: this thread's CPU time (what a call costs, not counting the "
                         "time it waited for a core on a shared machine); wall: perf_counter")
    args = ap.parse_args()
    CLOCK[0] = time.thread_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    ok, why = launch.available()
    if not ok:
        print(f"the C launcher is not available here ({why}); 'after' is the ctypes fallback")
    lib = load_cpp(SRC, name="call_glue")
    variants = {"eager torch.relu": Eager()}
    for kernel in ("relu", "noop"):
        fn = getattr(lib, kernel)
        fn.argtypes, fn.restype = [ctypes.c_void_p] * 2 + [ctypes.c_int64], None
        variants[f"ctypes counted, {kernel}"] = CtypesGlue(lib, kernel)
        variants[f"launcher, {kernel}"] = LauncherGlue(
            kernel_launcher(lib, kernel, (torch.float32, torch.float32), ints=1))
        variants[f"elementwise, {kernel}"] = ElementwiseGlue(
            elementwise_launcher(lib, kernel, (torch.float32,), (torch.float32,)))
    x = torch.randn(args.numel)
    with torch.no_grad():
        for name, m in variants.items():
            if "noop" not in name:
                torch.testing.assert_close(m(x), torch.relu(x), rtol=0, atol=0)
        times = _rounds(variants, x, args)
    _report(times, args)
    return 0


def _rounds(variants, x, args) -> dict[str, list[float]]:
    """Alternate the variants round by round; then the ctypes glue again with counting off
    (`stop_counting` swaps every library's functions for plain ones, as the timed process does)."""
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, m in variants.items():
            times[name].append(per_call_us(m, x, args.calls))
    cpp.stop_counting()
    for kernel in ("relu", "noop"):
        times[f"ctypes plain, {kernel}"] = []
    for _ in range(args.rounds):
        for kernel in ("relu", "noop"):
            times[f"ctypes plain, {kernel}"].append(
                per_call_us(variants[f"ctypes counted, {kernel}"], x, args.calls))
            for after in ("launcher", "elementwise"):
                times[f"{after}, {kernel}"].append(
                    per_call_us(variants[f"{after}, {kernel}"], x, args.calls))
        times["eager torch.relu"].append(per_call_us(variants["eager torch.relu"], x, args.calls))
    return times


def _report(times: dict[str, list[float]], args) -> None:
    # the fastest round: on a shared machine the least disturbed one, which is the cost itself
    med = {name: min(v) for name, v in times.items()}
    eager = med["eager torch.relu"]
    print(f"relu-like kernel, {args.numel} float32, {args.threads} thread(s); {args.clock} time "
          f"per call, fastest of {args.rounds} rounds of {args.calls} calls")
    print(f"{'variant':28} {'forward us':>10} {'vs eager':>9}")
    for name, us in med.items():
        print(f"{name:28} {us:10.3f} {eager / us:8.2f}x")
    kernel = med["launcher, relu"] - med["launcher, noop"]
    print("\nglue per call (the no-op kernel's forward, nn.Module.__call__ included): "
          f"before: ctypes counted {med['ctypes counted, noop']:.3f} us, ctypes plain "
          f"{med['ctypes plain, noop']:.3f} us; after: kernel_launcher "
          f"{med['launcher, noop']:.3f} us, elementwise_launcher "
          f"{med['elementwise, noop']:.3f} us")
    print(f"kernel alone (launcher relu - noop): {kernel:.3f} us; eager's whole call "
          f"{eager:.3f} us")
    alloc = min(per_call_us(torch.empty_like, torch.empty(args.numel), 20000)
                              for _ in range(args.rounds))
    print(f"of the glue, torch.empty_like alone: {alloc:.3f} us (each call returns a fresh "
          "tensor, as the reference does)")


if __name__ == "__main__":
    raise SystemExit(main())
