"""The built-in kernel synthesizer: reference -> traced graph -> fusion plan -> candidate.

    capture.py      trace Model.forward per case into a small IR (make_fx + decompositions)
    decomp.py       our decompositions: multi-dim and full reductions, vector norms, max/min
                    over a dim, var_mean, batch / group / instance norm in inference
    trace.py        the case's model and inputs as fake tensors, traced without a real forward
    shapes.py       call-time shapes for torch-kept views whose sizes differ between cases
    ops.py          the fusable op vocabulary (float, integer, bucketize, embedding lookups)
    kernel.py       the typed plan: Layout, NodeKind, LoopKind; kernels, nodes, inputs,
                    outputs, Reduction records; broadcast layouts of shapes
    plan.py         group the IR into kernels and torch-kept ops; explain()
    plan_row.py     row kernels (reductions over the last dim, in passes) and flat ones
    plan_mid.py     kernels that reduce over a middle (or the first) dim, in levels: softmax,
                    log_softmax, logsumexp, var over a non-last dim
    checks.py       the operand, dtype and output checks both planners share
    schedule.py     each kernel's loop decisions (passes, loads, cached values, Triton
                    programs, kernel arguments), made once for both emitters
    module.py       Python glue shared by the emitters (ModelNew.__init__, torch-kept steps)
    writer.py       operand typing (torch's promotion) and the kernel writers' shared base
    cpp_expr.py     C++ spelling of one node (tables keyed by (kind, op)); cpp_prelude.py:
                    the kernels' shared helpers, with the branch-free vectorisable float math
                    of cpp_math.py (exp/log family), cpp_special.py (sigmoid, tanh, hyperbolic,
                    erf, erfc) and cpp_trig.py (coefficients fitted by scripts/fit_synth_math.py)
    emit_cpp.py     C++/OpenMP kernel bodies (emit_cpp_rows.py: a row kernel's passes;
                    emit_cpp_mid.py: a mid kernel's walks down the reduced dim);
                    cpp_module.py: the candidate module around them
    triton_expr.py  Triton spelling of one node (the same tables); triton_math.py: its
                    jit helpers
    emit_triton.py  Triton kernels and their candidate module (triton_mid.py: mid kernels)
    api.py          synthesize(), explain_problem() (the `synth` operator is operators/synth.py)
"""
from kernelevolve.synth.api import explain_problem, synthesize  # noqa: F401
