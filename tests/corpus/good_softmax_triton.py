# problem: problems/softmax_small.py
# expect: accepted
# timing: short
"""A correct Triton row softmax (several rows per program, rows and columns masked). On the CPU
platform it runs in the Triton interpreter and is accepted without a speedup."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_ELEMENTS = 65536


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    offsets = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
    row_max = tl.where(row_ok, tl.max(x, axis=1), 0.0)  # padding rows: finite, never stored
    e = tl.exp(x - row_max[:, None])
    row_sum = tl.where(row_ok, tl.sum(e, axis=1), 1.0)
    tl.store(y_ptr + offsets, e / row_sum[:, None], mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n_rows, n_cols = x.shape
        block_cols = triton.next_power_of_2(n_cols)
        rows_per_program = max(1, BLOCK_ELEMENTS // block_cols)
        grid = (triton.cdiv(n_rows, rows_per_program),)
        softmax_kernel[grid](x, y, n_rows, n_cols, ROWS=rows_per_program, BLOCK_COLS=block_cols)
        return y
