"""Give up every capability: a worker started by a root driver must not keep root's powers.

bubblewrap already drops them (`--cap-drop ALL` in a user namespace); under `unshare` or with no
sandbox at all the worker server does it itself at start, before any job is forked: the bounding
set, the ambient set, then the effective, permitted and inheritable sets, and no_new_privs so no
exec can gain them back.
"""
from __future__ import annotations

import ctypes
import platform

_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_PR_SET_NO_NEW_PRIVS = 38
_CAPSET = {"x86_64": 126, "aarch64": 91}
_VERSION_3 = 0x20080522


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_all() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in range(64):
        libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)   # EPERM without CAP_SETPCAP: nothing to drop
    libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    nr = _CAPSET.get(platform.machine())
    if nr is not None:
        data = (_Data * 2)()
        libc.syscall(nr, ctypes.byref(_Header(_VERSION_3, 0)), data)
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def effective() -> int:
    """This process's effective capability mask (0 when none is left)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("CapEff:"):
                    return int(line.split()[1], 16)
    except OSError:
        pass
    return 0
