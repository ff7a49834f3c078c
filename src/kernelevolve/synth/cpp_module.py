"""The Python module around synthesized C++ kernels: tunables, the `load_cpp` call with the
kernels' ctypes signatures, `ModelNew.__init__` (the reference's own) and a `forward` that
runs torch-kept steps and kernel calls in plan order."""
from __future__ import annotations

from kernelevolve.synth.cpp_prelude import PRELUDE, tunables_read
from kernelevolve.synth import emit_cpp_pool, emit_cpp_solo, emit_loss
from kernelevolve.synth.emit_cpp import KernelWriter
from kernelevolve.synth.module import (Reference, call_setup, doc_of, forward_epilogue,
                                       forward_prologue, ident, imports_of, init_source,
                                       problem_name, table_args, torch_step, var)
from kernelevolve.synth.plan import Kernel, LoopKind, Plan
from kernelevolve.synth.plan_loss import LossKernel
from kernelevolve.synth.plan_solo import SoloKernel
from kernelevolve.synth.solo_glue import solo_setup


# (name, comment lines, default, values): declared when the kernels read them (cpp_prelude.py)
_KNOBS = (
    # 262144 by a sweep through the harness on this project's 2-core VM (benchmarks/
    # synth_threshold.py): at 32768 elements a woken team cost 50-100 us against 20-30 us of
    # work (abs 0.46x eager, exp 1.08x; on one thread 0.95x and 3.95x); eager itself splits
    # work only from 65536 elements (two of its 32768-element grains).
    ("PARALLEL_MIN_ELEMENTS", ("A kernel runs on one thread below this much work (elements x the "
                               "kernel's cost", "per element, 1 for a plain copy): waking the "
                               "OpenMP team costs tens of", "microseconds on a loaded machine. 0: "
                               "always parallel."), 262144,
     [0, 32768, 131072, 262144, 1048576, 8388608]),
    ("ROWS_PER_TASK", ("Rows per dynamic task in row kernels; 0: one static block of rows per "
                       "thread.",), 0, [0, 1, 4, 16, 64]),
    ("FAST_EXP", ("1: exp/sigmoid/tanh/erf/gelu by vectorisable polynomials (~2e-7 error); 0: "
                  "libm.",), 1, [1, 0]),
    ("WIDE_VECTORS", ("1: let g++ use 512-bit vectors where the CPU has them "
                      "(-mprefer-vector-width=512;", "it picks 256 by default on most AVX-512 "
                      "parts); 0: the compiler's choice."), 1, [1, 0]),
    ("MID_BLOCK", ("Inner positions per task in middle-dim reduction kernels (floats "
                   "accumulated", "per task while walking the reduced dim)."), 256,
     [64, 128, 256, 512, 1024]),
)


def emit_source(p: Plan, problem_path: str, plan_text: str) -> str:
    ref = Reference(problem_path)
    g = p.graph
    kernels = [KernelWriter(k) for k in p.kernels]
    code, cpp = _cpp(p, kernels)
    used = tunables_read(code)
    name = problem_name(problem_path)
    lines = [f'"""Synthesized C++/OpenMP candidate (kernelevolve synth) for {name}.',
             "", "Plan:", *("    " + line for line in plan_text.splitlines()), '"""',
             *imports_of(ref), *(["import ctypes"] if _ctypes_argtypes(p) else []), "",
             "from kernelevolve.runtime import elementwise_launcher, kernel_launcher, load_cpp",
             "",
             "# ---- Tunables: the `tune` operator rewrites these literals (only those the",
             "# kernels below read are declared)."]
    knobs = [k for k in _KNOBS if k[0] in used or k[0] == "WIDE_VECTORS"]
    for knob, comment, default, _ in knobs:
        lines += [*("# " + c for c in comment), f"{knob} = {default}"]
    lines += ["TUNABLES = {", *(f'    "{knob}": {values},' for knob, _, _, values in knobs), "}",
              "", f'SRC = r"""{cpp}"""', ""]
    macros = [knob for knob, *_ in knobs if knob != "WIDE_VECTORS"]
    defines = [f'f"#define {m} {{{m}}}\\n"' for m in macros]
    lines.append("CONFIG = (" + "\n          ".join(defines) + ")" if defines else 'CONFIG = ""')
    lines += ["# -fno-math-errno/-fno-trapping-math let g++ vectorise sqrt, floor and float->int;",
              "# unlike -ffast-math they keep IEEE inf/NaN semantics.",
              f'_lib = load_cpp(CONFIG + SRC, name="synth_{ident(problem_name(problem_path))}",',
              '                flags=("-fno-math-errno", "-fno-trapping-math")',
              '                + (("-mprefer-vector-width=512",) if WIDE_VECTORS else ()))']
    like = {w.k.name for w in kernels if _elementwise(w)}
    lines += _launchers(kernels, [k for k in p.solos if not isinstance(k, LossKernel)], like)
    lines += _ctypes_argtypes(p)
    lines += ["", *(["# Module-level constants Model.__init__ reads.", *ref.constants, ""]
                    if ref.constants else []),
              "", "class ModelNew(nn.Module):" if "nn" in " ".join(imports_of(ref))
              else "class ModelNew(torch.nn.Module):", init_source(ref, g), "",
              f"    def forward(self, {', '.join(ref.forward_args)}):"]
    body = forward_prologue(p, ref)
    for kind, item in p.steps:
        if kind == "torch":
            body.append(torch_step(g, item, ref))
        elif kind == "solo":
            body += _solo_call(item, g, ref)
        elif kind == "pool":
            body += emit_cpp_pool.call(item, g, ref)
        elif item.name in like:
            body += _like_call(item, g, ref)
        else:
            body += _call(item, g, ref)
    body += forward_epilogue(p, ref)
    lines += ["        " + b if b else "" for b in body]
    return "\n".join(lines) + "\n"


def _cpp(p: Plan, kernels: list[KernelWriter]) -> tuple[str, str]:
    """(the kernels' code, the whole C++ source: the prelude, the solo and pool kernels')."""
    code = "\n\n".join([w.write() for w in kernels]
                       + [emit_loss.cpp_write(k) if isinstance(k, LossKernel)
                          else emit_cpp_solo.write(k) for k in p.solos]
                       + [emit_cpp_pool.write(k) for k in p.pools])
    return code, (PRELUDE + (emit_cpp_solo.PRELUDE if p.solos else "")
                  + (emit_cpp_pool.PRELUDE if p.pools else "") + "\n" + code + "\n")


def _launchers(kernels: list[KernelWriter], solos: list[SoloKernel], like: set[str]) -> list[str]:
    """Each kernel's launcher (runtime/launch.py), made once at import."""
    lines = ["# Each kernel's launcher (runtime/launch.py): checks the tensors against the kernel's",
             "# signature and calls it from C, without ctypes' per-call Python work."]
    for w in kernels:
        ins, outs = [i.dtype for i in w.k.inputs], [o.dtype for o in w.k.outputs]
        if w.k.name in like:
            lines.append(_like_launcher(w.k, ins, outs))
            continue
        ints = len(w.s.shape_args) + len(w.s.size_args)
        lines.append(_launcher(w.k.name, ins + outs, ints, bool(w.gathers)))
    for k in solos:
        # in solo_setup's order: the input, the output, then the values or the indices
        dtypes = [k.in_dtype, k.out_dtype] + [k.in_dtype] * (k.values is not None) + \
            ["int64"] * k.indices
        lines.append(_launcher(k.name, dtypes, 3, False))
    return lines


def _call(k: Kernel, g, ref: Reference) -> list[str]:
    out, names = call_setup(k, g, ref)
    outs = [var(g, o.name, ref) for o in k.outputs]
    args = names + outs
    numel = f"{k.name}_shape.numel()"
    loop = k.schedule.loop
    if loop is LoopKind.MID:
        d = k.mid_dim
        args += [f"{k.name}_shape[:{d}].numel()", f"{k.name}_shape[{d}]",
                 f"{k.name}_shape[{d + 1}:].numel()"]
    elif loop is LoopKind.FLAT:
        args.append(numel)
    else:
        out.append(f"{k.name}_cols = {k.name}_shape[-1] if len({k.name}_shape) else 1")
        args += [f"{numel} // {k.name}_cols", f"{k.name}_cols"]
    args += table_args(k, names)
    out.append(f"if {numel}:")  # an out-of-range index raises IndexError from the launcher
    out.append(f"    _{k.name}({', '.join(args)})")
    return out


def _ctypes_argtypes(p: Plan) -> list[str]:
    """The loss and pool kernels are still called through ctypes (their glue passes an
    optional pointer, which the launchers do not take): their signatures."""
    losses = [k for k in p.solos if isinstance(k, LossKernel)]
    if not losses and not p.pools:
        return []
    return ["# The loss and pool kernels' signatures (called through ctypes).",
            *[line for k in losses for line in emit_loss.cpp_argtypes(k)],
            *[line for k in p.pools for line in emit_cpp_pool.argtypes(k)]]


def _solo_call(k: SoloKernel, g, ref: Reference) -> list[str]:
    if isinstance(k, LossKernel):
        return emit_loss.cpp_call(k, g, ref)
    out, x, outs = solo_setup(k, g, ref)
    tensors = ", ".join([x, *outs])
    out.append(f"_{k.name}({tensors}, {k.name}_outer, {k.name}_n, {k.name}_inner)")
    return out


def _launcher(name: str, dtypes: list[str], ints: int, index_flag: bool) -> str:
    tensors = ", ".join(f"torch.{d}" for d in dtypes) + ("," if len(dtypes) == 1 else "")
    flag = ", index_flag=True" if index_flag else ""
    return f'_{name} = kernel_launcher(_lib, "{name}", ({tensors}), ints={ints}{flag})'


def _elementwise(w: KernelWriter) -> bool:
    """A flat kernel whose every output has the domain input's shape, reading no table, no
    per-channel input and no gather: the launcher does all its glue (elementwise_launcher)."""
    k = w.k
    dom = next(i for i in k.inputs if i.name == k.domain_of)
    return (k.schedule.loop is LoopKind.FLAT and k.lookup is None and not w.gathers
            and len(w.s.shape_args) == 1 and not w.s.size_args and dom.layout == "full"
            and all(i.layout not in ("table", "gtable", "chan") for i in k.inputs)
            and all(o.layout == "full" and tuple(o.shape) == tuple(k.domain)
                    for o in k.outputs))


def _like_launcher(k: Kernel, ins: list[str], outs: list[str]) -> str:
    def tup(ds: list[str]) -> str:
        return "(" + ", ".join(f"torch.{d}" for d in ds) + ("," if len(ds) == 1 else "") + ")"

    domain = [i.name for i in k.inputs].index(k.domain_of)
    return (f'_{k.name} = elementwise_launcher(_lib, "{k.name}", {tup(ins)}, {tup(outs)}, '
            f"domain={domain})")


def _like_call(k: Kernel, g, ref: Reference) -> list[str]:
    """The whole call: inputs made contiguous, outputs allocated like the domain input, the
    launch skipped when it is empty, all by the launcher."""
    outs = [var(g, o.name, ref) for o in k.outputs]
    ins = ", ".join(var(g, i.name, ref) for i in k.inputs)
    target = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    return [f"# {doc_of(k)}", f"{target} = _{k.name}({ins})"]
