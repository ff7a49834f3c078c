"""Candidate languages: one `Language` subclass per module (base.py says what one provides)."""
from kernelevolve.languages.base import Language

__all__ = ["Language"]
