"""What candidate code may import: `load_cpp` to build C++ kernels, and launch accounting.

Candidates call `load_cpp(source)` to get a `ctypes.CDLL`, then call its functions with tensor
pointers (`ptr(t)` or `ctypes.c_void_p(t.data_ptr())`), or through `kernel_launcher(lib, name,
dtypes, ints=)`, which checks tensors against the kernel's signature and calls it from C (about a
microsecond less per call than ctypes), or `elementwise_launcher`, which also makes the inputs
contiguous and allocates the outputs. Triton kernels are plain `@triton.jit`.
"""
from kernelevolve.runtime.cpp import load_cpp, ptr
from kernelevolve.runtime.launch import elementwise_launcher, kernel_launcher
from kernelevolve.runtime.launches import launch_counts, reset_launch_counts

__all__ = ["load_cpp", "ptr", "kernel_launcher", "elementwise_launcher", "launch_counts", "reset_launch_counts"]
