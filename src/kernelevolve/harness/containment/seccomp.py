"""The syscall filter on every process that runs candidate code (seccomp-bpf, built here).

A job child installs it after the harness has loaded what the job needs (problem, inputs,
reference model, thread pools, harness helpers) and right before the candidate is imported.
`TSYNC` puts it on every thread of the process at once: OpenMP and torch worker threads exist
by then, and candidate code runs on them too. What passes:

- threads (`clone` with CLONE_THREAD and no namespace flag), memory, futexes, timers, signals to
  the process itself, reading files and directories, `read`/`write` on descriptors it already
  holds, `ioctl` except the terminal-injection requests;
- nothing else: no `execve`, no new processes (`fork`, `vfork`, `clone` without CLONE_THREAD), no
  sockets, no `ptrace`/`process_vm_*`, no opening files for writing or creating any file-system
  object, no namespaces, mounts, `setsid`, `io_uring`, `bpf`, signals or scheduling changes aimed
  at other processes. Every call not on the list goes to the supervisor (SECCOMP_RET_USER_NOTIF):
  the worker server receives it, names it in the verdict, and kills the job. `clone3` and
  `openat2` answer ENOSYS instead (glibc falls back to `clone` and `openat`, which are checked
  argument by argument; their struct arguments cannot be read by a filter).
- `seccomp` itself is refused: a second filter with its own listener would receive the calls
  ours sends to the supervisor (the newest filter's listener wins a tie) and could let them run.

Why our own assembler and not libseccomp: bubblewrap's `--seccomp FD` applies one program from
the sandbox's first process on, but the server must fork children and the harness must load
before the filter goes on; libseccomp's own Python bindings are not on PyPI (pyseccomp, a ctypes
shim, was last released in 2021). The program below is ~400 instructions, checked against the
architecture (a 32-bit `int 0x80` or x32 call is killed outright, since its numbers mean
different calls), and each allowed call costs a few compares (constant ones are cached by the
kernel's action cache).
"""
from __future__ import annotations

import ctypes
import os
import platform
import struct
from dataclasses import dataclass

from kernelevolve.harness.containment.syscall_table import ARCHES

# return actions
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_USER_NOTIF = 0x7FC00000
RET_ALLOW = 0x7FFF0000

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ENOSYS = 38

# seccomp() operations and flags
_SET_MODE_FILTER = 1
_FLAG_TSYNC, _FLAG_NEW_LISTENER, _FLAG_TSYNC_ESRCH = 1, 8, 16
_PR_SET_NO_NEW_PRIVS = 38

# open flags that write or create (__O_TMPFILE is 0o20000000)
O_WRITE_MASK = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | 0o20000000
O_CREATE_MASK = os.O_CREAT | os.O_TRUNC | os.O_APPEND | 0o20000000
CLONE_THREAD = 0x00010000
CLONE_NAMESPACES = 0x7E020000   # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE, F_NOTIFY = 8, 10, 15, 1024, 1026

# Calls whose outcome never depends on their arguments and that touch nothing but the caller.
ALLOWED = """
futex futex_waitv futex_wake futex_wait futex_requeue read write readv writev pread64 pwrite64
preadv pwritev preadv2 pwritev2 lseek close close_range mmap munmap mprotect mremap madvise
mincore msync brk mbind get_mempolicy set_mempolicy set_mempolicy_home_node mlock mlock2 munlock
mlockall munlockall pkey_alloc pkey_free pkey_mprotect map_shadow_stack mseal membarrier rseq
sched_yield sched_getaffinity sched_getscheduler sched_getparam sched_getattr
sched_get_priority_max sched_get_priority_min sched_rr_get_interval getcpu nanosleep
clock_nanosleep clock_gettime clock_getres gettimeofday time times getrusage getitimer setitimer
alarm timer_create timer_settime timer_gettime timer_getoverrun timer_delete timerfd_create
timerfd_settime timerfd_gettime eventfd eventfd2 signalfd signalfd4 epoll_create epoll_create1
epoll_ctl epoll_wait epoll_pwait epoll_pwait2 poll ppoll select pselect6 pipe pipe2 dup dup2 dup3
fstat newfstatat stat lstat statx statfs fstatfs access faccessat faccessat2 readlink readlinkat
getdents getdents64 getcwd chdir fchdir getxattr lgetxattr fgetxattr listxattr llistxattr
flistxattr fadvise64 readahead fsync fdatasync ftruncate umask uname sysinfo getrandom
getpid gettid getppid getuid geteuid getgid getegid getgroups getresuid getresgid getpgrp
getpgid getsid capget getpriority getrlimit rt_sigaction rt_sigprocmask rt_sigreturn
rt_sigpending rt_sigtimedwait rt_sigsuspend sigaltstack pause restart_syscall exit exit_group
wait4 waitid set_tid_address set_robust_list arch_prctl prctl sendmsg recvmsg sendto
recvfrom shutdown getsockname getpeername getsockopt
""".split()
ENOSYS_CALLS = ("clone3", "openat2")
OWN_PID_ARG0 = ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo")   # arg0 is us or 0
ZERO_PID_ARG0 = ("prlimit64", "setrlimit", "sched_setaffinity", "sched_setscheduler",
                 "sched_setparam", "sched_setattr")                         # arg0 0 = self


@dataclass(frozen=True)
class Profile:
    """`open_rdwr`: allow opening existing files read-write (never creating or truncating).
    GPU drivers open their device nodes (/dev/nvidia*, /dev/kfd) lazily, read-write; there the
    sandbox's read-only mounts and Landlock (device nodes only) limit what such an open reaches.

    `compilers`: the candidate's process runs a compiler of its own at first call (Triton's JIT
    on a GPU, torch.compile): starting programs and processes and writing files are allowed, and
    Landlock confines the writes to the job's own folder (the job is refused without Landlock);
    sockets, ptrace, namespaces and mounts stay refused, and the reaper kills every process the
    job started. Inductor execs and writes even with a warm cache, so its compile cannot be
    moved to a separate step the way load_cpp's is."""

    name: str = "strict"
    open_rdwr: bool = False
    compilers: bool = False


STRICT = Profile()
DEVICE = Profile("device", open_rdwr=True)
JIT = Profile("jit", open_rdwr=True, compilers=True)
PROFILES = {p.name: p for p in (STRICT, DEVICE, JIT)}

# What the jit profile adds: programs, processes (still no namespaces) and file-system changes.
JIT_ALLOWED = """
execve execveat fork vfork creat mkdir mkdirat rmdir unlink unlinkat rename renameat renameat2
link linkat symlink symlinkat chmod fchmod fchmodat truncate utime utimes utimensat futimesat
memfd_create flock kill tgkill
""".split()


def arch_table() -> tuple[int, dict[str, int]] | None:
    return ARCHES.get(platform.machine())


def _ld(offset: int) -> tuple[int, int, int, int]:
    return (_LD_W_ABS, 0, 0, offset)


def _arg_lo(i: int) -> int:
    return 16 + 8 * i  # seccomp_data.args[i], low 32 bits (little-endian)


def _ret(action: int) -> tuple[int, int, int, int]:
    return (_RET, 0, 0, action)


def _block(nr: int, body: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """`if (nr == N) { body }`: body ends in returns, so the skip lands on the next test."""
    assert len(body) < 256
    return [(_JEQ, 0, len(body), nr), *body]


def _mask_block(nr: int, arg: int, mask: int) -> list:
    """Allow when no bit of `mask` is set in the argument, else ask the supervisor."""
    return _block(nr, [_ld(_arg_lo(arg)), (_JSET, 1, 0, mask), _ret(RET_ALLOW),
                       _ret(RET_USER_NOTIF)])


def _values_block(nr: int, arg: int, values: tuple[int, ...], allow: bool) -> list:
    """Allow (or refuse, with `allow=False`) exactly the listed argument values."""
    body = [_ld(_arg_lo(arg))]
    for i, value in enumerate(values):
        jump = len(values) - i   # to the "listed" return
        body.append((_JEQ, jump, 0, value & 0xFFFFFFFF))
    hit, miss = (RET_ALLOW, RET_USER_NOTIF) if allow else (RET_USER_NOTIF, RET_ALLOW)
    return _block(nr, [*body, _ret(miss), _ret(hit)])


def program(profile: Profile, own_pid: int, arch: int, nrs: dict[str, int]) -> list:
    """The filter as (code, jt, jf, k) instructions."""
    prog = [_ld(4), (_JEQ, 1, 0, arch), _ret(RET_KILL_PROCESS), _ld(0)]
    if arch == ARCHES["x86_64"][0]:
        prog += [(_JGE, 0, 1, 0x40000000), _ret(RET_KILL_PROCESS)]  # x32 ABI numbers
    for name in ALLOWED + (JIT_ALLOWED if profile.compilers else []):
        if name in nrs:
            prog += _block(nrs[name], [_ret(RET_ALLOW)])
    for name in ENOSYS_CALLS:
        if name in nrs:
            prog += _block(nrs[name], [_ret(RET_ERRNO | _ENOSYS)])
    open_mask = 0 if profile.compilers else O_CREATE_MASK if profile.open_rdwr else O_WRITE_MASK
    for name, arg in (("open", 1), ("openat", 2)):
        if name in nrs:
            prog += _mask_block(nrs[name], arg, open_mask)
    if "clone" in nrs and profile.compilers:  # any process, but never a namespace flag
        prog += _mask_block(nrs["clone"], 0, CLONE_NAMESPACES)
    elif "clone" in nrs:  # threads only: CLONE_THREAD set and no namespace flag
        prog += _block(nrs["clone"], [_ld(_arg_lo(0)), (_JSET, 2, 0, CLONE_NAMESPACES),
                                      (_JSET, 0, 1, CLONE_THREAD), _ret(RET_ALLOW),
                                      _ret(RET_USER_NOTIF)])
    for name in OWN_PID_ARG0 if not profile.compilers else ("rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        if name in nrs:
            prog += _values_block(nrs[name], 0, (0, own_pid), allow=True)
    for name in ZERO_PID_ARG0:
        if name in nrs:
            prog += _values_block(nrs[name], 0, (0,), allow=True)
    if "setpriority" in nrs:  # setpriority(which, who=0: the caller)
        prog += _values_block(nrs["setpriority"], 1, (0,), allow=True)
    if "ioctl" in nrs:
        prog += _values_block(nrs["ioctl"], 1, (TIOCSTI, TIOCLINUX), allow=False)
    if "fcntl" in nrs:  # no signal delivery to other processes, no leases or dir notifications
        prog += _values_block(nrs["fcntl"], 1, (F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE,
                                                F_NOTIFY), allow=False)
    prog.append(_ret(RET_USER_NOTIF))
    return prog


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(profile: Profile = STRICT) -> int | None:
    """Install the filter on every thread of this process; return the notification listener
    (to hand to the supervisor), or None where only SECCOMP_RET_KILL_PROCESS is available."""
    table = arch_table()
    if table is None:
        raise OSError(f"no syscall table for {platform.machine()}")
    arch, nrs = table
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    insns = program(profile, os.getpid(), arch, nrs)
    raw = b"".join(struct.pack("<HBBI", *insn) for insn in insns)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(len(insns), ctypes.cast(buf, ctypes.c_void_p))
    nr = nrs["seccomp"]
    flags = _FLAG_TSYNC | _FLAG_NEW_LISTENER | _FLAG_TSYNC_ESRCH
    fd = libc.syscall(nr, _SET_MODE_FILTER, flags, ctypes.byref(fprog))
    if fd >= 0:
        return int(fd)
    # Before Linux 5.7 a listener cannot be combined with TSYNC: kill instead of asking.
    killing = [(c, jt, jf, RET_KILL_PROCESS if (c == _RET and k == RET_USER_NOTIF) else k)
               for c, jt, jf, k in insns]
    raw = b"".join(struct.pack("<HBBI", *insn) for insn in killing)
    buf = ctypes.create_string_buffer(raw, len(raw))
    fprog = _SockFprog(len(killing), ctypes.cast(buf, ctypes.c_void_p))
    if libc.syscall(nr, _SET_MODE_FILTER, _FLAG_TSYNC, ctypes.byref(fprog)) != 0:
        raise OSError(ctypes.get_errno(), "seccomp(SECCOMP_SET_MODE_FILTER) failed")
    return None
