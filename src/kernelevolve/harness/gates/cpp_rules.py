"""What a `load_cpp` source may ask of the preprocessor and the assembler, checked in the driver
before g++ runs.

A source may include system headers only, as `#include <name>` with a relative name that does
not climb (`<cmath>`, `<omp.h>`, `<immintrin.h>`): g++ is given no -I, so that form searches the
system include folders and nothing else. Refused, with the line: `#include "..."`, an absolute or
`..` name, a macro as the name, `#include_next`, `#import`, `#embed`, `__has_include` of anything
but a system header name, `#pragma GCC dependency`, and assembler directives that read other
files or build directive names at assembly time (`.incbin`, `.include`, `.macro`, `.irp`,
`.irpc`) in string literals (adjacent literals joined, escapes decoded) or in code. g++ quotes
an included file's lines in its diagnostics and `.incbin` copies a file into the library, so
either would hand a file's contents to the candidate.

This is the early, precise reason. The proof is the compile sandbox's mounts
(harness/containment/sandbox.py, harness/containment/allowlist.py): no project folder, /opt or $HOME exists there, so a
trick this scan misses (assembler macros built from stringified tokens, say) finds nothing to
read.
"""
from __future__ import annotations

import re

_HEADER = re.compile(r"<([A-Za-z0-9_][A-Za-z0-9_.+/-]{0,199})>")
_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*([A-Za-z_]\w*)(.*)$", re.MULTILINE)
_FILE_DIRECTIVES = ("include_next", "import", "embed")
_HAS = re.compile(r"\b(__has_include_next|__has_include|__has_embed)\b")
_HAS_ARG = re.compile(r"\s*\(\s*(<[^>\n]*>)\s*\)")
# A directive starts an assembler statement: at the start of a line, after `;` or a label.
_ASM = re.compile(r"(?:^|[\n;:])[ \t]*\.(incbin|include|irpc|irp|macro)\b", re.IGNORECASE)
_ASM_CODE = re.compile(r"\.(incbin)\b", re.IGNORECASE)
_RAW = re.compile(r'(?<![A-Za-z0-9_])(?:u8|u|U|L)?R"([^()\\ \t\n]{0,16})\(')
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b"}
SYSTEM_ONLY = ("only system headers may be included, as `#include <name>` (<cmath>, <cstdint>, "
               "<omp.h>, <immintrin.h>...); paste any other code into the source itself")


def check_source(source: str) -> str | None:
    """None when the source asks for nothing but system headers, else the reason."""
    text = _normalise(source)
    code, strings = _scan(text)
    for match in _DIRECTIVE.finditer(code):
        name, rest = match.group(1), match.group(2).strip()
        line = code.count("\n", 0, match.start()) + 1
        where = f"load_cpp: line {line}: `{_quote(match.group(0))}`"
        if name == "include" and not _system_header(rest):
            return f"{where}: {SYSTEM_ONLY}"
        if name in _FILE_DIRECTIVES:
            return f"{where}: #{name} is not allowed; {SYSTEM_ONLY}"
        if name == "pragma" and re.search(r"\bdependency\b", rest):
            return f"{where}: #pragma dependency reads another file; it is not allowed"
    for match in _HAS.finditer(code):
        arg = _HAS_ARG.match(code, match.end())
        if match.group(1) != "__has_include" or not arg or not _system_header(arg.group(1)):
            line = code.count("\n", 0, match.start()) + 1
            return (f"load_cpp: line {line}: `{match.group(1)}` may only test a system header, "
                    f"as {match.group(1)}(<name>)")
    for content in [*strings, code]:
        found = (_ASM if content is not code else _ASM_CODE).search(content)
        if found:
            return (f"load_cpp: the assembler directive `.{found.group(1).lower()}` is not "
                    "allowed: it reads another file or builds directives at assembly time; "
                    "write the data or code into the source")
    return None


def _system_header(rest: str) -> bool:
    m = _HEADER.fullmatch(rest.strip())
    return bool(m) and ".." not in m.group(1).split("/") and "//" not in m.group(1)


def _quote(line: str) -> str:
    line = line.strip()
    return line if len(line) <= 120 else line[:117] + "..."


def _normalise(source: str) -> str:
    """Translation phases 1-2 as far as directives care: trigraphs (-std=c++11/14 honour them),
    digraphs for `#`, and lines joined at a backslash before the newline."""
    text = source.replace("??=", "#").replace("??/", "\\").replace("%:", "#")
    return re.sub(r"\\[ \t]*\r?\n", "", text)


def _scan(text: str) -> tuple[str, list[str]]:
    """The text with comments blanked (line breaks kept), and the contents of its string
    literals, adjacent ones joined and escapes decoded, as the assembler would receive them."""
    out: list[str] = []
    strings: list[str] = []
    adjacent = False  # only blanks since the last string literal: the next one continues it
    i, n = 0, len(text)
    while i < n:
        if text.startswith("//", i) or text.startswith("/*", i):
            if text[i + 1] == "/":
                j = text.find("\n", i)
                j = n if j < 0 else j
            else:
                j = text.find("*/", i + 2)
                j = n if j < 0 else j + 2
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j
            continue
        raw = _RAW.match(text, i)
        c = text[i]
        if raw or c == '"':
            if raw:
                close = ')' + raw.group(1) + '"'
                end = text.find(close, raw.end())
                end = n if end < 0 else end
                content, j = text[raw.end():end], min(n, end + len(close))
            else:
                j = i + 1
                while j < n and text[j] not in '"\n':
                    j += 2 if text[j] == "\\" else 1
                content, j = _unescape(text[i + 1:j]), min(n, j + 1)
            if adjacent:
                strings[-1] += content
            else:
                strings.append(content)
            out.append(text[i:j])
            adjacent, i = True, j
            continue
        if c == "'" and not (i and text[i - 1].isalnum()):  # a character literal, not 1'000
            j = i + 1
            while j < n and text[j] not in "'\n":
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            adjacent, i = False, j + 1
            continue
        out.append(c)
        adjacent = adjacent and c.isspace()
        i += 1
    return "".join(out), strings


def _unescape(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] in "xuU":
            return chr(int(e[1:], 16) % 0x110000)
        if e[0] in "01234567":
            return chr(int(e, 8))
        return _SIMPLE.get(e, e)
    return _ESCAPE.sub(one, body)


# The flags a load_cpp build may pass to g++: code-generation options only.
MAX_FLAGS = 32
_FLAG = re.compile(r"^(-O[0-3sgz]?|-Ofast|-g[0-3]?|-m[a-z0-9][a-z0-9._=+-]{0,79}|"
                   r"-D[A-Za-z_][A-Za-z0-9_]{0,63}(=[A-Za-z0-9_.+\-*/()<>|&^~!%, ]{0,128})?|"
                   r"-U[A-Za-z_][A-Za-z0-9_]{0,63}|-std=(c|gnu)\+\+(11|14|17|20|23|2a|2b|2c)|"
                   r"-W(?![alp],)[a-z0-9=-]{1,64}|-w|-pthread|-lm|-fopenmp(-simd)?|"
                   r"-f(no-)?(fast-math|math-errno|trapping-math|signed-zeros|finite-math-only|"
                   r"associative-math|reciprocal-math|unroll-loops|unroll-all-loops|peel-loops|"
                   r"tree-vectorize|tree-loop-vectorize|tree-slp-vectorize|strict-aliasing|"
                   r"omit-frame-pointer|exceptions|rtti|prefetch-loop-arrays|builtin|"
                   r"semantic-interposition|cx-limited-range|rounding-math|stack-protector|"
                   r"ipa-pta|gcse|inline-functions|plt|fp-int-builtin-inexact)|"
                   r"-f(vect-cost-model|simd-cost-model)=(unlimited|dynamic|cheap|very-cheap)|"
                   r"-ffp-contract=(fast|on|off)|-fexcess-precision=(fast|standard))$")


def check_flags(flags: list[str]) -> str | None:
    """None when every flag is a code-generation option, else the reason for the first one."""
    if len(flags) > MAX_FLAGS:
        return f"load_cpp: {len(flags)} flags; at most {MAX_FLAGS} are accepted"
    for flag in flags:
        if not isinstance(flag, str) or not _FLAG.match(flag):
            return (f"load_cpp: flag {flag!r} is not allowed; use code-generation flags only "
                    "(-O*, -f<math/loop/vectorise option>, -m<target option>, -D/-U, -std=, "
                    "-W<warning>): no plugins, linker or assembler options, paths or libraries")
    return None
