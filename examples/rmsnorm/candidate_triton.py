"""Triton candidate for RMSNorm over the last dim: y = x / sqrt(mean(x^2) + eps) * weight.

Each program normalises ROWS whole rows held in one 2-D block of ROWS x BLOCK_COLS values,
where BLOCK_COLS is the row length rounded up to a power of two (so a whole row must fit in
one block: fine up to rows of a few tens of thousands of values).
Padding loads as 0, so it adds nothing to the sum of squares.
Runs on a GPU, or on CPU tensors under TRITON_INTERPRET=1 (the harness sets it on CPU).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

# Values per program (a power of two): each program takes BLOCK_ELEMENTS // BLOCK_COLS rows,
# at least one. 16384 fp32 values is 64 per thread at 8 warps on a GPU, and on CPU it keeps
# the interpreter's per-program overhead (about 2 ms) small: 64 programs for 1M values.
BLOCK_ELEMENTS = 16384
NUM_WARPS = 8
# The `tune` operator tries these values (powers of two, as tl.arange needs). They change
# how the work is split, never the result; on CPU (the interpreter) nothing is timed, so
# tuning them pays off on a GPU only.
TUNABLES = {"BLOCK_ELEMENTS": [4096, 8192, 16384, 32768], "NUM_WARPS": [4, 8, 16]}


@triton.jit
def rmsnorm_kernel(x_ptr, w_ptr, y_ptr, n_rows, n_cols, eps,
                   ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    col_ok = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_ok[None, :]
    offsets = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    w = tl.load(w_ptr + cols, mask=col_ok, other=0.0)
    mean_sq = tl.sum(x * x, axis=1) / n_cols
    inv_rms = 1.0 / tl.sqrt(mean_sq + eps)
    tl.store(y_ptr + offsets, x * inv_rms[:, None] * w[None, :], mask=mask)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols if n_cols else 0
        if n_rows:
            block_cols = triton.next_power_of_2(n_cols)
            rows_per_program = max(1, BLOCK_ELEMENTS // block_cols)
            grid = (triton.cdiv(n_rows, rows_per_program),)
            rmsnorm_kernel[grid](x, self.weight.detach(), y, n_rows, n_cols, float(self.eps),
                                 ROWS=rows_per_program, BLOCK_COLS=block_cols,
                                 num_warps=NUM_WARPS)
        return y
