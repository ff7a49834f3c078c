"""The supervisor's side of the syscall filter: read a refused call, name it for the verdict.

The job child hands its seccomp notification listener to the worker server. When candidate code
makes a call the filter does not allow, the kernel stops that thread and the server reads the
call here (number, arguments, thread id), from outside the candidate's process; the server
then kills the job. The description (`openat("/root/.cache/x.so", O_WRONLY|O_CREAT)`: creating
or writing files ...) is what the verdict says.
"""
from __future__ import annotations

import errno
import fcntl
import os
import struct
from dataclasses import dataclass

from kernelevolve.harness.containment.seccomp import arch_table

_NOTIF_RECV = 0xC0502100      # _IOWR('!', 0, struct seccomp_notif), 80 bytes
_NOTIF_SEND = 0xC0182101      # _IOWR('!', 1, struct seccomp_notif_resp), 24 bytes
_NOTIF_SIZE = 80
_AT_FDCWD = -100
_CONTINUE = 1                 # SECCOMP_USER_NOTIF_FLAG_CONTINUE
_PATH_ARG = {"open": 0, "creat": 0, "openat": 1, "mkdir": 0, "mkdirat": 1, "unlink": 0,
             "unlinkat": 1, "rmdir": 0, "rename": 0, "renameat": 1, "renameat2": 1, "link": 0,
             "linkat": 1, "symlink": 1, "symlinkat": 2, "mknod": 0, "mknodat": 1, "execve": 0,
             "execveat": 1, "chmod": 0, "fchmodat": 1, "truncate": 0, "chdir": 0, "chroot": 0}
_OPEN_FLAGS = ((os.O_WRONLY, "O_WRONLY"), (os.O_RDWR, "O_RDWR"), (os.O_CREAT, "O_CREAT"),
               (os.O_TRUNC, "O_TRUNC"), (os.O_APPEND, "O_APPEND"), (0o20000000, "O_TMPFILE"))
_WHY = {
    "execve": "starting programs", "execveat": "starting programs",
    "fork": "starting processes (threads are fine)", "vfork": "starting processes (threads are "
    "fine)", "clone": "starting processes (threads are fine)",
    "socket": "sockets", "socketpair": "sockets", "connect": "sockets", "bind": "sockets",
    "listen": "sockets", "accept": "sockets", "accept4": "sockets",
    "ptrace": "inspecting other processes", "process_vm_readv": "inspecting other processes",
    "process_vm_writev": "inspecting other processes",
    "setsid": "leaving the job's session", "setpgid": "leaving the job's process group",
    "kill": "signalling other processes", "tgkill": "signalling other processes",
    "tkill": "signalling other processes", "seccomp": "changing the syscall filter",
    "io_uring_setup": "io_uring", "bpf": "loading kernel programs", "mount": "mounting",
    "unshare": "new namespaces", "setns": "entering namespaces",
}
_FS_CHANGE = ("mkdir", "mkdirat", "unlink", "unlinkat", "rmdir", "rename", "renameat",
              "renameat2", "link", "linkat", "symlink", "symlinkat", "mknod", "mknodat", "chmod",
              "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "truncate",
              "utime", "utimes", "utimensat", "creat", "open", "openat", "memfd_create")


@dataclass
class Violation:
    syscall: str
    detail: str         # the call with what could be read of its arguments
    tid: int

    def reason(self) -> str:
        why = _WHY.get(self.syscall)
        if why is None and self.syscall in _FS_CHANGE:
            why = ("creating, writing or changing files (a job's outputs go to descriptors the "
                   "harness opened for it)")
        why = why or "a system call no kernel needs"
        return (f"the syscall filter stopped the candidate's process at `{self.detail}` and "
                f"killed the job (not allowed while candidate code runs: {why})")


def receive(listener: int) -> Violation | None | bool:
    """Read one pending notification: a Violation; True when it was a harmless call answered
    here; None when the filter's last user is gone."""
    buf = bytearray(_NOTIF_SIZE)
    try:
        fcntl.ioctl(listener, _NOTIF_RECV, buf)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.EINTR, errno.EBADF, errno.EINVAL):
            return None
        raise
    notif_id, tid, _flags, nr, _arch, _ip = struct.unpack_from("<QIIiIQ", buf, 0)
    args = struct.unpack_from("<6Q", buf, 32)
    name, detail = describe(nr, args, tid)
    if name == "sched_setaffinity" and _same_process(tid, args[0]):
        # An OpenMP thread binding itself (OMP_PROC_BIND): let the call run. Its only value
        # argument is the thread id, checked here; the mask it points to binds only that thread.
        _respond(listener, notif_id, 0, _CONTINUE)
        return True
    answer = _harmless(name, args, tid)
    if answer is not None:
        _respond(listener, notif_id, -answer)
        return True
    return Violation(name, detail, tid)


def _tgid(tid: int) -> int | None:
    try:
        with open(f"/proc/{tid}/status") as fh:
            for line in fh:
                if line.startswith("Tgid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _same_process(caller: int, target: int) -> bool:
    target &= 0xFFFFFFFF
    mine = _tgid(caller)
    return mine is not None and 0 < target < 1 << 22 and _tgid(target) == mine


def _harmless(name: str, args: tuple[int, ...], tid: int) -> int | None:
    """The errno to answer for a refused call that libraries make as a probe, with no harm in
    failing it; None means it is a violation. The call itself never runs, so nothing it
    names can change between this check and the answer.

    - `mkdir` of a folder that exists (`os.makedirs(..., exist_ok=True)`): EEXIST, as the kernel
      would answer;
    - `socket(AF_UNIX, ...)`: EACCES. glibc's user and group lookups (`getpass.getuser()` in
      torch.compile's cache path) first try the nscd daemon's unix socket and fall back to the
      files; no socket is created, and AF_INET/AF_INET6/netlink/packet sockets stay violations.
    """
    if name in ("mkdir", "mkdirat") and _existing_dir(name, args, tid):
        return errno.EEXIST
    if name == "socket" and args[0] & 0xFFFFFFFF == 1:  # AF_UNIX
        return errno.EACCES
    return None


def _respond(listener: int, notif_id: int, error: int, flags: int = 0) -> None:
    try:
        fcntl.ioctl(listener, _NOTIF_SEND, bytearray(struct.pack("<QqiI", notif_id, 0, error,
                                                                 flags)))
    except OSError:
        pass  # the thread is gone


def _existing_dir(name: str, args: tuple[int, ...], tid: int) -> bool:
    if name not in ("mkdir", "mkdirat"):
        return False
    path = _read_string(tid, args[_PATH_ARG[name]])
    if not path:
        return False
    if not path.startswith("/"):
        dirfd = args[0] if name == "mkdirat" else _AT_FDCWD & 0xFFFFFFFF
        dirfd = dirfd - (1 << 32) if dirfd & 0x80000000 else dirfd & 0xFFFFFFFF
        base = f"/proc/{tid}/cwd" if dirfd == _AT_FDCWD else f"/proc/{tid}/fd/{dirfd}"
        path = os.path.join(base, path)
    return os.path.isdir(path)


def describe(nr: int, args: tuple[int, ...], tid: int) -> tuple[str, str]:
    table = arch_table()
    names = {v: k for k, v in table[1].items()} if table else {}
    name = names.get(nr, f"syscall {nr}")
    parts = []
    if name in _PATH_ARG:
        path = _read_string(tid, args[_PATH_ARG[name]])
        parts.append(repr(path) if path is not None else "...")
    if name in ("open", "openat"):
        flags = args[1 if name == "open" else 2]
        parts.append("|".join(label for bit, label in _OPEN_FLAGS if flags & bit) or "O_RDONLY")
    elif name == "clone":
        parts.append(f"flags={args[0] & 0xFFFFFFFF:#x}")
    elif name in ("socket", "kill", "tgkill", "ioctl", "fcntl", "prlimit64", "setpriority"):
        parts.extend(str(a if a < 1 << 63 else a - (1 << 64)) for a in args[:2])
    return name, f"{name}({', '.join(parts)})"


def _read_string(tid: int, address: int, limit: int = 256) -> str | None:
    """A NUL-terminated string from the stopped thread's memory (best effort)."""
    try:
        fd = os.open(f"/proc/{tid}/mem", os.O_RDONLY)
    except OSError:
        return None
    try:
        raw = os.pread(fd, limit, address)
    except (OSError, OverflowError, ValueError):
        return None
    finally:
        os.close(fd)
    return raw.split(b"\0", 1)[0].decode(errors="replace")
