"""The kernel registry: promoted kernels, their states, and drop-in serving with fallback.

Layers (imports point down): cli.py -> revalidate.py, promote.py (-> validated.py) ->
patching.py -> dispatch.py -> bound.py -> loader.py, binding.py, compat.py, region.py,
custom_op.py -> db.py (-> schema.py, store/).
"""
from __future__ import annotations

from kernelevolve.registry.db import KernelRecord, Registry, RegistryError

__all__ = ["KernelRecord", "Registry", "RegistryError"]
