"""Differential fuzzing of the synthesizer: random programs are written as KernelBench problems,
synthesized to C++ and Triton, and run against the reference in-process. Pointwise programs
mix float, int64, int32 and bool values (negative integers, every fusable op family); row
programs mix last-dim reductions (sum, mean, amax, amin, var, softmax, layer norm) with
per-row, per-column (parameters read from module-level constants) and full-size values; mid
programs reduce (B, F, D) over F, from an input or an embedding lookup, with a prologue and an
epilogue; midnorm programs chain softmax, log_softmax, logsumexp, var, std and normalisations
over a non-last dim (several reduction levels in one kernel, full-size outputs).

Integers must match exactly; floats within 1e-4. Each program is fixed by its seed, so a
failure names a reproducible problem (the source is in the assertion message). The C++ drafts
run with FAST_EXP=0 (libm): this checks the emitted semantics, and a program can amplify an
approximation's last bits past any tolerance (floor or bucketize of a GELU tail). The
approximations have their own accuracy test (test_synth_math.py), and the harness checks the
FAST_EXP=1 variant of every real problem like any candidate.
"""
from __future__ import annotations

import random

import pytest
import torch

from kernelevolve.operators.tunables import rewrite, space
from kernelevolve.problem import import_module
from kernelevolve.synth import synthesize

SEEDS = list(range(24))

# (result type, template); {a} {b} are operands of the listed types.
FLOAT_OPS = [
    ("f", "{a} + {b}", "ff"), ("f", "{a} * {b}", "ff"), ("f", "{a} - 0.75", "f"),
    ("f", "torch.sigmoid({a})", "f"), ("f", "torch.tanh({a})", "f"), ("f", "torch.relu({a})", "f"),
    ("f", "torch.clamp({a}, -1.5, 2.0)", "f"), ("f", "torch.where({c}, {a}, {b})", "ff"),
    ("f", "torch.abs({a})", "f"), ("f", "-{a}", "f"), ("f", "{a} / ({b}.abs() + 1.0)", "ff"),
    ("f", "torch.maximum({a}, {b})", "ff"), ("f", "torch.floor({a})", "f"),
    ("f", "torch.remainder({a}, 1.7)", "f"), ("f", "torch.nn.functional.gelu({a})", "f"),
    ("f", "torch.exp(torch.clamp({a}, max=8.0))", "f"), ("f", "{i}.float() * 0.001", ""),
    ("f", "{a} * {i}.to(torch.float32)", "f"), ("f", "{c}.float() + {a}", "f"),
]
INT_OPS = [
    ("i", "{i} * 7919", ""), ("i", "{i} + {j}", ""), ("i", "{i} - 12345", ""),
    ("i", "{i} % 97", ""), ("i", "torch.remainder({i}, -13)", ""),
    ("i", "torch.floor_divide({i}, 13)", ""), ("i", "{i} >> 3", ""), ("i", "{i} << 2", ""),
    ("i", "{i} ^ {j}", ""), ("i", "{i} & 255", ""), ("i", "{i} | 8", ""),
    ("i", "torch.abs({i})", ""), ("i", "-{i}", ""), ("i", "torch.bucketize({a}, self.edges)", "f"),
    ("i", "torch.where({c}, {i}, {j})", ""), ("i", "{i} * -6364136223846793005", ""),
]
BOOL_OPS = [
    ("b", "{a} > {b}", "ff"), ("b", "({i} & 1) == 0", ""), ("b", "{i} < -5", ""),
    ("b", "{c} & ({a} <= 0.5)", "f"), ("b", "~{c}", ""),
]


def program(seed: int) -> str:
    rng = random.Random(seed)
    pools = {"f": ["x", "y"], "i": ["h", "k"], "b": []}
    lines = []
    def pick(pool):  # mostly the newest value, so the program is a deep chain, not a fan
        return pool[-1] if rng.random() < 0.6 else rng.choice(pool)

    for step in range(rng.randint(8, 14)):
        kind = rng.choice("ffiib")
        ops = {"f": FLOAT_OPS, "i": INT_OPS, "b": BOOL_OPS}[kind]
        usable = [op for op in ops if ("{c}" not in op[1] or pools["b"])]
        _, template, _ = rng.choice(usable)
        text = template.format(a=pick(pools["f"]), b=pick(pools["f"]), i=pick(pools["i"]),
                               j=pick(pools["i"]), c=pick(pools["b"]) if pools["b"] else "")
        name = f"v{step}"
        lines.append(f"        {name} = {text}")
        pools[kind].append(name)
    outs = [pools["f"][-1] + " * 1.0", pools["i"][-1] + " + 0"]
    if pools["b"]:
        outs.append(pools["b"][-1] + " | False")
    body = "\n".join(lines)
    return f'''import torch
import torch.nn as nn

N = 1537


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("edges", torch.tensor([-1.0, -0.25, 0.0, 0.5, 2.0]))

    def forward(self, x, y, h, k):
{body}
        return {", ".join(outs)}


def get_inputs():
    g = torch.Generator().manual_seed({seed})
    x = torch.randn(N, generator=g) * 3
    y = torch.randn(N, generator=g)
    h = torch.randint(-2**40, 2**40, (N,), generator=g)
    k = torch.randint(-1000, 1000, (N,), generator=g)
    return [x, y, h, k]


def get_init_inputs():
    return []
'''


ROW_FULL = [
    "{a} + {b}", "{a} * {b}", "torch.relu({a})", "torch.tanh({a})", "{a} * 0.5 - 0.25",
    "{a} * {r}", "{a} - {r}", "{a} / ({r}.abs() + 1.0)", "{a} * self.w", "{a} + self.b",
    "torch.where({a} > {r}, {a}, {b})", "torch.exp({a} - {a}.amax(dim=-1, keepdim=True))",
    "torch.softmax({a}, dim=-1)", "torch.log_softmax({a}, dim=-1)",
    "torch.nn.functional.layer_norm({a}, (C,))", "torch.sigmoid({a}) * {a}",
    "({a} - {a}.mean(dim=-1, keepdim=True)) * torch.rsqrt({a}.var(dim=-1, keepdim=True) + 1e-5)",
    "torch.clamp({a}, min=-2.0, max=2.0)",
]
ROW_ROW = [
    "{a}.sum(dim=-1, keepdim=True)", "{a}.mean(dim=-1, keepdim=True)",
    "{a}.amax(dim=-1, keepdim=True)", "{a}.amin(dim=-1, keepdim=True)", "{r} * 2.0 + 1.0",
    "torch.sqrt({a}.pow(2).mean(dim=-1, keepdim=True) + 1e-6)",
]


def row_program(seed: int) -> str:
    rng = random.Random(seed)
    # each shape has an odd size >= 8: with all sizes even the harness would add a held-out
    # odd case, which a candidate copying the module-level C that __init__ reads cannot follow
    # (the synthesizer refuses those); 64 columns are still an exact vector multiple
    rows, cols = rng.choice([(7, 33), (17, 64), (3, 129), (31, 17)])
    full, per_row, lines = ["x", "y"], [], []

    def pick(pool):
        return pool[-1] if rng.random() < 0.6 else rng.choice(pool)

    for step in range(rng.randint(3, 8)):
        is_row = rng.random() < 0.3
        ops = [op for op in (ROW_ROW if is_row else ROW_FULL) if "{r}" not in op or per_row]
        text = rng.choice(ops).format(a=pick(full), b=pick(full),
                                      r=pick(per_row) if per_row else "")
        lines.append(f"        v{step} = {text}")
        (per_row if is_row else full).append(f"v{step}")
    outs = [full[-1]] + ([per_row[-1]] if per_row and rng.random() < 0.5 else [])
    body = "\n".join(lines)
    return f'''import torch
import torch.nn as nn

R, C = {rows}, {cols}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(C))
        self.b = nn.Parameter(torch.randn(C))

    def forward(self, x, y):
{body}
        return {", ".join(o + " * 1.0" for o in outs)}


def get_inputs():
    g = torch.Generator().manual_seed({seed})
    return [torch.randn(R, C, generator=g), torch.randn(R, C, generator=g)]


def get_init_inputs():
    return []
'''


MID_PROLOGUE = ["{a} * 1.5 - 0.25", "torch.relu({a})", "{a} * self.w", "{a} + self.b",
                "torch.tanh({a})", "{a} * {b}", "torch.abs({a})"]
MID_REDUCE = ["{a}.sum(dim=1)", "{a}.mean(dim=1)", "{a}.amax(dim=1)",
              "{a}.amin(dim=1, keepdim=True)", "torch.mean({a}, dim=1, keepdim=True)"]
MID_EPILOGUE = ["torch.sigmoid({m})", "{m} * 2.0 + 1.0", "torch.relu({m})", "{m} + self.b2"]


def mid_program(seed: int) -> str:
    """A reduction over dim 1 of (B, F, D), over an input or an embedding lookup."""
    rng = random.Random(seed)
    b, f, d = rng.choice([(4, 7, 33), (9, 32, 64), (3, 5, 129), (13, 3, 17)])  # see rows
    lookup = rng.random() < 0.4
    full = ["e" if lookup else "x"]
    lines = ["        e = self.emb(idx)"] if lookup else []
    for step in range(rng.randint(0, 3)):
        text = rng.choice(MID_PROLOGUE).format(a=full[-1], b=rng.choice(full))
        lines.append(f"        p{step} = {text}")
        full.append(f"p{step}")
    reduce = rng.choice(MID_REDUCE).format(a=full[-1])
    lines.append(f"        m = {reduce}")
    out = "m"
    for step in range(rng.randint(0, 2)):
        ops = [op for op in MID_EPILOGUE if "keepdim" not in reduce or "b2" not in op]
        lines.append(f"        q{step} = {rng.choice(ops).format(m=out)}")
        out = f"q{step}"
    body = "\n".join(lines)
    inputs = ("torch.randint(0, 100, (B, F), generator=g)" if lookup
              else "torch.randn(B, F, D, generator=g)")
    return f'''import torch
import torch.nn as nn

B, F, D = {b}, {f}, {d}


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(100, D)
        self.w = nn.Parameter(torch.randn(D))
        self.b = nn.Parameter(torch.randn(D))
        self.b2 = nn.Parameter(torch.randn(D))

    def forward(self, {"idx" if lookup else "x"}):
{body}
        return {out} * 1.0


def get_inputs():
    g = torch.Generator().manual_seed({seed})
    return [{inputs}]


def get_init_inputs():
    return []
'''


NORM_FULL = [
    "{a} + {b}", "{a} * {b}", "torch.relu({a})", "torch.tanh({a})", "{a} * 0.5 - 0.25",
    "{a} * {r}", "{a} - {r}", "{a} / ({r}.abs() + 1.0)", "torch.softmax({a}, dim=D)",
    "torch.log_softmax({a}, dim=D)", "{a} - {a}.amax(dim=D, keepdim=True)",
    "({a} - {a}.mean(dim=D, keepdim=True)) * torch.rsqrt({a}.var(dim=D, keepdim=True) + 1e-5)",
]
NORM_REDUCED = [
    "{a}.sum(dim=D, keepdim=True)", "torch.logsumexp({a}, dim=D, keepdim=True)",
    "{a}.std(dim=D, keepdim=True)", "{a}.var(dim=D, correction=0, keepdim=True)",
    "{a}.amax(dim=D, keepdim=True)", "{r} * 2.0 + 1.0", "torch.sqrt({r}.abs() + 1.0)",
]


def midnorm_program(seed: int) -> str:
    """Normalisations and variances over a non-last dim D (dim 0 or 1 of 3-D, 1 or 2 of 4-D),
    chained: each reduced value one level above what it reads, full-size values reading them."""
    rng = random.Random(seed)
    shape, dim = rng.choice([((3, 7, 33), 0), ((5, 16, 20), 1), ((2, 9, 65), 1),
                             ((2, 5, 3, 17), 1), ((3, 2, 6, 9), 2), ((9, 4, 11), 0)])
    full, reduced, lines = ["x", "y"], [], []

    def pick(pool):
        return pool[-1] if rng.random() < 0.6 else rng.choice(pool)

    for step in range(rng.randint(2, 6)):
        is_reduced = rng.random() < 0.35
        ops = [op for op in (NORM_REDUCED if is_reduced else NORM_FULL)
               if "{r}" not in op or reduced]
        text = rng.choice(ops).format(a=pick(full), b=pick(full),
                                      r=pick(reduced) if reduced else "")
        lines.append(f"        v{step} = {text}")
        (reduced if is_reduced else full).append(f"v{step}")
    outs = [full[-1]] + ([reduced[-1]] if reduced and rng.random() < 0.6 else [])
    body = "\n".join(lines)
    return f'''import torch
import torch.nn as nn

SHAPE, D = {shape}, {dim}


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
{body}
        return {", ".join(o + " * 1.0" for o in outs)}


def get_inputs():
    g = torch.Generator().manual_seed({seed})
    return [torch.randn(*SHAPE, generator=g), torch.randn(*SHAPE, generator=g)]


def get_init_inputs():
    return []
'''


# C++ on every seed; Triton (interpreter, ~1 s a program) on the first few. Row seeds 20 and
# 124 once found a row value of the first reduction pass left undefined when that pass rode
# along the previous row.
ROW_SEEDS = [20, 124, *range(8)]
# Midnorm seed 22 once declared a reduced value twice in C++ (a kept var read back from its
# block in the loop that defines it, for the epilogue on it).
MIDNORM_SEEDS = [22, *range(10)]
CASES = ([("pointwise", seed, "cpp") for seed in SEEDS]
         + [("pointwise", seed, "triton") for seed in SEEDS[:6]]
         + [("rows", seed, "cpp") for seed in ROW_SEEDS]
         + [("rows", seed, "triton") for seed in ROW_SEEDS[:4]]
         + [("mid", seed, "cpp") for seed in range(8)]
         + [("mid", seed, "triton") for seed in range(3)]
         + [("midnorm", seed, "cpp") for seed in MIDNORM_SEEDS]
         + [("midnorm", seed, "triton") for seed in range(4)])


@pytest.mark.slow
@pytest.mark.parametrize("family,seed,language", CASES)
def test_random_program_matches_the_reference(tmp_path, monkeypatch, family, seed, language):
    monkeypatch.setenv("KERNELEVOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    text = {"pointwise": program, "rows": row_program, "mid": mid_program,
            "midnorm": midnorm_program}[family](seed)
    problem = tmp_path / f"fuzz_{family}_{seed}.py"
    problem.write_text(text)
    source, _ = synthesize(str(problem), language)
    if language == "cpp" and "FAST_EXP" in space(source):  # declared only where exp is used
        source = rewrite(source, {"FAST_EXP": 0})
    candidate = tmp_path / f"fuzz_{family}_{seed}_{language}.py"
    candidate.write_text(source)
    ref_mod = import_module(problem, f"fuzz_{family}_{seed}", wrap_errors=False)
    cand_mod = import_module(candidate, f"fuzz_{family}_{seed}_{language}", wrap_errors=False)
    inputs = ref_mod.get_inputs()
    with torch.no_grad():
        torch.manual_seed(1)
        want = ref_mod.Model()(*inputs)
        torch.manual_seed(1)
        got = cand_mod.ModelNew()(*inputs)
    want, got = (want if isinstance(want, tuple) else (want,)), \
        (got if isinstance(got, tuple) else (got,))
    for w, g in zip(want, got):
        assert g.dtype == w.dtype and g.shape == w.shape, text
        if w.is_floating_point():
            assert torch.allclose(g, w, rtol=1e-4, atol=1e-5, equal_nan=True), \
                f"max err {(g - w).abs().max()}\n{text}"
        else:
            bad = (g != w).nonzero()
            assert bad.numel() == 0, f"first mismatch at {bad[0].tolist()}: expected " \
                f"{w[bad[0]].item()}, got {g[bad[0]].item()}\n{text}"
