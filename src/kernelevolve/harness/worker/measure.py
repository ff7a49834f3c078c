"""Measurement from outside the candidate's process (CPU platforms).

The measure job's child is the coordinator. It runs no model itself and never loads candidate
code: it forks the candidate's process and the reference's process first
(harness/worker/candidate_proc.py), then makes the inputs and times both the same way:

- by round trip: it sends "run these n calls" and stops its clock when the answer comes, so
  no clock the candidate can reach decides its time, and the reference (and the compiled
  baseline) pay exactly the same handshake and wake-ups as the candidate. Batches last about
  `BATCH_S` or more, so what the handshake adds (0.04-0.25 ms on a small VM) stays small on both
  sides;
- every call, on both sides, on input content the candidate's process has not seen before:
  the batch's sets are refilled from `get_inputs()` under seeds from the kernel's random
  source (`os.urandom`, not this process's memory, which the candidate could otherwise read)
  right before the pair of batches that uses them, in shared memory both processes map
  read-only;
- after every timed candidate batch, one call chosen at random (again from `os.urandom`) is
  checked: its outputs, or blocks of them drawn after the batch so the cost is bounded whatever
  the output size (harness/protocol/sampled_outputs.py), are read straight from the candidate's memory
  and go to the driver with the same elements of the reference's outputs for the same inputs
  (sent by the reference process, which is not dumpable). A cache of any key returns a stale
  output there, and no timed batch goes unchecked;
- the candidate's process CPU clock is read around each of its batches, and so is the CPU of
  every process of the candidate's side (its own and all it started: harness/worker/side_cpu.py):
  whatever the side uses outside the candidate's own batches (while the reference runs, between
  batches, in other processes) is reported, and the driver rejects more than a small allowance:
  hidden work, or threads or processes stealing the reference's cores.

Before any batch of a case is timed, the candidate's first call of it runs untimed, with build
requests served as at load: a library that forward builds lazily is built there. A build asked
for during a timed batch is refused, its cause named (harness/worker/link_faults.py).

Reference and candidate batches alternate which goes first, and each pair shares its input
sets, so drift, load and cache warmth cancel; per-call times are batch time over calls.
"""
from __future__ import annotations

import ctypes
import os
import secrets
import time
from typing import Any

from kernelevolve.harness.worker import candidate_proc
from kernelevolve.harness.protocol import sampled_outputs
from kernelevolve.harness.worker.context import JobContext
from kernelevolve.harness.containment.reaper import become_subreaper
from kernelevolve.harness.worker.session import JobFailure, Session
from kernelevolve.harness.worker.side_cpu import SideAccount, SideCPU
from kernelevolve.harness.protocol.tensor_bytes import itemsize
from kernelevolve.harness.worker.timed_link import TimedProcess, threads
from kernelevolve.harness.protocol.timing import StopRule, TimingPolicy
from kernelevolve.harness.protocol.messages import JobRequest
from kernelevolve.harness.protocol.replies import MeasureCase, MeasureReply

BATCH_S = 0.0025           # the faster side's batch lasts this: long enough that the round
                           # trip (~0.04-0.25 ms here, paid by both sides) is small, short enough
                           # that the sets and kept outputs stay few (each call writes a fresh
                           # output buffer, so longer batches measure a colder cache)
WARM_PAIRS = 3             # warm-up pairs at most (warming stops once the batch size holds)
MAX_CALLS = 256            # calls per batch, at most
SET_BUDGET = 256 << 20     # bytes of input sets per case, and of outputs the candidate keeps
_PR_SET_DUMPABLE = 4
REF_PERF_UNAVAILABLE = ("perf: the reference process is not dumpable (so that the candidate "
                        "cannot read it), so its counters cannot be attached from outside")


def job_measure(req: JobRequest, ctx: JobContext) -> MeasureReply:
    ctx.stage("problem")
    # Orphans of the candidate's side are re-parented here, not to the server: they stay in
    # this process's subtree, where they are counted (harness/worker/side_cpu.py).
    become_subreaper()
    # Both first: before this process starts any thread pool.
    cand = TimedProcess(*candidate_proc.spawn(req, "candidate"), "candidate")
    ref = TimedProcess(*candidate_proc.spawn(req, "reference"), "reference")
    # Not dumpable: the candidate's process may not open this one's memory (its random state,
    # the sampled reference outputs), even where no Yama ptrace policy is set.
    ctypes.CDLL(None).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    try:
        return _measure(req, ctx, cand, ref)
    finally:
        cand.request_exit()
        ref.request_exit()
        cand.close()
        ref.close()


def _measure(req: JobRequest, ctx: JobContext, cand: "TimedProcess",
             ref: "TimedProcess") -> MeasureReply:
    session = Session(req)
    policy = req.params.timing_policy()
    if req.params.baseline == "compile":
        ctx.stage("compile")
    ready = ref.wait_ready()
    compile_error = ready.get("compile_error") if isinstance(ready.get("compile_error"),
                                                            str) else None
    baseline = req.params.baseline == "compile" and compile_error is None
    cand.relay_load(ctx)
    side = SideCPU(cand.pid, ref.pid)
    try:
        side.attach()
        if side.incomplete:
            raise JobFailure("integrity", side.incomplete)
        result = {}
        for case in session.cases:
            ctx.stage("timing")
            result[case.name] = MeasureCase.from_wire(
                CaseTiming(session, case, ref, baseline, cand, policy, side, ctx).run())
    finally:
        side.close()
    return MeasureReply(result, protocol="outside", compile_error=compile_error)


def _seed() -> int:
    return 1 + int.from_bytes(os.urandom(4), "little") % (2**31 - 1)


class CaseTiming:
    """One case: batch sizing, the interleaved loop, the sampled checks, the CPU accounts."""

    def __init__(self, session: Session, case, ref: TimedProcess, baseline: bool,
                 cand: TimedProcess, policy: TimingPolicy, side: SideCPU,
                 ctx: JobContext | None = None):
        self.session, self.case, self.ref, self.baseline = session, case, ref, baseline
        self.cand, self.policy, self.side, self.ctx = cand, policy, side, ctx

    def run(self) -> dict[str, Any]:
        from kernelevolve.harness.worker.shared_inputs import InputLayoutError, layout

        self.template = self.session.inputs(self.case, _seed())
        self.set_bytes = layout(self.template)[1]
        try:
            self._resize(1)
        except InputLayoutError as exc:
            raise JobFailure("problem", f"case {self.case.name!r}: {exc}") from None
        numbers = self._fill()
        t_ref, done = self._calibrate(numbers)
        self._first_call(numbers)
        self.out_layout = [(d, list(shape)) for d, shape, _ in done["layout"]]
        out_bytes = 0
        for dtype, shape in self.out_layout:
            numel = 1
            for n in shape:
                numel *= n
            out_bytes += numel * itemsize(dtype)
        self.out_bytes = out_bytes
        self._resize(calls_per_batch(t_ref, self.set_bytes, out_bytes))
        return self._loop()

    def _resize(self, n: int) -> None:
        from kernelevolve.harness.worker.shared_inputs import SharedSets

        if getattr(self, "shared", None) is not None:
            self.shared.close()
        self.n, self.shared = n, SharedSets(self.template, n)
        cpu0 = self.cand.cpu_s()
        account = getattr(self, "account", None)
        if account is not None:
            account.enter()
        for proc in (self.ref, self.cand):
            proc.send_sets(self.case.name, self.shared)
        if account is not None:
            account.leave()
        # Mapping the sets is the harness's work, done before any content is written: not
        # counted as the candidate's CPU outside its batches.
        self.setup_cpu_s = getattr(self, "setup_cpu_s", 0.0) + self.cand.cpu_s() - cpu0

    def _calibrate(self, numbers: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        """The reference's time for one call (round trip included: an upper bound), and the
        layout of its outputs."""
        times, done = [], {}
        for _ in range(3):
            start = time.perf_counter()
            done = self.ref.batch(self.case.name, [0], numbers)
            times.append(time.perf_counter() - start)
        lay = done.get("layout")
        if not isinstance(lay, list) or not all(
                isinstance(x, list) and len(x) == 3 for x in lay):
            raise JobFailure("problem", f"case {self.case.name!r}: the reference's outputs "
                                        "could not be described")
        return max(min(times), 1e-7), done

    def _first_call(self, numbers: dict[str, Any]) -> None:
        """The candidate's first call of the case, on the calibration's set, untimed and
        outside every CPU account (those start with the timed loop): a library that forward
        builds lazily is built here, under the load stage's limit like one built at import.
        A build asked for later, during a timed batch, is refused with its cause named
        (harness/worker/link_faults.py)."""
        if self.ctx is not None:
            self.ctx.stage("load")
        self.cand.first_call(self.case.name, [0], numbers, self.ctx)
        if self.ctx is not None:
            self.ctx.stage("timing")

    def _generate(self) -> None:
        """The next pair's input contents, from get_inputs() under fresh seeds. Made after
        the previous pair and copied into the sets right before this one, so what the batches
        read is what was written last (as a producer's output would be), not what the
        generator's temporaries left behind."""
        self._next = self.session.inputs_many(self.case, _seed(), self.n)

    def _fill(self) -> dict[str, Any]:
        """Fresh content for every set; returns the non-tensor inputs per set."""
        if len(getattr(self, "_next", [])) != self.n:
            self._generate()
        numbers = {}
        for k, values in enumerate(self._next):
            self.shared.fill(k, values)
            extra = self.shared.numbers(k)
            if extra:
                numbers[str(k)] = extra
        self._next = []
        return numbers

    def _timed_batch(self, proc: TimedProcess, numbers: dict[str, Any],
                     model: str = "ref") -> tuple[float, float, dict[str, Any]]:
        """One batch of n calls on `proc`, by round trip; returns the wall time, the
        candidate's CPU time over it, and the answer. Past the warm-up, `proc`'s profile is
        read from outside around it (harness/worker/proc_profile.py), outside the clock."""
        profile = self.profiles.get(proc.role) if self.profiling and model == "ref" else None
        if profile is not None:
            profile.before()
        if proc is self.cand:
            self.account.enter()
        cpu0 = self.cand.cpu_s()
        start = time.perf_counter()
        done = proc.batch(self.case.name, list(range(self.n)), numbers, model)
        wall = time.perf_counter() - start
        cpu = self.cand.cpu_s() - cpu0
        if proc is self.cand:
            self.account.leave()
        if profile is not None:
            profile.after(self.n)
        return wall, cpu, done

    def _loop(self) -> dict[str, Any]:
        from kernelevolve.harness.worker.proc_profile import ProcessProfile

        self.profiling = False
        self.profiles = {"candidate": ProcessProfile(self.cand.pid),
                         "reference": ProcessProfile(self.ref.pid, REF_PERF_UNAVAILABLE)}
        try:
            out = self._timed_loop()
            out["profile"] = {side: p.result() for side, p in self.profiles.items()}
            return out
        finally:
            for p in self.profiles.values():
                p.close()

    def _timed_loop(self) -> dict[str, Any]:
        ref_ms, cand_ms, comp_ms, samples = [], [], [], []
        acct = {"cand_batches_cpu_s": 0.0, "ref_batches_cpu_s": 0.0, "total_cpu_s": 0.0,
                "ref_batches_wall_s": 0.0, "cand_batches_wall_s": 0.0}
        rep = 0
        stop = StopRule(self.policy)
        warm, fresh = (WARM_PAIRS if self.policy.warmup > 0 else 0), True
        start = time.monotonic()
        self.account = SideAccount(self.side)
        cpu_start, self.setup_cpu_s = self.cand.cpu_s(), 0.0
        while True:
            numbers = self._fill()
            self.profiling = not warm
            if not warm:
                self.account.timed_pairs_start()
            timed, done = self._pair(rep, numbers, acct)
            if warm:  # warm-up pairs: caches, pools, the candidate's lazy setup. From the
                warm -= 1  # second pair at a size on, the batch is sized by the faster side,
                if fresh:  # until the size holds still. The first pair at a size pays its
                    fresh = False  # setup (new mappings, output pages, first calls): sized on
                    continue  # it, a 0.5 ms kernel's batches held 2 calls, not 5
                fastest = min(timed["ref"], timed["cand"]) / self.n
                n = calls_per_batch(fastest, self.set_bytes, self.out_bytes)
                if n != self.n:
                    self._resize(n)
                    fresh = True
                else:
                    warm = 0
                continue
            ref_ms.append(1e3 * timed["ref"] / self.n)
            cand_ms.append(1e3 * timed["cand"] / self.n)
            if "compile" in timed:
                comp_ms.append(1e3 * timed["compile"] / self.n)
            samples.append(self._sample(done, rep))  # every timed batch: none goes unchecked
            if samples[-1]["error"]:  # the verdict is decided: nothing more to time
                break
            self._generate()
            rep += 1
            # A sample is a batch of n calls: max_reps counts calls (past it a median moves
            # less than the machine's noise), min_reps counts samples (for the bootstrap).
            if stop.done(rep, rep * self.n, time.monotonic() - start, ref_ms, cand_ms):
                break
        acct["total_cpu_s"] = self.cand.cpu_s() - cpu_start - self.setup_cpu_s
        acct["setup_cpu_s"] = self.setup_cpu_s
        acct.update(self.account.result(acct["total_cpu_s"] - acct["cand_batches_cpu_s"]))
        return {"ref_ms": ref_ms, "cand_ms": cand_ms, "compile_ms": comp_ms or None,
                "loop_s": time.monotonic() - start, "calls_per_batch": self.n,
                "stopped": stop.why or None,
                "samples": samples, "cpu": acct, "threads": threads(self.cand.pid)}

    def _pair(self, rep: int, numbers: dict[str, Any], acct: dict[str, float]):
        """One reference batch and one candidate batch on the same sets, in alternating order
        (and the compiled baseline's, next to the reference's)."""
        timed: dict[str, float] = {}
        done: dict[str, Any] = {}
        for side in (("ref", "cand") if rep % 2 == 0 else ("cand", "ref")):
            if side == "cand":
                timed["cand"], cpu, done = self._timed_batch(self.cand, numbers)
                acct["cand_batches_cpu_s"] += cpu
                acct["cand_batches_wall_s"] += timed["cand"]
                continue
            for name in ("ref", "compile") if self.baseline else ("ref",):
                timed[name], cpu, _ = self._timed_batch(self.ref, numbers, name)
                acct["ref_batches_cpu_s"] += cpu
                acct["ref_batches_wall_s"] += timed[name]
        return timed, done

    def _sample(self, done: dict[str, Any], rep: int) -> dict:
        """One timed call, chosen after the batch ran: its outputs (or blocks of them, drawn
        now), read from the candidate's memory, next to the same elements of the reference's
        outputs for the same inputs."""
        j = secrets.randbelow(self.n)
        entry = {"batch": rep, "call": j, "ref": None, "cand": None, "error": None}
        ptrs, layout = done.get("ptrs"), done.get("layout")
        if not isinstance(ptrs, list) or len(ptrs) != self.n or not isinstance(layout, list):
            entry["error"] = "the candidate's process did not say where its outputs are"
            return entry
        outs = ptrs[j] if isinstance(ptrs[j], list) else []
        if len(outs) != len(self.out_layout) or len(layout) != len(self.out_layout):
            entry["error"] = (f"call {j + 1} returned {len(outs)} output(s); the reference "
                              f"returns {len(self.out_layout)}")
            return entry
        other = ptrs[(j + 1) % self.n]
        if self.n > 1 and isinstance(other, list) and any(
                i < len(other) and p == other[i] for i, p in enumerate(outs)):
            entry["error"] = ("timed calls returned the same output buffer (a later call "
                              "overwrote this one's output); return a new tensor per call")
            return entry
        strides = []
        for i, (lay, (dtype, shape)) in enumerate(zip(layout, self.out_layout)):
            try:
                strides.append(sampled_outputs.described_strides(lay, dtype, shape))
            except sampled_outputs.UnreadableOutput as exc:
                entry["error"] = f"output {i} of call {j + 1} cannot be read: {exc}"
                return entry
        select = sampled_outputs.choose([(d, s, st) for (d, s), st in
                                         zip(self.out_layout, strides)])
        self.ref.request_outputs(j, select)  # the reference gathers while this one reads
        cand, error = [], None
        for i, (address, (dtype, shape), st, spec) in enumerate(
                zip(outs, self.out_layout, strides, select)):
            try:
                cand.append(sampled_outputs.read(self.cand, address, dtype, shape, st, spec))
            except sampled_outputs.UnreadableOutput as exc:
                cand, error = None, (f"output {i} of call {j + 1} could not be read from the "
                                     f"candidate's memory: {exc}")
                break
        ref = self.ref.outputs()  # always read: the link stays in step
        if ref is None:
            raise JobFailure("problem", f"case {self.case.name!r}: the reference process did "
                                        "not send the outputs of a timed call")
        entry.update(ref=ref, select=select, strides=strides, cand=cand, error=error,
                     shapes=[shape for _, shape in self.out_layout])
        return entry


def calls_per_batch(t_ref_s: float, set_bytes: int, out_bytes: int) -> int:
    """Enough calls that a batch lasts BATCH_S, as memory allows (each call has its own set)."""
    import math

    by_time = math.ceil(BATCH_S / t_ref_s)
    by_memory = min(SET_BUDGET // max(set_bytes, 1), SET_BUDGET // max(out_bytes, 1))
    return max(1, min(by_time, by_memory, MAX_CALLS))
