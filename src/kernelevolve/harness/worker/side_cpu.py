"""The CPU of every process on the candidate's side of a measure job, read from outside it.

A candidate's process may start other processes: the syscall filter's `jit` profile allows it
(inductor runs g++), and with the filter off any candidate can. Work done there (spinners that
run while the reference is timed: 3-5x slower eager, seen) is invisible to the candidate
process's own CPU clock. So the coordinator (harness/worker/measure.py), which never runs candidate
code, counts them all, two ways:

- it is a child subreaper (PR_SET_CHILD_SUBREAPER, set before it forks the timed processes): an
  orphan of the candidate's side is re-parented to it rather than to the server, so every
  process the side ever started stays in the coordinator's subtree, whatever it did to its
  session or process group. The side is that subtree less the reference process's (trusted);
- `perf` task-clock counters (software events: no PMU needed, allowed at perf_event_paranoid 2)
  opened by the coordinator on every thread of every process of the side, with `inherit`: every
  thread and process started later is counted by the kernel, and an exited task's time is
  folded into its parent's counter when it exits, whether or not anyone waits for it. The
  counters belong to the coordinator: the candidate cannot disable or reset them;
- /proc, besides: each process's CPU clock (all its threads, exited ones too) plus its reaped
  children's time (cutime + cstime from /proc/<pid>/stat; zombies keep their stat).

The measure loop (through SideAccount) reads the counters around each of the candidate's
batches (what the side does outside them is hidden work, wherever it runs) and /proc around the
timed pairs, and takes the larger figure for the other processes. Where perf cannot be opened,
/proc is all there is, and its gap is named in the facts: a child whose parent ignores SIGCHLD
is reaped by the kernel at exit and its time reaches no /proc file (a short-lived process of
that kind is missed).

The alternative, timed processes that may not fork at all, was not taken: inductor forks g++
during the warm-up calls, and a filter that changes once warm-up is over would have to be
switched by a process the candidate does not control. Counting covers threads, processes and
whatever started them.
"""
from __future__ import annotations

import ctypes
import errno
import os
import struct
import time
from typing import Any

_PERF_TYPE_SOFTWARE, _SW_TASK_CLOCK = 1, 1
ATTACH_PASSES = 8   # walks of the side until no unseen thread turns up
_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")





class SideCPU:
    """Counts the candidate's side: `attach()` once the candidate's process is ready, then
    `read()` around what is to be counted, `close()` at the end."""

    def __init__(self, cand_pid: int, ref_pid: int):
        self.cand, self.ref = cand_pid, ref_pid
        self.fds: dict[int, int] = {}   # tid -> perf counter
        self.unavailable: str | None = None
        self.incomplete: str | None = None

    # ---- the tree -------------------------------------------------------------------------
    def processes(self) -> dict[int, list[int]]:
        """Every process of the side (pid -> its threads): the candidate's process, its
        descendants, and the orphans re-parented to this process, with theirs."""
        roots = [self.cand] + [p for p in _children(os.getpid(), _tids(os.getpid()))
                               if p not in (self.cand, self.ref)]
        found: dict[int, list[int]] = {}
        todo = roots
        while todo:
            pid = todo.pop()
            if pid in found or pid == self.ref:
                continue
            tids = _tids(pid)
            found[pid] = tids
            todo.extend(_children(pid, tids))
        return found

    # ---- perf -------------------------------------------------------------------------------
    def attach(self) -> None:
        """Task-clock counters on every thread of the side, walked until a pass finds no thread
        it has not seen (a thread started after its parent's counter opened is counted twice:
        an overcount, never a gap)."""
        from kernelevolve.harness.worker.proc_profile import _perf_nr, _perf_reason

        nr = _perf_nr()
        if nr is None:
            self.unavailable = "perf_event_open is not known on this machine"
            return
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        attr = _attr()
        for _ in range(ATTACH_PASSES):
            new = [t for tids in self.processes().values() for t in tids if t not in self.fds]
            if not new:
                return
            for tid in new:
                fd = libc.syscall(nr, ctypes.byref(attr), tid, -1, -1, 8)  # FD_CLOEXEC
                if fd < 0:
                    err = ctypes.get_errno()
                    if err == errno.ESRCH:  # ended meanwhile
                        continue
                    self.close()
                    self.unavailable = _perf_reason(err, "software").removeprefix("perf: ")
                    return
                self.fds[tid] = fd
        self.incomplete = (f"the candidate's side kept starting threads or processes while its "
                           f"counters were opened ({len(self.fds)} tasks after "
                           f"{ATTACH_PASSES} passes)")

    def perf_s(self) -> float | None:
        """Every task the counters reach: the candidate's process and all the side started
        (None without perf). Read it around what is to be told apart (the candidate's batches);
        comparing it with the process's own CPU clock would not do: the two clocks drift apart
        by ~0.4% of the CPU used (seen), which is milliseconds for a busy kernel."""
        if self.unavailable is not None or not self.fds:
            return None
        total = 0.0
        for fd in self.fds.values():
            try:
                raw, enabled, running = struct.unpack("QQQ", os.read(fd, 24))
            except (OSError, struct.error):
                return None
            total += raw * (enabled / running) if running else 0.0
        return total / 1e9

    def proc(self) -> dict[int, float]:
        """/proc, per process of the side other than the candidate's own threads: its CPU clock
        (all its threads, exited ones too) plus its reaped children's time. The candidate's
        process contributes only its reaped children."""
        out: dict[int, float] = {}
        for pid in self.processes():
            stat = _stat_times(pid)
            if pid == self.cand:
                out[pid] = stat[1]
                continue
            clock = _clock(pid)
            out[pid] = (clock if clock == clock else stat[0]) + stat[1]
        return out

    def how(self) -> str:
        if self.unavailable is not None:
            return ("/proc only (perf: " + self.unavailable + "); a child reaped by the kernel "
                    "at exit (its parent ignores SIGCHLD) is not counted")
        return f"perf task-clock on {len(self.fds)} task(s), inherited by every later one; /proc"

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


class SideAccount:
    """One case's account of the side's CPU outside the candidate's own batches: perf over the
    whole loop less what it counted inside those batches (and in the harness's set-up steps),
    and /proc over the timed pairs less what it gained inside the candidate's batches there
    (inductor's g++ runs inside the warm-up's batches; an honest kernel may fork a helper and
    wait for it inside its call, and the child's time lands in the candidate's reaped
    children: work the batch's clock already paid for)."""

    def __init__(self, side: SideCPU):
        self.side = side
        self.start = side.perf_s()
        self.inside = 0.0
        self.proc_start: dict[int, float] | None = None
        self.proc_inside = 0.0
        self._mark: float | None = None
        self._proc_mark: dict[int, float] | None = None

    def enter(self) -> None:
        """Right before a candidate batch (or a set-up step) starts."""
        self._mark = self.side.perf_s()
        if self.proc_start is not None:
            self._proc_mark = self.side.proc()

    def leave(self) -> None:
        now, mark, self._mark = self.side.perf_s(), self._mark, None
        if now is not None and mark is not None:
            self.inside += now - mark
        proc_mark, self._proc_mark = self._proc_mark, None
        if proc_mark is not None:
            self.proc_inside += proc_gain(proc_mark, self.side.proc())

    def timed_pairs_start(self) -> None:
        if self.proc_start is None:
            self.proc_start = self.side.proc()

    def result(self, own_outside_s: float) -> dict[str, Any]:
        """The other processes' CPU outside the candidate's batches; `own_outside_s` is the
        candidate's process's own (its CPU clock), which perf counts too."""
        end, proc_end = self.side.perf_s(), self.side.proc()
        by_perf = None
        if end is not None and self.start is not None:
            by_perf = max(0.0, end - self.start - self.inside - own_outside_s)
        by_proc = max(0.0, proc_gain(self.proc_start if self.proc_start is not None
                                     else proc_end, proc_end) - self.proc_inside)
        return {"others_cpu_s": max(by_perf or 0.0, by_proc), "others_perf_s": by_perf,
                "others_proc_s": by_proc,
                "other_processes": len(proc_end) - (self.side.cand in proc_end),
                "others_counted_by": self.side.how()}


def proc_gain(a: dict[int, float], b: dict[int, float]) -> float:
    """CPU the side's other processes used between two `proc()` readings: per process, what it
    gained, or all it used if it is new (one that ended meanwhile drops out; its time reappears
    in its parent's reaped children)."""
    return sum(max(0.0, cpu - a.get(pid, 0.0)) for pid, cpu in b.items())


def _attr():
    from kernelevolve.harness.worker.proc_profile import _EXCLUDE_HV, _EXCLUDE_KERNEL, _INHERIT, \
        _FORMAT_TIMES, _PerfAttr

    # exclude_kernel is what perf_event_paranoid 2 demands; the task clock counts the task's
    # whole run time (kernel included) regardless, measured here: a spinner reading /dev/zero
    # in a loop counted 0.31 s for 0.30 s of CPU.
    return _PerfAttr(type=_PERF_TYPE_SOFTWARE, size=ctypes.sizeof(_PerfAttr),
                     config=_SW_TASK_CLOCK, read_format=_FORMAT_TIMES,
                     flags=_INHERIT | _EXCLUDE_KERNEL | _EXCLUDE_HV)


def _tids(pid: int) -> list[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except (OSError, ValueError):
        return []


def _children(pid: int, tids: list[int]) -> list[int]:
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                out.extend(int(c) for c in fh.read().split())
        except (OSError, ValueError):
            continue
    return out


def _clock(pid: int) -> float:
    try:
        return time.clock_gettime(((~pid) << 3) | 2)  # the process's CPU clock (SCHED)
    except OSError:
        return float("nan")


def _stat_times(pid: int) -> tuple[float, float]:
    """(utime + stime, cutime + cstime) of a process, in seconds; zeros if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
        fields = text[text.rfind(b")") + 2:].split()
        ticks = [int(f) for f in fields[11:15]]  # proc(5) fields 14-17
    except (OSError, ValueError):
        return 0.0, 0.0
    return (ticks[0] + ticks[1]) * _TICK_S, (ticks[2] + ticks[3]) * _TICK_S
