"""Measured graph search: graph, selection policies, termination, engine, final acceptance.

Knows nothing about LLMs, sandboxes or vendors: it is given operators and an evaluate function.
"""
