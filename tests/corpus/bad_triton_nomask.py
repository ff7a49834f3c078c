# problem: problems/softmax_small.py
# expect: run
# reason: out-of-bounds
"""Triton softmax over blocks of rows whose loads and stores mask the columns but not the rows:
right whenever the row count is a multiple of the rows per program (512x2048, 128x8192), out of
bounds on the last block of the 131-row tail case."""
import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK_ELEMENTS = 65536


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_cols, ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    mask = (cols < n_cols)[None, :]  # BUG: no `rows < n_rows` term
    offsets = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
    e = tl.exp(x - tl.max(x, axis=1)[:, None])
    tl.store(y_ptr + offsets, e / tl.sum(e, axis=1)[:, None], mask=mask)


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
        softmax_kernel[grid](x, y, n_cols, ROWS=rows_per_program, BLOCK_COLS=block_cols)
        return y
