"""Platforms: one `Platform` subclass per module (base.py says what one provides).

They are found by name through the registry in `kernelevolve/plugins.py` (built-ins and the
`kernelevolve.platforms` entry-point group).
"""
from __future__ import annotations

from kernelevolve.platforms.base import Platform, Timer

__all__ = ["Platform", "Timer"]
