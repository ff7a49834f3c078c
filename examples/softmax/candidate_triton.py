"""Triton candidate for row softmax over the last dim.

Each program normalises ROWS whole rows held in one 2-D block of ROWS x BLOCK_COLS values,
where BLOCK_COLS is the row length rounded up to a power of two (so a whole row must fit in
one block: fine up to rows of a few tens of thousands of values).
Padding columns load as -inf, so they contribute exp(-inf) = 0 to the sum.
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
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols,
                   ROWS: tl.constexpr, BLOCK_COLS: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_COLS)
    row_ok = rows < n_rows
    mask = row_ok[:, None] & (cols < n_cols)[None, :]
    offsets = rows[:, None] * n_cols + cols[None, :]
    x = tl.load(x_ptr + offsets, mask=mask, other=-float("inf"))
    # Rows past the end are all padding: give them a finite max and a unit sum so they
    # compute zeros instead of NaNs (they are not stored either way).
    row_max = tl.where(row_ok, tl.max(x, axis=1), 0.0)
    e = tl.exp(x - row_max[:, None])
    row_sum = tl.where(row_ok, tl.sum(e, axis=1), 1.0)
    tl.store(y_ptr + offsets, e / row_sum[:, None], mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n_cols = x.shape[-1]
        n_rows = x.numel() // n_cols if n_cols else 0
        if n_rows:
            block_cols = triton.next_power_of_2(n_cols)
            rows_per_program = max(1, BLOCK_ELEMENTS // block_cols)
            grid = (triton.cdiv(n_rows, rows_per_program),)
            softmax_kernel[grid](x, y, n_rows, n_cols,
                                 ROWS=rows_per_program, BLOCK_COLS=block_cols,
                                 num_warps=NUM_WARPS)
        return y
