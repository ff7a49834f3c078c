"""From a model and its workload to problems and back (issue 26).

`workload` loads a KernelBench-format MODEL file with its CASES and captures constructor inputs;
`measure` times the whole model (eager, patched, torch.compile) paired and interleaved; `graph`,
`codegen` and `outline` find fusable regions below modules; `profile`, `extract` and `tune` turn
hot spots into problems and serve the winners back. Import the submodules directly.
"""
