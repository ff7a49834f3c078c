"""What candidate code may import: `load_cpp` to build C++ kernels, and launch accounting.

Candidates call `load_cpp(source)` to get a `ctypes.CDLL`, then call its functions with tensor
pointers (`ptr(t)` or `ctypes.c_void_p(t.data_ptr())`). Triton kernels are plain `@triton.jit`.
"""
from kernelevolve.runtime.cpp import load_cpp, ptr
from kernelevolve.runtime.launches import launch_counts, reset_launch_counts

__all__ = ["load_cpp", "ptr", "launch_counts", "reset_launch_counts"]
