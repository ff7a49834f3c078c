"""Stage names, declared once for the harness (a rejection's stage is `types.STAGES`, the leaf
declaration every layer can import; these are the harness's views of it)."""
from __future__ import annotations

from kernelevolve.types import STAGES

VERDICT_STAGES = STAGES                  # static ... timing, then accepted
REJECT_STAGES = STAGES[:-1]              # where a candidate can be rejected
JOB_REPORTED = REJECT_STAGES[1:]         # what a job may report it failed at, besides "problem"
CANDIDATE_STAGES = ("load", "run", "timing")  # a job's stages with candidate code running
JOB_STAGES = ("start", "problem", "load", "run", "compile", "timing")  # a job child's progress
