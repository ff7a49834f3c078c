"""CUDA C++ through torch's `load_inline` (NVIDIA GPUs)."""
from __future__ import annotations

from kernelevolve.languages.inline import InlineLanguage


class CudaCppLanguage(InlineLanguage):
    name = "cuda-cpp"
    summary = "CUDA C++ through torch.utils.cpp_extension.load_inline"
    knowledge_patterns = (r"\bcuda\b", r"__global__", r"threadIdx", r"\bwarps?\b", r"__shfl",
                          r"nvcc", r"shared memory", r"\bsms?\b")
