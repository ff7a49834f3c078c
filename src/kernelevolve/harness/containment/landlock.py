"""Landlock: a job child's second wall, set when the child starts (before it has any thread).

Landlock lets an unprivileged process take rights away from itself, by path. Every job child
restricts itself to:
- reading (opening files, listing folders) only beneath the driver's allowlist of paths
  (harness/containment/allowlist.py via sandbox.readable): the same list the bwrap mounts are built from, so
  under `--sandbox unshare` and `none`, where nothing is mounted, the user's folders, /opt, the
  problem's folder and every project tree stay unreadable all the same;
- writing (creating, removing, renaming, truncating) only beneath the worker's scratch tmpfs,
  plus read-write device nodes the platform names (GPU drivers); the rest of the file system is
  read-only to it whatever the mounts say (and the unshare/none modes have no read-only mounts);
- no TCP bind or connect (ABI 4), whatever network it can see;
- no signals to, and no abstract unix sockets of, processes outside its own domain (ABI 6): the
  worker server, the sandbox's init and other jobs are out of reach.

Landlock applies to the calling thread and what it creates later, so it goes on first thing in
the forked child, which has one thread then. The syscall filter (harness/containment/seccomp.py) follows at
candidate import and covers the threads started in between. Kernels without Landlock (before
5.13, or with it disabled) skip this layer, and the sandbox facts say so.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446   # same number on every arch
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
_DIR_WRITES = ((1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10)
               | (1 << 11) | (1 << 12))   # REMOVE_DIR ... MAKE_SYM
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX, SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI (0: not available)."""
    try:
        version = _libc().syscall(_CREATE_RULESET, None, 0, _CREATE_RULESET_VERSION)
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


@dataclass
class Restriction:
    writable: tuple[str, ...] = ()      # directories a job may write beneath
    devices: tuple[str, ...] = ()       # device nodes it may open read-write and ioctl
    readable: tuple[str, ...] = ()      # what it may read beneath; () leaves reads unrestricted


def restrict_self(rules: Restriction) -> int:
    """Apply `rules` to this thread and its future threads and children; returns the ABI used
    (0 when Landlock is unavailable and nothing was applied)."""
    abi = abi_version()
    if abi < 1:
        return 0
    fs = WRITE_FILE | _DIR_WRITES | (READ_FILE | READ_DIR if rules.readable else 0)
    if abi >= 2:
        fs |= REFER
    if abi >= 3:
        fs |= TRUNCATE
    if abi >= 5 and any(d != "/dev/null" for d in rules.devices):
        fs |= IOCTL_DEV  # GPU device nodes: ioctl only on those
    attr = _RulesetAttr(fs, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    libc = _libc()
    ruleset = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset failed")
    try:
        for path in rules.writable:
            _add(libc, ruleset, path, fs)
        for path in rules.readable:
            if os.path.exists(path):  # a link's target: the rule follows it
                _add(libc, ruleset, path, (READ_FILE | READ_DIR) & fs)
        for dev in rules.devices:
            if os.path.exists(dev):
                _add(libc, ruleset, dev, (READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV) & fs)
        if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS: required to restrict self
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
        if libc.syscall(_RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")
    finally:
        os.close(ruleset)
    return abi


def _add(libc, ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):  # a file takes only file rights
            access &= EXECUTE | READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV
        rule = _PathBeneath(access, fd)
        if libc.syscall(_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule({path}) failed")
    finally:
        os.close(fd)
