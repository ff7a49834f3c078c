"""Operators propose candidate sources: tune (non-LLM) now; synth and the LLM operator later."""
