"""`kernelevolve bench`: optimize (or evaluate) a folder of problems as one resumable campaign.

Layers (imports point down): cli.py -> runner.py (search: one `run.Run` per problem) and
draft.py (one evaluation of the synthesizer's draft per problem) -> campaign.py, metrics.py,
memory.py, suite.py, report.py, matrix.py (a suite's operator x platform matrix). The shipped
ATen suite: aten_table.py (the data) -> aten_edges.py (domains, edge values) -> aten_suite.py
(probes, problem files); aten_check.py checks the generated references themselves.
"""
