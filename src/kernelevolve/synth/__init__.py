"""The built-in kernel synthesizer: reference -> traced graph -> fusion plan -> candidate.

    capture.py    trace Model.forward per case into a small IR (make_fx + decompositions)
    ops.py        the fusable op vocabulary
    plan.py       group the IR into row/elementwise kernels and torch-kept ops; explain()
    module.py     Python glue shared by the emitters (ModelNew.__init__, torch-kept steps)
    emit_cpp.py   C++/OpenMP emitter
    emit_triton.py Triton emitter
    operator.py   SynthOperator (`synth`), synthesize(), explain_problem()
"""
from kernelevolve.synth.api import explain_problem, synthesize  # noqa: F401
from kernelevolve.synth.operator import SynthOperator  # noqa: F401
