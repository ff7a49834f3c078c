"""The syscall filter and Landlock on their own: a real forked child installs them and tries
things; the parent, as the worker server does, reads the refused call from the listener.

Each probe runs in a fresh child so that a kill ends only that child; the parent never installs
anything.
"""
from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from kernelevolve.harness.containment import landlock, seccomp, violations

pytestmark = pytest.mark.skipif(seccomp.arch_table() is None, reason="no syscall table here")


def _in_child(action, profile=seccomp.STRICT, before=None, timeout: float = 30):
    """Run `action()` in a child under the filter. Returns ("exit", code) or
    ("refused", Violation) or ("signal", n)."""
    parent, child = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            parent.close()
            state = before() if before else None
            fd = seccomp.install(profile)
            socket.send_fds(child, [b"L"], [fd])
            os.close(fd)
            child.recv(1)
            code = action(state) or 0
        except BaseException:  # noqa: BLE001
            code = 99
        os._exit(code)
    child.close()
    _, fds, _, _ = socket.recv_fds(parent, 8, 1)
    listener = fds[0]
    parent.send(b"k")
    deadline = time.monotonic() + timeout
    outcome = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            outcome = ("exit", os.WEXITSTATUS(status)) if os.WIFEXITED(status) else \
                ("signal", os.WTERMSIG(status))
            break
        import select

        ready, _, _ = select.select([listener], [], [], 0.05)
        if ready:
            found = violations.receive(listener)
            if isinstance(found, violations.Violation):
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                outcome = ("refused", found)
                break
    os.close(listener)
    parent.close()
    if outcome is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("the child neither finished nor was refused")
    return outcome


def _refused(outcome, syscall: str) -> violations.Violation:
    kind, value = outcome
    assert kind == "refused", outcome
    assert value.syscall == syscall, value
    return value


def test_computing_threads_and_reading_pass():
    def work(_):
        box = []
        t = threading.Thread(target=lambda: box.append(sum(range(100000))))
        t.start()
        t.join()
        with open("/etc/hostname") as fh:
            fh.read()
        os.listdir("/proc/self/task")
        time.sleep(0.01)
        return 0 if box else 3

    got = _in_child(work)
    assert got == ("exit", 0), got  # the refused call, named, if the filter said no


@pytest.mark.slow
def test_writes_processes_programs_and_sockets_are_refused_and_named(tmp_path):
    target = tmp_path / "x.txt"
    v = _refused(_in_child(lambda _: open(target, "w") and 0), "openat")
    assert str(target) in v.detail and "O_WRONLY" in v.detail and "O_CREAT" in v.detail
    assert "creating, writing or changing files" in v.reason()
    assert not target.exists()
    _refused(_in_child(lambda _: os.fork() and 0), "clone")
    _refused(_in_child(lambda _: os.execv("/bin/true", ["true"])), "execve")
    _refused(_in_child(lambda _: socket.socket(socket.AF_INET) and 0), "socket")
    _refused(_in_child(lambda _: os.setsid() and 0), "setsid")
    _refused(_in_child(lambda _: os.symlink("/proc/self/environ", tmp_path / "l")), "symlink")
    _refused(_in_child(lambda _: os.kill(os.getppid(), 0)), "kill")
    assert not (tmp_path / "l").exists()


def test_a_thread_started_before_the_filter_is_filtered_too(tmp_path):
    """TSYNC: the pool threads a job has by the time the candidate is imported."""
    target = tmp_path / "from_thread.txt"
    go = threading.Event()

    def before():
        def later():
            go.wait(10)
            try:
                open(target, "w").close()
            except OSError:
                pass
        t = threading.Thread(target=later)
        t.start()
        return t

    def action(t):
        go.set()
        t.join(10)
        return 0

    _refused(_in_child(action, before=before), "openat")
    assert not target.exists()


def test_harmless_probes_are_answered_not_killed(tmp_path):
    def probes(_):
        os.makedirs(str(tmp_path), exist_ok=True)          # exists: EEXIST, fine
        try:
            socket.socket(socket.AF_UNIX)                   # nscd probe: EACCES
        except PermissionError:
            return 0
        return 4

    assert _in_child(probes) == ("exit", 0)
    _refused(_in_child(lambda _: os.mkdir(tmp_path / "new")), "mkdir")


def test_jit_profile_allows_compilers_but_not_sockets(tmp_path):
    import subprocess

    def compile_something(_):
        return subprocess.run(["true"]).returncode

    assert _in_child(compile_something, profile=seccomp.JIT) == ("exit", 0)
    _refused(_in_child(lambda _: socket.socket(socket.AF_INET6) and 0, profile=seccomp.JIT),
             "socket")


def test_a_second_filter_cannot_take_over_the_listener():
    def install_again(_):
        seccomp.install()  # refused: its listener would receive ours
        return 5

    _refused(_in_child(install_again), "seccomp")


@pytest.mark.skipif(landlock.abi_version() < 1, reason="no Landlock on this kernel")
def test_landlock_confines_writes_to_the_allowed_folder(tmp_path):
    allowed, outside = tmp_path / "allowed", tmp_path / "outside.txt"
    allowed.mkdir()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 0
        try:
            landlock.restrict_self(landlock.Restriction(writable=(str(allowed),)))
            (allowed / "ok.txt").write_text("ok")
            try:
                outside.write_text("escaped")
                code = 3
            except PermissionError:
                pass
        except BaseException:  # noqa: BLE001
            code = 99
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert (allowed / "ok.txt").read_text() == "ok" and not outside.exists()


def test_the_program_has_no_jump_past_its_end():
    arch, nrs = seccomp.arch_table()
    for profile in seccomp.PROFILES.values():
        prog = seccomp.program(profile, 1234, arch, nrs)
        assert len(prog) < 4096  # BPF_MAXINSNS
        for i, (code, jt, jf, _k) in enumerate(prog):
            if code in (0x15, 0x35, 0x45):
                assert i + 1 + max(jt, jf) < len(prog)
        assert prog[-1] == (0x06, 0, 0, seccomp.RET_USER_NOTIF)
