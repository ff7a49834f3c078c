"""Triton candidate for the pointwise chain y = gelu(x * scale + bias) * sigmoid(x).

The tensor is treated as one flat array: each program handles BLOCK consecutive elements,
and the feature index of an element (for the bias) is its flat index modulo the row length.
Runs on a GPU, or on CPU tensors under TRITON_INTERPRET=1 (the harness sets it on CPU).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

# Elements per program. 16384 fp32 values is 64 per thread at 8 warps on a GPU, and on CPU
# it keeps the interpreter's per-program overhead (about 2 ms) small: 64 programs for 1M values.
BLOCK = 16384
NUM_WARPS = 8
# The `tune` operator tries these values (powers of two, as tl.arange needs). They change
# how the work is split, never the result; on CPU (the interpreter) nothing is timed, so
# tuning them pays off on a GPU only.
TUNABLES = {"BLOCK": [4096, 8192, 16384, 32768], "NUM_WARPS": [4, 8, 16]}


@triton.jit
def pointwise_chain_kernel(x_ptr, bias_ptr, y_ptr, n_elements, n_features, scale,
                           BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements  # the last program may run past the end
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    bias = tl.load(bias_ptr + offsets % n_features, mask=mask, other=0.0)
    h = x * scale + bias
    gelu = 0.5 * h * (1.0 + tl.math.erf(h * 0.7071067811865476))  # exact (erf) GELU
    tl.store(y_ptr + offsets, gelu * tl.sigmoid(x), mask=mask)


class ModelNew(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.scale = scale
        self.bias = nn.Parameter(0.5 * torch.randn(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        if n:
            grid = (triton.cdiv(n, BLOCK),)
            pointwise_chain_kernel[grid](x, self.bias.detach(), y, n, x.shape[-1],
                                         float(self.scale), BLOCK=BLOCK, num_warps=NUM_WARPS)
        return y
