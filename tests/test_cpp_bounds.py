"""A candidate's C++ as hostile input to the compiler: what a source may include, the limits a
compile runs under, and diagnostics cut to the candidate's own source (real g++ throughout)."""
from __future__ import annotations

import re

import pytest

from kernelevolve import knobs
from kernelevolve.errors import CppCompileError
from kernelevolve.harness.driver.build_service import BuildService
from kernelevolve.harness.gates.cpp_rules import check_source
from kernelevolve.runtime.cpp import compile_library
from kernelevolve.runtime.cpp_diagnostics import own_lines
from kernelevolve.runtime.cpp_limits import CompileLimits

GOOD = """#include <cmath>
#include <cstdint>
  #  include <omp.h>
#if __has_include(<immintrin.h>)
#include <immintrin.h>
#endif
struct Opts { int include; };                 // a member may be called include
const char* note = "#include \\"not a directive\\"";
// #include "/in/a/comment"
/* #include "/in/a/block"
   comment */
static const int big = 1'000'000;             // a digit separator is not a character literal
extern "C" double f(double x) { return std::exp(x) + big; }
"""

REFUSED = {
    "quoted": '#include "/opt/project/.env"\n',
    "absolute angle": "#include </opt/project/.env>\n",
    "climbing": "#include <../../../opt/project/.env>\n",
    "macro name": '#define H "/opt/project/.env"\n#include H\n',
    "include_next": "#include_next <cmath>\n",
    "import": "#import <cmath>\n",
    "embed": "const char d[] = {\n#embed \"/opt/project/.env\"\n};\n",
    "digraph": '%:include "/opt/project/.env"\n',
    "trigraph": '??=include "/opt/project/.env"\n',
    "spliced line": '#inc\\\nlude "/opt/project/.env"\n',
    "comment inside": '# /* */ include "/opt/project/.env"\n',
    "has_include of a path": '#if __has_include("/opt/project/.env")\n#endif\n',
    "has_include renamed": "#define H __has_include\n#if H(</opt/x>)\n#endif\n",
    "pragma dependency": '#pragma GCC dependency "/opt/project/.env"\n',
    "incbin": 'asm(".incbin \\"/opt/project/.env\\"");\n',
    "incbin split": 'asm(".inc" "bin \\"/opt/project/.env\\"");\n',
    "incbin escaped": 'asm("\\x2eincbin \\"/opt/project/.env\\"");\n',
    "incbin raw": 'asm(R"(.incbin "/opt/project/.env")");\n',
    "incbin stringified": '#define S(x) #x\nasm(S(.incbin "/opt/project/.env"));\n',
    "asm include after a label": 'asm("blob: .include \\"/opt/project/.env\\"");\n',
    "asm macro": 'asm(".irpc c,bin\\n.inc\\\\c \\"/x\\"\\n.endr");\n',
}


def test_system_headers_comments_strings_and_members_pass():
    assert check_source(GOOD) is None
    assert check_source('void f() { printf("see .include"); }\n') is None


@pytest.mark.parametrize("name", REFUSED)
def test_what_reads_another_file_is_refused_with_the_line(name):
    reason = check_source(REFUSED[name])
    assert reason and reason.startswith("load_cpp:"), name
    assert "system header" in reason or "assembler directive" in reason \
        or "dependency" in reason


def test_refusals_come_before_the_compiler_runs(tmp_path):
    service = BuildService(tmp_path / "cache", sandbox_mode="none")
    log: list = []
    with knobs.override(CXX=str(tmp_path / "no-compiler-here")):  # had g++ run: "cannot run"
        reply = service.handle({"op": "compile", "source": REFUSED["quoted"], "flags": [],
                                "name": "k"}, log)
    assert not reply["ok"] and "only system headers" in reply["message"]
    for flag in ("-I/opt", "-include/opt/x", "-iquote/opt", "--sysroot=/opt", "@/opt/args",
                 "-B/opt", "-Wp,-I/opt", "-imacros/opt/x"):
        reply = service.handle({"op": "compile", "source": GOOD, "flags": [flag],
                                "name": "k"}, log)
        assert not reply["ok"] and "is not allowed" in reply["message"], flag


TEMPLATE_BOMB = """
template <int N, long M> struct F { static const long v = F<N - 1, 2 * M>::v + F<N - 1, 2 * M + 1>::v; };
template <long M> struct F<0, M> { static const long v = M; };
extern "C" long bomb() { return F<40, 1>::v; }
"""


@pytest.mark.slow
def test_a_cpu_bomb_is_stopped_at_the_cpu_limit_it_names(tmp_path):
    with knobs.override(KERNELEVOLVE_COMPILE_CPU_S="1"):
        with pytest.raises(CppCompileError) as info:
            compile_library(TEMPLATE_BOMB, (), knobs.cxx(), tmp_path, "tpl")
    assert "exceeded its 1 s CPU time limit" in str(info.value)


def test_an_output_bomb_is_stopped_at_the_file_size_limit_it_names(tmp_path):
    source = 'asm(".data\\n.globl big\\nbig: .fill 8388608, 1, 65\\n.text");\n'
    limits = CompileLimits(memory_bytes=1 << 30, cpu_seconds=60, file_bytes=1 << 20)
    with pytest.raises(CppCompileError) as info:
        compile_library(source, (), knobs.cxx(), tmp_path, "fill", limits=limits)
    assert "output exceeded its 1 MiB file size limit" in str(info.value)


@pytest.mark.slow
def test_an_honest_kernel_compiles_well_inside_the_limits(tmp_path):
    limits = CompileLimits(memory_bytes=512 << 20, cpu_seconds=30)
    assert compile_library(GOOD, ("-ffast-math",), knobs.cxx(), tmp_path, "good",
                           limits=limits).is_file()


def test_diagnostics_quote_only_the_candidates_own_source(tmp_path):
    source = ('#include <vector>\n'
              'extern "C" int f() { std::vector<int> v; v.push_back("x"); return nope; }\n')
    with pytest.raises(CppCompileError) as info:
        compile_library(source, (), knobs.cxx(), tmp_path, "k")
    text = str(info.value) + info.value.log
    assert "k.cpp:2:" in text and "nope" in text
    assert "stl_vector.h" in info.value.log        # a system header's message, by name...
    assert "/usr/include" not in text               # ...no path, and none of its lines
    quoted = re.findall(r"^\s*(\d+) \|", text, re.MULTILINE)
    assert quoted and set(quoted) == {"2"}


def test_lines_located_in_other_files_are_left_out():
    log = "\n".join([
        "In file included from k.cpp:1:",
        "/srv/project/.env:1:1: error: 'OPENAI_API_KEY' does not name a type",
        "    1 | OPENAI_API_KEY=sk-secret",
        "      | ^~~~~~~~~~~~~~",
        "k.cpp:3:5: error: 'nope' was not declared in this scope",
        "    3 |     nope();",
        "      |     ^~~~",
        "/usr/include/c++/12/bits/stl_vector.h:10:2: note: candidate: 'f()'",
        "   10 |   system header text",
        "g++: fatal error: compilation terminated",
    ])
    kept, dropped = own_lines(log, "k.cpp")
    assert "sk-secret" not in kept and "/srv/project" not in kept
    assert "k.cpp:3:5: error" in kept and "    3 |     nope();" in kept
    assert "stl_vector.h:10:2: note" in kept and "system header text" not in kept
    assert "g++: fatal error" in kept
    assert dropped == 3
