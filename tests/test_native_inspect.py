"""The driver's build service: flag allowlist, sandboxed g++, inspection of the library, and a
cache that serves a library only when its bytes match the manifest. Real g++, real objdump."""
from __future__ import annotations

import json

import pytest

from kernelevolve.harness.gates import native_allow
from kernelevolve.harness.driver.build_service import BuildService
from kernelevolve.harness.gates.cpp_rules import check_flags
from kernelevolve.harness.gates.native_inspect import inspect_library

KERNEL = 'extern "C" void k(float* y, long n) { for (long i = 0; i < n; ++i) y[i] = 1.f; }\n'


@pytest.fixture
def service(tmp_path):
    return BuildService(tmp_path / "cache")


def build(service, source, flags=(), name="lib"):
    log = []
    reply = service.handle({"op": "compile", "source": source, "flags": list(flags),
                            "name": name}, log)
    assert log and log[-1]["ok"] == reply["ok"]
    return reply


@pytest.mark.slow
def test_a_plain_kernel_is_built_inspected_and_served(service):
    reply = build(service, KERNEL + '#include <cmath>\n#include <omp.h>\nextern "C" float f(float x)'
                  ' { float s = 0; \n#pragma omp parallel for reduction(+:s)\n'
                  'for (int i = 0; i < 8; ++i) s += std::exp(x * i) * omp_get_num_threads();'
                  ' return s; }\n', flags=["-O2", "-ffast-math", "-mavx2", "-DBLOCK=64"])
    assert reply["ok"], reply
    manifest = json.loads(open(reply["path"][:-3] + ".json").read())
    assert manifest["inspection"]["ok"] and manifest["sha256"] == reply["sha256"]
    again = build(service, KERNEL + "")  # a different source: a different library
    assert again["ok"] and again["path"] != reply["path"]


@pytest.mark.parametrize("snippet, named, category", [
    ('extern "C" int PyRun_SimpleString(const char*);\nextern "C" int r() { return '
     'PyRun_SimpleString("1"); }', "PyRun_SimpleString", "Python C API"),
    ('#include <dlfcn.h>\nextern "C" void* r() { return dlsym(RTLD_DEFAULT, "system"); }',
     "dlsym", "dynamic loading"),
    ('#include <unistd.h>\n#include <sys/syscall.h>\nextern "C" long r() { return syscall(39); }',
     "syscall", "raw system calls"),
    ('#include <unistd.h>\nextern "C" int r() { return fork(); }', "fork", "processes"),
    ('#include <cstdio>\nextern "C" void* r() { return std::fopen("/x", "w"); }', "fopen",
     "file system"),
    ('#include <sys/socket.h>\nextern "C" int r() { return socket(2, 1, 0); }', "socket",
     "sockets"),
])
@pytest.mark.slow
def test_refused_imports_are_named_with_what_they_reach(service, snippet, named, category):
    reply = build(service, KERNEL + snippet, name="refused")
    assert not reply["ok"] and reply["kind"] == "inspection"
    assert named in reply["message"] and category in reply["message"]
    assert "path" not in reply  # never served


@pytest.mark.skipif(__import__("platform").machine() != "x86_64", reason="x86 inline assembly")
def test_syscall_instructions_are_found_in_the_code(service):
    reply = build(service, KERNEL + 'extern "C" long r() { long v; asm volatile("syscall" : '
                  '"=a"(v) : "a"(39) : "rcx", "r11", "memory"); return v; }', name="rawsys")
    assert not reply["ok"] and "system-call instruction" in reply["message"]
    assert "`syscall` in r" in reply["message"]


@pytest.mark.parametrize("flags", [["-fplugin=/tmp/x.so"], ["-Wl,-rpath,/evil"], ["@/etc/shadow"],
                                   ["-o", "/etc/passwd"], ["-L/tmp", "-lhostile"], ["-B/tmp"],
                                   ["-include/etc/shadow"], ["-Wa,-adhln=/tmp/x"]])
def test_flags_outside_code_generation_are_refused(service, flags):
    assert check_flags(flags)
    reply = build(service, KERNEL, flags=flags)
    assert not reply["ok"] and "is not allowed" in reply["message"]


def test_flags_the_examples_and_synthesizer_use_are_accepted():
    assert check_flags(["-fno-math-errno", "-fno-trapping-math", "-mprefer-vector-width=512",
                        "-O3", "-ffast-math", "-march=native", "-DFAST_EXP=1", "-std=c++20",
                        "-Wno-unused", "-funroll-loops", "-fopenmp"]) is None


def test_compile_errors_come_back_with_the_failing_line(service):
    reply = build(service, "int x = ;\n", name="broken")
    assert not reply["ok"] and reply["kind"] == "compile"
    assert "broken.cpp:1" in reply["message"] and "^" in reply["message"]


def test_the_compiler_sees_no_secret(service, monkeypatch):
    monkeypatch.setenv("KE_COMPILE_SECRET", "hunter2-compile")
    for source in ('#include "/proc/self/environ"\n', "#error x\n#include \"/proc/1/environ\"\n"):
        reply = build(service, source, name="leak")
        assert "hunter2-compile" not in json.dumps(reply)


def test_a_swapped_library_is_rebuilt_not_served(service, tmp_path):
    first = build(service, KERNEL, name="swap")
    with open(first["path"], "r+b") as fh:
        fh.seek(64)
        fh.write(b"\0" * 64)
    second = build(service, KERNEL, name="swap")
    assert second["ok"] and second["sha256"] == first["sha256"]  # rebuilt: same bytes again


def test_garbage_requests_are_refused(service):
    for request in (None, "compile", {"op": "exec"}, {"op": "compile", "source": 1, "flags": [],
                    "name": "x"}, {"op": "compile", "source": "x", "flags": "-O3", "name": "x"},
                    {"op": "compile", "source": "x" * (9 << 20), "flags": [], "name": "x"}):
        log = []
        assert service.handle(request, log)["ok"] is False and log[0]["ok"] is False


def test_a_file_that_is_not_a_library_is_refused(tmp_path):
    junk = tmp_path / "junk.so"
    junk.write_bytes(b"\x7fELF" + b"\0" * 100)
    assert not inspect_library(junk, "junk.so").ok


def test_allowlist_categories_cover_the_refused_families():
    for sym in ("PyEval_GetGlobals", "_Py_Dealloc", "dlopen", "execve", "socket", "openat",
                "mprotect", "syscall"):
        assert not native_allow.allowed(sym)
        assert "nothing a kernel needs" not in native_allow.category(sym)
    for sym in ("expf", "GOMP_parallel", "omp_get_num_threads", "_Znwm", "memcpy", "madvise",
                "_ZGVdN8v_expf", "__cxa_throw", "printf"):
        assert native_allow.allowed(sym)
