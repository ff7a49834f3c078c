"""HIP C++ through torch's `load_inline` (AMD GPUs under ROCm)."""
from __future__ import annotations

from kernelevolve.languages.inline import InlineLanguage


class HipLanguage(InlineLanguage):
    name = "hip"
    summary = "HIP C++ through torch.utils.cpp_extension.load_inline"
    knowledge_patterns = (r"\bhip\b", r"\brocm\b", r"\blds\b", r"wavefront")
