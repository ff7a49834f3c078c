"""Integrity rules of the static gate (harness/gates/static_rules.py): each rule on a small source, the
legitimate patterns it must leave alone, and the finding format. Whole files (examples and the
corpus): test_static_corpus.py."""
from __future__ import annotations

import ast
import re
import textwrap

import pytest

from kernelevolve.harness.gates.static_rules import find_violations


PRELUDE = """\
import ctypes
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
from kernelevolve.runtime import load_cpp, ptr
"""
PRELUDE_LINES = PRELUDE.count("\n")


def findings(body: str, prelude: bool = True) -> list[str]:
    source = (PRELUDE if prelude else "") + textwrap.dedent(body)
    return find_violations(ast.parse(source), source, "candidate.py")


# (id, source, text every finding list must contain: one finding holds it, case-insensitive)
POSITIVE = [
    # imports: an allow-list, with a specific reason where there is one
    ("import-os", "import os\n", "process creation, environment and file-system access"),
    ("import-sys", "import sys\n", "sys.modules and gc access can patch the harness"),
    ("import-gc", "import gc\n", "sys.modules and gc access"),
    ("import-threading", "import threading\n", "hidden work that escapes timing"),
    ("import-concurrent", "from concurrent.futures import ThreadPoolExecutor\n", "threads"),
    ("import-multiprocessing", "import multiprocessing as mp\n", "processes run hidden work"),
    ("import-subprocess", "import subprocess\n", "process creation"),
    ("import-time", "import time\n", "timing functions are the harness's"),
    ("from-time", "from time import perf_counter\n", "timing functions"),
    ("import-socket", "import socket\n", "network"),
    ("import-urllib", "import urllib.request\n", "network"),
    ("import-requests", "import requests\n", "network"),
    ("import-pathlib", "from pathlib import Path\n", "file system"),
    ("import-importlib", "import importlib\n", "dynamic imports"),
    ("import-inspect", "import inspect\n", "introspection"),
    ("import-builtins", "import builtins\n", "builtins access"),
    ("import-pickle", "import pickle\n", "arbitrary code"),
    ("import-atexit", "import atexit\n", "exit hooks"),
    ("import-signal", "import signal\n", "signal handlers"),
    ("import-unknown", "import einops\n", "not on the allow-list"),
    ("import-relative", "from . import helpers\n", "relative imports"),
    ("import-star", "from ctypes import *\n", "star imports"),
    ("kernelevolve-harness", "from kernelevolve.harness import evaluate\n",
     "only load_cpp, ptr, kernel_launcher and elementwise_launcher"),
    ("kernelevolve-other-name", "from kernelevolve.runtime import reset_launch_counts\n",
     "only load_cpp, ptr, kernel_launcher and elementwise_launcher"),
    ("kernelevolve-attribute", "import kernelevolve.runtime\nkernelevolve.runtime.launches\n",
     "only load_cpp, ptr, kernel_launcher and elementwise_launcher"),
    ("kernelevolve-launch-module", "from kernelevolve.runtime import launch\n",
     "only load_cpp, ptr, kernel_launcher and elementwise_launcher"),
    ("kernelevolve-launch-ext", "from kernelevolve.runtime.launch import _extension\n",
     "only load_cpp, ptr, kernel_launcher and elementwise_launcher"),
    # forbidden builtins
    ("eval", "eval('1 + 1')\n", "`eval` is not allowed"),
    ("exec", "exec('x = 1')\n", "`exec` is not allowed"),
    ("compile", "c = compile('1', 'f', 'eval')\n", "`compile` is not allowed"),
    ("dunder-import", "m = __import__('os')\n", "`__import__` is not allowed"),
    ("globals", "g = globals()\n", "`globals` is not allowed"),
    ("locals", "def f():\n    return locals()\n", "`locals` is not allowed"),
    ("vars", "v = vars(torch)\n", "`vars` is not allowed"),
    ("open", "data = open('weights.bin').read()\n", "`open` is not allowed"),
    ("open-referenced", "reader = open\n", "`open` is not allowed"),
    ("input", "s = input()\n", "`input` is not allowed"),
    ("breakpoint", "breakpoint()\n", "`breakpoint` is not allowed"),
    ("exit", "exit(0)\n", "`exit` is not allowed"),
    ("quit", "quit()\n", "`quit` is not allowed"),
    ("system-exit", "raise SystemExit(0)\n", "ends the worker without a result"),
    ("builtin-via-default", "def f(o=open):\n    return o('x')\n", "`open` is not allowed"),
    ("getattr-computed", "name = 'x'\ny = getattr(torch, name)\n", "computed attribute name"),
    ("setattr-computed", "def f(self, n, v):\n    setattr(self, n, v)\n", "computed attribute"),
    ("hasattr-computed", "def f(o, n):\n    return hasattr(o, n)\n", "computed attribute"),
    ("getattr-referenced", "g = getattr\n", "may only be called directly"),
    ("getattr-on-module", "f32 = getattr(torch, 'float32')\n",
     "getattr on the imported name torch"),
    # dunder attributes and frames
    ("globals-attr", "def f():\n    pass\ng = f.__globals__\n", "`__globals__` is not allowed"),
    ("subclasses", "s = object.__subclasses__()\n", "`__subclasses__` is not allowed"),
    ("dict-attr", "d = torch.__dict__\n", "`__dict__` is not allowed"),
    ("class-mro", "c = ().__class__.__mro__\n", "`__mro__` is not allowed"),
    ("code-attr", "def f():\n    pass\nc = f.__code__\n", "`__code__` is not allowed"),
    ("closure", "def f():\n    pass\nc = f.__closure__\n", "`__closure__` is not allowed"),
    ("bases", "b = nn.Module.__bases__\n", "`__bases__` is not allowed"),
    ("getattribute", "g = object.__getattribute__\n", "`__getattribute__` is not allowed"),
    ("builtins-name", "b = __builtins__\n", "`__builtins__` is not allowed"),
    ("loader-name", "l = __loader__\n", "`__loader__` is not allowed"),
    ("spec-attr", "s = torch.__spec__\n", "`__spec__` is not allowed"),
    ("self-attr", "b = print.__self__\n", "`__self__` is not allowed"),
    ("frame-back", "def f(frame):\n    return frame.f_back.f_globals\n", "frame objects"),
    ("gi-frame", "def f(g):\n    return g.gi_frame\n", "`gi_frame` is not allowed"),
    ("tb-frame", "def f(e):\n    return e.__traceback__.tb_frame\n", "`tb_frame` is not allowed"),
    ("getattr-literal-dunder", "g = getattr(f, '__globals__')\n", "`__globals__` is not allowed"),
    ("object-setattr", "object.__setattr__(torch, 'allclose', None)\n", "`__setattr__`"),
    # monkeypatching import-rooted names
    ("patch-allclose", "torch.allclose = lambda *a, **k: True\n", "monkeypatching torch.allclose"),
    ("patch-F", "F.softmax = lambda x, dim: x\n", "monkeypatching torch.nn.functional.softmax"),
    ("patch-nn-call", "nn.Module.__call__ = None\n", "monkeypatching torch.nn.Module.__call__"),
    ("patch-tensor", "torch.Tensor.add = None\n", "monkeypatching torch.Tensor.add"),
    ("patch-tl", "tl.load = None\n", "monkeypatching triton.language.load"),
    ("patch-triton", "triton.jit = lambda f: f\n", "monkeypatching triton.jit"),
    ("patch-math", "math.exp = None\n", "monkeypatching math.exp"),
    ("patch-np", "np.allclose = None\n", "monkeypatching numpy.allclose"),
    ("patch-ctypes", "ctypes.c_int = ctypes.c_long\n", "monkeypatching ctypes.c_int"),
    ("patch-from-import", "from torch import Tensor\nTensor.sum = None\n",
     "monkeypatching torch.Tensor.sum"),
    ("patch-from-import-as", "from torch.nn import functional as G\nG.gelu = None\n",
     "monkeypatching torch.nn.functional.gelu"),
    ("patch-load-cpp", "load_cpp.cache = {}\n", "monkeypatching kernelevolve.runtime.load_cpp"),
    ("patch-augassign", "torch.Tensor.__add__ += 1\n", "monkeypatching torch.Tensor.__add__"),
    ("patch-annassign", "torch.equal: object = None\n", "monkeypatching torch.equal"),
    ("patch-del", "del torch.isclose\n", "monkeypatching torch.isclose"),
    ("patch-tuple", "a, torch.equal = 1, None\n", "monkeypatching torch.equal"),
    ("patch-subscript", "F.__all__[0] = 'x'\n", "monkeypatching torch.nn.functional.__all__"),
    ("patch-for-target", "for torch.x in range(3):\n    pass\n", "monkeypatching torch.x"),
    ("patch-alias", "T = torch.Tensor\nT.mul = None\n", "monkeypatching torch.Tensor.mul"),
    ("patch-alias-tuple", "a, G = 1, torch.nn.functional\nG.relu = None\n",
     "monkeypatching torch.nn.functional.relu"),
    ("patch-alias-walrus", "if (G := F):\n    G.relu = None\n",
     "monkeypatching torch.nn.functional.relu"),
    ("patch-setattr", "setattr(torch, 'allclose', None)\n", "monkeypatching torch.allclose"),
    ("patch-setattr-chain", "setattr(torch.Tensor, 'add', None)\n",
     "monkeypatching torch.Tensor.add"),
    ("patch-delattr", "delattr(F, 'relu')\n", "monkeypatching torch.nn.functional.relu"),
    ("patch-type-of", "def f(x):\n    type(x).add = None\n", "patching attributes of type(...)"),
    ("patch-type-alias", "def f(x):\n    T = type(x)\n    T.add = None\n", "type(...)"),
    ("setattr-type-of", "def f(x):\n    setattr(type(x), 'add', None)\n", "type(...)"),
    ("patch-backends", "torch.backends.cuda.matmul.allow_tf32 = True\n", "torch.backends settings"),
    ("patch-cudnn", "torch.backends.cudnn.benchmark = True\n", "assigning torch.backends.cudnn"),
    # torch members
    ("cuda-stream", "s = torch.cuda.Stream()\n", "CUDA streams hide work from the timer"),
    ("cuda-stream-ctx", "def f(s):\n    with torch.cuda.stream(s):\n        pass\n",
     "use the current stream"),
    ("cuda-set-stream", "torch.cuda.set_stream(None)\n", "CUDA streams"),
    ("cuda-external-stream", "s = torch.cuda.ExternalStream(0)\n", "CUDA streams"),
    ("torch-stream", "s = torch.Stream()\n", "CUDA streams"),
    ("cuda-streams-module", "s = torch.cuda.streams.Stream()\n", "CUDA streams"),
    ("from-cuda-import-stream", "from torch.cuda import Stream\n", "CUDA streams"),
    ("torch-mp", "import torch.multiprocessing as tmp\n", "torch.multiprocessing is not allowed"),
    ("torch-distributed", "torch.distributed.init_process_group('gloo')\n",
     "torch.distributed is not allowed"),
    ("torch-library", "lib = torch.library.Library('aten', 'IMPL')\n", "torch.library"),
    ("torch-C", "h = torch._C._get_tracing_state()\n", "private torch internals"),
    ("torch-dynamo", "torch._dynamo.reset()\n", "private torch internals"),
    ("torch-inductor", "from torch._inductor import config\n", "private torch internals"),
    ("torch-private-fn", "y = torch._softmax(x, 1, False)\n", "private torch internals"),
    ("load-library", "torch.ops.load_library('libx.so')\n", "torch.ops.load_library"),
    ("cpp-extension-load", "m = torch.utils.cpp_extension.load('m', ['m.cpp'])\n",
     "torch.utils.cpp_extension.load is not allowed"),
    ("cpp-extension-load-import", "from torch.utils.cpp_extension import load\n",
     "use load_inline"),
    ("torch-save", "torch.save({}, 'x.pt')\n", "torch.save"),
    ("torch-load", "w = torch.load('x.pt')\n", "torch.load"),
    ("torch-hub", "m = torch.hub.load('a', 'b')\n", "torch.hub"),
    ("set-num-threads", "torch.set_num_threads(1)\n", "process-wide torch state"),
    ("set-interop", "torch.set_num_interop_threads(1)\n", "process-wide torch state"),
    ("flush-denormal", "torch.set_flush_denormal(True)\n", "process-wide torch state"),
    ("default-dtype", "torch.set_default_dtype(torch.float64)\n", "process-wide torch state"),
    ("grad-enabled", "torch.set_grad_enabled(False)\n", "process-wide torch state"),
    ("deterministic", "torch.use_deterministic_algorithms(True)\n", "process-wide torch state"),
    ("manual-seed", "torch.manual_seed(0)\n", "the harness owns the random state"),
    ("cuda-seed", "torch.cuda.manual_seed_all(0)\n", "the harness owns the random state"),
    ("seed", "s = torch.seed()\n", "random state"),
    ("rng-state", "s = torch.get_rng_state()\n", "random state"),
    ("backends-set", "torch.backends.cuda.enable_flash_sdp(False)\n", "torch.backends settings"),
    ("testing", "torch.testing.assert_close(a, b)\n", "torch.testing is the harness's comparison"),
    ("torch-serialization", "w = torch.serialization.load('x')\n", "torch.serialization"),
    ("torch-from-file", "w = torch.from_file('x', size=4)\n", "`from_file` is not allowed"),
    ("torch-jit-fork", "fut = torch.jit.fork(f, x)\n", "another thread"),
    ("torch-jit-load", "m = torch.jit.load('m.pt')\n", "torch.jit.load is not allowed"),
    ("cudart", "rt = torch.cuda.cudart()\n", "torch.cuda.cudart is not allowed"),
    ("allocator", "torch.cuda.memory.change_current_allocator(a)\n", "replaces the allocator"),
    ("torch-overrides", "m = torch.overrides.TorchFunctionMode\n",
     "torch.overrides is not allowed"),
    ("classes-load-library", "torch.classes.load_library('x.so')\n",
     "torch.classes.load_library is not allowed"),
    ("np-f2py", "import numpy.f2py\n", "numpy.f2py is not allowed"),
    ("base-attr", "b = ().__class__.__base__\n", "`__base__` is not allowed"),
    ("global-hook", "torch.nn.modules.module.register_module_forward_hook(h)\n",
     "global module hooks"),
    ("torch-os", "torch.os.getcwd()\n", "reaching os through torch"),
    # numpy
    ("np-save", "np.save('x.npy', a)\n", "numpy.save is not allowed"),
    ("np-savez", "np.savez('x.npz', a=a)\n", "numpy.savez"),
    ("np-savetxt", "np.savetxt('x.txt', a)\n", "numpy.savetxt"),
    ("np-load", "a = np.load('x.npy')\n", "numpy.load is not allowed"),
    ("np-loadtxt", "a = np.loadtxt('x.txt')\n", "numpy.loadtxt"),
    ("np-fromfile", "a = np.fromfile('x.bin')\n", "numpy.fromfile"),
    ("np-memmap", "a = np.memmap('x.bin')\n", "numpy.memmap"),
    ("np-ctypeslib", "a = np.ctypeslib.as_array(p, (4,))\n", "numpy.ctypeslib"),
    ("np-lib-format", "np.lib.format.write_array(f, a)\n", "numpy.lib.format"),
    ("tofile-method", "def f(a):\n    a.tofile('x.bin')\n", "`tofile` is not allowed"),
    ("write-text", "def f(p):\n    p.write_text('x')\n", "`write_text` is not allowed"),
    ("write-bytes", "def f(p):\n    p.write_bytes(b'x')\n", "`write_bytes` is not allowed"),
    # ctypes
    ("ctypes-cdll", "lib = ctypes.CDLL('libc.so.6')\n", "ctypes may only describe argument types"),
    ("ctypes-cdll-lower", "lib = ctypes.cdll.LoadLibrary('x')\n", "ctypes.cdll is not allowed"),
    ("ctypes-pydll", "lib = ctypes.PyDLL(None)\n", "load libraries with load_cpp"),
    ("ctypes-pythonapi", "api = ctypes.pythonapi\n", "ctypes.pythonapi is not allowed"),
    ("ctypes-cast", "p = ctypes.cast(0, ctypes.c_void_p)\n", "ctypes.cast is not allowed"),
    ("ctypes-memmove", "ctypes.memmove(a, b, 4)\n", "ctypes.memmove is not allowed"),
    ("ctypes-memset", "ctypes.memset(a, 0, 4)\n", "ctypes.memset is not allowed"),
    ("ctypes-string-at", "s = ctypes.string_at(4096)\n", "ctypes.string_at"),
    ("ctypes-addressof", "a = ctypes.addressof(x)\n", "ctypes.addressof"),
    ("ctypes-cfunctype", "CB = ctypes.CFUNCTYPE(None)\n", "ctypes.CFUNCTYPE"),
    ("ctypes-util", "import ctypes.util\n", "ctypes.util is not allowed"),
    ("ctypes-private", "f = ctypes._CFuncPtr\n", "ctypes._CFuncPtr is not allowed"),
    ("ctypes-from-import", "from ctypes import CDLL\n", "ctypes.CDLL is not allowed"),
    ("from-address", "v = ctypes.c_float.from_address(4096)\n", "`from_address` is not allowed"),
    ("from-buffer", "v = (ctypes.c_char * 4).from_buffer(b)\n", "`from_buffer` is not allowed"),
    ("from-buffer-copy", "v = ctypes.c_int.from_buffer_copy(b)\n", "`from_buffer_copy`"),
    ("funcptr", "lib = load_cpp('s')\nlib._FuncPtr = ctypes.c_void_p\n", "launch accounting"),
    # os / sys / signal members
    ("os-exit", "import os\nos._exit(0)\n", "os._exit ends the worker"),
    ("os-environ", "import os\nk = os.environ['API_KEY']\n", "environment is the harness's"),
    ("os-getenv", "import os\nk = os.getenv('HOME')\n", "`getenv` is not allowed"),
    ("os-system", "import os\nos.system('ls')\n", "os.system is not allowed"),
    ("os-fork", "import os\npid = os.fork()\n", "os.fork is not allowed"),
    ("os-kill", "import os\nos.kill(1, 9)\n", "os.kill is not allowed"),
    ("sys-exit", "import sys\nsys.exit(0)\n", "sys.exit is not allowed"),
    ("sys-modules", "import sys\nsys.modules['torch'] = None\n", "sys.modules is not allowed"),
    ("signal-alarm", "import signal\nsignal.alarm(1)\n", "signal.alarm is not allowed"),
    ("os-indirect-exit", "def f(m):\n    m.os._exit(0)\n", "os._exit ends the worker"),
    ("getattr-exit", "def f(m):\n    getattr(m, '_exit')(0)\n", "os._exit ends the worker"),
    ("getattr-chain", "s = getattr(torch.cuda, 'Stream')()\n", "torch.cuda.Stream is not allowed"),
    # other allowed modules' escape hatches
    ("get-type-hints", "import typing\nh = typing.get_type_hints(f)\n", "evaluates strings"),
    ("attrgetter", "import operator\ng = operator.attrgetter('__globals__')\n", "attrgetter"),
    # allow-lists in modules that run strings, programs or read files (static_members.py)
    ("utils-benchmark", "from torch.utils.benchmark import Timer\n",
     "torch.utils.benchmark is not allowed"),
    ("utils-benchmark-attr", "t = torch.utils.benchmark.Timer(stmt='x')\n",
     "runs code given as a string"),
    ("utils-collect-env", "import torch.utils.collect_env\n", "runs shell commands"),
    ("utils-data", "from torch.utils.data import DataLoader\n", "torch.utils.data is not allowed"),
    ("utils-checkpoint", "y = torch.utils.checkpoint.checkpoint(f, x)\n",
     "may use torch.utils.cpp_extension.load_inline and torch.utils.dlpack"),
    ("utils-via-functional", "t = F.torch.utils.benchmark\n",
     "reaching torch through torch.nn.functional"),
    ("jit-script", "@torch.jit.script\ndef f(x):\n    return x\n", "TorchScript compiles"),
    ("jit-compilation-unit", "cu = torch.jit.CompilationUnit('def f(x): return x')\n",
     "torch.jit.CompilationUnit is not allowed"),
    ("compiler-artifacts", "torch.compiler.load_cache_artifacts(b'')\n",
     "torch.compiler.load_cache_artifacts is not allowed"),
    ("compile-options", "f = torch.compile(g, options={'cpp.cxx': (None, 'sh')})\n",
     "inductor's options name the compiler program"),
    ("compile-kwargs", "kw = {}\nf = torch.compile(g, **kw)\n", "torch.compile's `options`"),
    ("compile-partial-options", "import functools\n"
     "c = functools.partial(torch.compile, options={})\n", "inductor's options"),
    ("singledispatch", "import functools\n@functools.singledispatch\ndef f(x):\n    pass\n",
     "functools.singledispatch is not allowed"),
    ("singledispatchmethod", "from functools import singledispatchmethod\n",
     "functools.singledispatchmethod is not allowed"),
    ("singledispatch-unrooted", "def f(m):\n    return m.singledispatch\n",
     "`singledispatch` is not allowed"),
    ("functools-via-torch", "d = torch.functools.singledispatch\n",
     "reaching functools through torch is importing it: import functools directly"),
    ("typing-forwardref", "from typing import ForwardRef\n", "evaluates strings"),
    ("typing-private", "import typing\ntyping._eval_type(1, {}, {})\n",
     "private typing internals"),
    ("typing-ext-annotations", "import typing_extensions\nt = typing_extensions.get_annotations\n",
     "evaluates strings"),
    ("typing-via-triton", "h = tl.core.typing.get_type_hints\n",
     "reaching typing through triton.language.core"),
    ("make-dataclass", "import dataclasses\nC = dataclasses.make_dataclass('C', ['a'])\n",
     "dataclasses.make_dataclass is not allowed"),
    ("collections-other", "import collections\nx = collections.something\n",
     "collections.something is not allowed"),
    ("annotations-name", "class C:\n    __annotations__ = {'a': int}\n",
     "`__annotations__` is not allowed"),
    ("annotations-attr", "def f(c):\n    c.__annotations__['x'] = int\n",
     "`__annotations__` is not allowed"),
    ("annotations-string", "C = type('C', (), {'__annotations__': {}})\n",
     "the string '__annotations__' is not allowed"),
    ("annotations-keyword", "d = dict(__annotations__={})\n", "keyword __annotations__="),
    ("getattr-dunder", "m = torch.__getattr__('x')\n", "`__getattr__` is not allowed"),
    # string annotations are type expressions, checked like code (static_strings.py)
    ("string-annotation-call", "def f(x: \"__import__('os').system('id') or int\"):\n    pass\n",
     "a string annotation may only name types"),
    ("string-annotation-return", "def f(x) -> 'exec(S)':\n    pass\n", "may only name types"),
    ("string-annotation-annassign", "x: 'eval(\"1\")' = 1\n", "may only name types"),
    ("string-annotation-nested", "from typing import List\ndef f(x: List['exec(S)']):\n"
     "    pass\n", "may only name types"),
    ("string-annotation-syntax", "def f(x: 'int int'):\n    pass\n", "does not parse"),
    ("string-annotation-rules", "def f(x: 'torch.cuda.traceback.FrameSummary'):\n    pass\n",
     "reaching traceback through torch.cuda"),
    ("string-annotation-dunder", "def f(x: 'int.__subclasses__'):\n    pass\n",
     "`__subclasses__` is not allowed"),
    # format strings: fields name arguments only, and the template must be readable
    ("format-attr-walk", "s = '{0.__globals__}'.format(f)\n", "format field `{0.__globals__}`"),
    ("format-index-walk", "s = '{0[os]}'.format(g)\n", "attribute or index walk"),
    ("format-map-walk", "s = '{m.x}'.format_map(d)\n", "format field `{m.x}`"),
    ("format-nested-spec", "s = '{0:{1.__class__}}'.format(a, b)\n",
     "format field `{1.__class__}`"),
    ("format-module-constant", "T = '{0.__globals__[os]}'\ns = T.format(f)\n",
     "attribute or index walk"),
    ("format-concat", "T = '{0.' + '__globals__}'\ns = T.format(f)\n", "attribute or index walk"),
    ("format-parameter", "def f(t, x):\n    return t.format(x)\n", "the gate cannot read"),
    ("format-fstring", "s = f'{{0.__globals__}}'.format(g)\n", "the gate cannot read"),
    ("format-rebound", "T = '{}'\nfor T in xs:\n    pass\ns = T.format(1)\n",
     "the gate cannot read"),
    ("format-referenced", "fmt = '{0.__globals__}'.format\n", "attribute or index walk"),
    ("str-format", "s = str.format('{0.__globals__}', f)\n", "attribute or index walk"),
    ("str-format-map-computed", "def f(t):\n    return str.format_map(t, {})\n",
     "`.format_map` on a string the gate cannot read"),
    ("str-format-value", "fmt = str.format\n", "may only be called directly"),
    ("getattr-format", "s = getattr('{0.__globals__}', 'format')(f)\n",
     "attribute or index walk"),
    ("format-malformed", "s = '{0'.format(1)\n", "malformed"),
    # site's file-reading helpers; standard-library modules reached through allowed ones
    ("license", "t = repr(license)\n", "`license` is not allowed"),
    ("help", "help(torch)\n", "`help` is not allowed"),
    ("printer-files", "def f(p):\n    p._Printer__filenames = ['x']\n", "`_Printer__filenames`"),
    ("reexport-traceback", "s = torch.cuda.traceback.FrameSummary('x', 1, 'y').line\n",
     "reaching traceback through torch.cuda"),
    ("reexport-from-import", "from torch.cuda import traceback\n",
     "reaching traceback through torch.cuda"),
    ("reexport-glob", "g = torch.glob.glob('/opt/*')\n", "reaching glob through torch"),
    ("reexport-builtins", "b = tl.core.builtins\n", "builtins access"),
    ("reexport-pathlib", "p = np.pathlib.Path('x')\n", "reaching pathlib through numpy"),
    # triton, numpy and torch modules that read files, run programs or generate code
    ("triton-compile", "k = triton.compile('k.ttir')\n", "triton.compile is not allowed"),
    ("triton-cache", "from triton.runtime.cache import get_cache_manager\n",
     "triton.runtime.cache is not allowed"),
    ("triton-knobs", "d = triton.knobs.cache.dir\n", "triton.knobs is not allowed"),
    ("triton-testing", "ms = triton.testing.do_bench(f)\n", "triton.testing is not allowed"),
    ("triton-driver-set", "triton.runtime.driver.set_active(None)\n",
     "triton.runtime.driver.set_active is not allowed"),
    ("numpy-testing", "np.testing.assert_allclose(a, b)\n", "numpy.testing is not allowed"),
    ("numpy-rec-fromfile", "r = np.rec.fromfile('x')\n", "numpy.rec.fromfile is not allowed"),
    ("numpy-lib-other", "np.lib.introspect.opt_func_info()\n",
     "numpy.lib.introspect is not allowed"),
    ("numpy-core", "np.core.records.fromfile('x')\n", "numpy.core is not allowed"),
    ("fromfile-unrooted", "def f(m):\n    return m.fromfile('x')\n", "`fromfile` is not allowed"),
    ("torch-fx", "g = torch.fx.symbolic_trace(m)\n", "torch.fx is not allowed"),
    ("torch-profiler", "with torch.profiler.profile() as p:\n    pass\n",
     "torch.profiler is not allowed"),
    ("torch-autograd-profiler", "torch.autograd.profiler.record_function('x')\n",
     "torch.autograd.profiler is not allowed"),
    ("torch-export", "torch.export.load('x.pt2')\n", "torch.export is not allowed"),
    ("torch-cuda-tunable", "torch.cuda.tunable.read_file('x')\n",
     "torch.cuda.tunable is not allowed"),
    ("torch-ops-read-file", "b = torch.ops.image.read_file('/opt/x')\n",
     "torch.ops.image.read_file is not allowed"),
    ("inline-include-paths", "from torch.utils.cpp_extension import load_inline\n"
     "m = load_inline('m', [''], extra_include_paths=['/opt/p'])\n",
     "extra_include_paths names a folder on disk"),
    ("inline-include-flag", "from torch.utils.cpp_extension import load_inline\n"
     "m = load_inline('m', [''], extra_cflags=['-include/opt/p/.env'])\n",
     "flag '-include/opt/p/.env' is not allowed"),
    ("inline-response-file", "m = torch.utils.cpp_extension.load_inline('m', [''], "
     "extra_cuda_cflags=['@/opt/p/.env'])\n", "flag '@/opt/p/.env' is not allowed"),
    ("inline-xcompiler", "m = torch.utils.cpp_extension.load_inline('m', [''], "
     "extra_cuda_cflags=['-Xcompiler=-include,/x'])\n", "is not allowed"),
    ("inline-computed-flags", "def f(fl):\n    return torch.utils.cpp_extension.load_inline("
     "'m', [''], extra_cflags=fl)\n", "must be a list of string literals"),
    ("inline-linker", "m = torch.utils.cpp_extension.load_inline('m', [''], "
     "extra_ldflags=['-Wl,-rpath,/x'])\n", "is not allowed"),
    ("inline-kwargs", "kw = {}\nm = torch.utils.cpp_extension.load_inline('m', [''], **kw)\n",
     "hides its options"),
    ("inline-positional", "m = torch.utils.cpp_extension.load_inline('m', [''], None, ['f'], "
     "['-I/x'])\n", "passed by keyword"),
]


@pytest.mark.parametrize("source,expected", [(s, e) for _, s, e in POSITIVE],
                         ids=[i for i, _, _ in POSITIVE])
def test_rule_flags(source, expected):
    found = findings(source)
    assert any(expected.lower() in f.lower() for f in found), found


NEGATIVE = [
    ("setattr-self-literal", "class M(nn.Module):\n    def __init__(self, p):\n"
                             "        super().__init__()\n        setattr(self, 'w', p)\n"),
    ("current-stream", "s = torch.cuda.current_stream()\ntorch.cuda.synchronize()\n"),
    ("ctypes-types", "v = ctypes.c_int64(3)\np = ctypes.POINTER(ctypes.c_float)\n"
                     "n = ctypes.sizeof(ctypes.c_double)\nr = ctypes.byref(v)\n"
                     "a = (ctypes.c_float * 4)()\nq = ctypes.c_void_p(0)\n"),
    ("cdll-argtypes", "lib = load_cpp('src', name='k')\n"
                      "lib.fn.argtypes = [ctypes.c_void_p, ctypes.c_int64]\n"
                      "lib.fn.restype = None\n"),
    ("functional-alias", "import torch.nn.functional as G\ndef f(x):\n    return G.relu(x)\n"),
    ("calling-allclose", "ok = torch.allclose(a, b) and torch.equal(a, b) "
                         "and bool(torch.isclose(a, b).all())\n"),
    ("input-parameter", "class M(nn.Module):\n    def forward(self, input):\n"
                        "        return F.relu(input)\n"),
    ("shadowed-open", "def f(open):\n    return open + 1\n"),
    ("super-init", "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                   "        nn.Module.__init__(self)\n"),
    ("main-block", "if __name__ == '__main__':\n    print(torch.__version__)\n"),
    ("type-of-self", "class M(nn.Module):\n    def f(self):\n        type(self).cache = {}\n"
                     "        return type(self).__name__\n"),
    ("hasattr-literal-module", "HAS_EXTRA = hasattr(tl, 'extra')\n"),
    ("getattr-literal-object", "class M(nn.Module):\n    def f(self):\n"
                               "        return getattr(self, 'bias', None)\n"),
    ("self-attribute-assign", "class M(nn.Module):\n    def f(self, x):\n"
                              "        self.weight.data = x\n        self.n = 1\n"),
    ("load-inline", "from torch.utils.cpp_extension import load_inline\n"
                    "import torch.utils.cpp_extension\n"
                    "m = load_inline(name='m', cpp_sources=[''], functions=['f'])\n"
                    "m2 = torch.utils.cpp_extension.load_inline(name='m', cpp_sources=[''])\n"),
    ("triton-api", "@triton.autotune(configs=[triton.Config({'B': 64}, num_warps=4)], key=['n'])\n"
                   "@triton.heuristics({'EVEN': lambda a: a['n'] % a['B'] == 0})\n"
                   "@triton.jit\ndef k(x, n, B: tl.constexpr, EVEN: tl.constexpr):\n"
                   "    o = tl.program_id(0) * B + tl.arange(0, B)\n"
                   "    v = tl.load(x + o, mask=o < n, other=0.0)\n"
                   "    v = tl.extra.cuda.libdevice.exp(v) + tl.math.erf(v)\n"
                   "    tl.store(x + o, v, mask=o < n)\n"
                   "g = (triton.cdiv(10, 4), triton.next_power_of_2(10))\n"),
    ("libdevice-import", "from triton.language.extra import libdevice\n"),
    ("stdlib-helpers", "import functools, itertools, operator, enum, abc, numbers, collections\n"
                       "import dataclasses, typing, typing_extensions, cmath\n"
                       "from __future__ import annotations\n"
                       "from typing import Optional\n"
                       "@functools.lru_cache(maxsize=None)\ndef f(n: int) -> Optional[int]:\n"
                       "    return math.isqrt(n) + operator.add(1, 2)\n"),
    ("tunables", "TUNABLES = {'BLOCK': 1024, 'NUM_WARPS': 4}\n__all__ = ['ModelNew']\n"),
    ("tensor-ops", "def f(x):\n    y = torch.empty_like(x)\n"
                   "    z = torch.zeros(4, device=x.device)\n"
                   "    w = torch.ops.aten.add(x, 1)\n    p = ptr(x)\n"
                   "    with torch.no_grad():\n        return F.softmax(x, -1) + np.float32(1)\n"),
    ("kernel-launcher", "from kernelevolve.runtime import kernel_launcher\n"
                        "lib = load_cpp('src', name='k')\n"
                        "k0 = kernel_launcher(lib, 'k0', (torch.float32, torch.float32), ints=1)\n"
                        "def f(x, y):\n    k0(x, y, x.numel())\n"),
    ("kernelevolve-runtime-module", "import kernelevolve.runtime\n"
                                    "lib = kernelevolve.runtime.load_cpp('s')\n"),
    ("device-props", "sm = torch.cuda.get_device_properties(0).multi_processor_count\n"),
    ("local-alias-call", "def f(x):\n    relu = F.relu\n    return relu(x)\n"),
    ("format-plain", "a = '{} {}'.format(1, 2)\nb = '{0:.3f} {name!r:>8}'.format(1.0, name='x')\n"
                     "c = '{:{w}.{p}f}'.format(3.14159, w=8, p=2)\nd = '%s %d' % ('a', 1)\n"
                     "e = f'{a!r:>{8}}'\n"),
    ("format-template-constant", 'SRC = """\nextern "C" void k() {{ int n = {N}; }}\n"""\n'
                                 "lib = load_cpp(SRC.format(N=4))\n"),
    ("format-map-literal", "s = '{a}-{b}'.format_map({'a': 1, 'b': 2})\n"
                           "t = str.format('{}', 1)\nT = 'a{0}' + 'b{1}'\nu = T.format(1, 2)\n"),
    ("string-annotations", "from typing import Optional, List, Literal\n"
                           "def f(x: 'torch.Tensor', y: 'Optional[List[int]]' = None,\n"
                           "      m: Literal['a b', 'c(d)'] = 'a b') -> 'torch.Tensor | None':\n"
                           "    z: 'int' = 1\n    return x\n"),
    ("future-annotations", "from __future__ import annotations\n"
                           "def f(x: torch.Tensor) -> torch.Tensor:\n    return x\n"),
    ("functools-allowed", "import functools\n"
                          "from functools import partial, reduce, wraps, cached_property\n"
                          "@functools.lru_cache(maxsize=None)\ndef f(n):\n    return n\n"
                          "@functools.cache\ndef g(n):\n    return n\nh = partial(f, 1)\n"
                          "r = reduce(lambda a, b: a + b, [1, 2])\n"),
    ("typing-allowed", "import typing\nfrom typing import Any, Callable, Dict, Tuple, TypeVar\n"
                       "from typing import Protocol, cast, overload\nT = TypeVar('T')\n"
                       "x = cast(int, 1)\nif typing.TYPE_CHECKING:\n    pass\n"),
    ("dataclass-enum-collections", "import dataclasses, enum, collections\n"
                                   "from dataclasses import dataclass, field\n"
                                   "@dataclass(frozen=True)\nclass C:\n    a: int = 1\n"
                                   "    b: list = field(default_factory=list)\n"
                                   "class E(enum.Enum):\n    A = enum.auto()\n"
                                   "P = collections.namedtuple('P', 'x y')\n"
                                   "d = collections.defaultdict(list)\n"
                                   "from collections.abc import Sequence\n"),
    ("torch-utils-allowed", "from torch.utils.cpp_extension import load_inline\n"
                            "from torch.utils.dlpack import from_dlpack, to_dlpack\n"
                            "import torch.utils.cpp_extension\n"),
    ("torch-compile-plain", "@torch.compile(dynamic=True, fullgraph=False, mode='max-autotune')\n"
                            "def f(x):\n    return x\ng = torch.compile(f)\n"
                            "c = torch.compiler.disable(f)\ns = torch.jit.is_scripting()\n"),
    ("same-name-members", "a = np.array([1]); b = np.copy(a); c = np.random.rand(3)\n"
                          "d = np.trace(np.eye(2)); e = torch.select(a, 0, 1)\n"
                          "g = torch.chunk(a, 2); h = torch.random.fork_rng\n"
                          "import numpy.typing as npt\nv = tl.math.erf\n"
                          "w = torch.ops.aten.select.int\nk = torch.Tensor.numpy\n"
                          "sig = torch.signal.windows.hann(4)\nfrom collections import abc\n"),
    ("triton-allowed", "import triton.runtime\n"
                       "d = triton.runtime.driver.active.get_current_device()\n"
                       "v = triton.__version__\n"),
    ("numpy-lib-stride-tricks", "w = np.lib.stride_tricks.sliding_window_view(np.ones(4), 3)\n"),
    ("getattr-on-self", "class M(nn.Module):\n    def __getattr__(self, name):\n"
                        "        return super().__getattr__(name)\n"),
    ("helpers-as-parameters", "def f(help, license):\n    return help + license\n"),
    ("inline-flags", "from torch.utils.cpp_extension import load_inline\nO3 = '-O3'\n"
                     "m = load_inline('m', [''], cuda_sources=[''], functions=['f'],\n"
                     "    extra_cflags=[O3, '-fopenmp', '-march=native', '-DN=4'],\n"
                     "    extra_cuda_cflags=['--use_fast_math', '-arch=sm_90a', '-lineinfo',\n"
                     "                       '-Xcompiler=-fopenmp,-O3', '-Xptxas=-v'],\n"
                     "    extra_ldflags=['-lcublas'], verbose=False, with_cuda=True)\n"),
]


@pytest.mark.parametrize("source", [s for _, s in NEGATIVE], ids=[i for i, _ in NEGATIVE])
def test_allowed_code_not_flagged(source):
    assert findings(source) == []


def test_prelude_is_clean():
    assert findings("", prelude=True) == []


def test_finding_format_line_source_reason():
    found = findings("def forward(x):\n    os._exit(0)\n", prelude=False)
    assert found == ["line 2: `os._exit(0)`: os._exit ends the worker without a result; "
                     "return the output from forward"]


def test_finding_line_numbers_count_prelude():
    found = findings("y = 1\ntorch.allclose = None\n")
    assert len(found) == 1
    assert found[0].startswith(f"line {PRELUDE_LINES + 2}: `torch.allclose = None`: ")


def test_long_source_line_truncated():
    call = "eval(" + " + ".join(f"'{i}'" for i in range(60)) + ")"
    found = findings(call + "\n", prelude=False)
    assert len(found) == 1
    source = re.match(r"line 1: `(.*)`: ", found[0]).group(1)
    assert source.endswith("...") and len(source) <= 100


def test_findings_in_line_order_and_deduplicated():
    source = "import time\nimport os\neval('1'); eval('1')\nimport threading\neval('1')\n"
    found = findings(source, prelude=False)
    lines = [int(re.match(r"line (\d+):", f).group(1)) for f in found]
    assert lines == sorted(lines) == [1, 2, 3, 4, 5]
    assert len(found) == len(set(found))


def test_import_and_use_both_reported_distinctly():
    found = findings("import os\nos._exit(0)\n", prelude=False)
    assert len(found) == 2
    assert "importing os" in found[0] and "os._exit ends the worker" in found[1]


def test_if_main_block_still_checked():
    found = findings("if __name__ == '__main__':\n    exec('print(1)')\n")
    assert any("`exec` is not allowed" in f for f in found)
