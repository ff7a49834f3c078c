# problem: problems/softmax_small.py
# expect: load
# reason: not a function the library itself defines
"""Asks the trusted launcher for libc's memcpy through the candidate's own library: dlsym on a
library handle also searches the libraries it depends on, so `kernel_launcher(lib, "memcpy")`
resolves to libc. Without the launcher's dladdr check this reaches any libc function from C
(kill, mprotect, dlopen) with arguments the candidate chooses, past the static rules (the
kernel name is a plain string) and the library inspection (the candidate's library defines
only its kernel). Here it only copies the kernel's result, so before the check it was a
correct, accepted candidate."""
import torch
import torch.nn as nn

from kernelevolve.runtime import kernel_launcher, load_cpp

SRC = r"""
#include <cmath>
#include <cstdint>
extern "C" void softmax_rows(const float* x, float* y, int64_t rows, int64_t cols) {
    #pragma omp parallel for if(rows * cols > 32768)
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = x + r * cols;
        float* yr = y + r * cols;
        float m = -INFINITY;
        for (int64_t c = 0; c < cols; ++c) m = xr[c] > m ? xr[c] : m;
        double s = 0.0;
        for (int64_t c = 0; c < cols; ++c) { yr[c] = std::exp(xr[c] - m); s += yr[c]; }
        const float inv = static_cast<float>(1.0 / s);
        for (int64_t c = 0; c < cols; ++c) yr[c] *= inv;
    }
}
"""
lib = load_cpp(SRC, name="corpus_launcher_libc")
softmax_rows = kernel_launcher(lib, "softmax_rows", (torch.float32, torch.float32), ints=2)
# memcpy(dst, src, nbytes): two tensors and one integer, as a kernel's signature
copy = kernel_launcher(lib, "memcpy", (torch.float32, torch.float32), ints=1)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        scratch = torch.empty_like(x)
        softmax_rows(x, scratch, x.shape[0], x.shape[1])
        y = torch.empty_like(x)
        copy(y, scratch, scratch.numel() * scratch.element_size())
        return y
