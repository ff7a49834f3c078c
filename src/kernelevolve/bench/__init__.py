"""`kernelevolve bench`: optimize (or evaluate) a folder of problems as one resumable campaign.

Layers (imports point down): cli.py -> runner.py -> campaign.py, metrics.py, memory.py,
suite.py, report.py; runner.py drives `run.Run` once per problem.
"""
