"""How many evaluations does each selection policy need to find a known optimum?

A synthetic tuning landscape stands in for the harness (no sandbox, no compiler): a candidate
is a TUNABLES source over four knobs (8 x 6 x 6 x 8 = 2304 configurations), and its "speedup"
is a known function of the knobs' positions in their value lists:

- one global optimum (3.0x) in a broad basin, three narrower local optima (2.0-2.3x) whose
  basins do not contain it, and a slow floor (~0.3x) elsewhere;
- deterministic noise of +-1.5% per configuration (a hash of the configuration), well below the
  gap between the optimum and its best neighbour, so the optimum is unique;
- a corner of the space (BLOCK = 2048 with UNROLL >= 16) is "rejected" (fitness 0), as real
  kernels that run out of registers are.

Every method runs the real `SearchEngine` with the real `TuneOperator`, an in-memory store
(hooks) and a fake evaluator, one evaluation in flight, from the same slow starting point for
a given seed (a configuration below the landscape's median). Random search is the tune operator
with `restart_prob=1.0` (every proposal a uniformly random unseen configuration) under the
random policy. The measure is the number of evaluations, the seed's included, until the optimum
is first evaluated; a run that has not found it after `--cap` evaluations counts as "not
reached" (and as +inf in the median and quartiles).

    python benchmarks/search_efficiency.py [--seeds 30] [--cap 300] [--json out.json]
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import itertools
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kernelevolve.operators.base import Draft
from kernelevolve.operators.tunables import read_config
from kernelevolve.operators.tune import TuneOperator, tune_meta
from kernelevolve.search.engine import EngineConfig, SearchEngine, source_hash
from kernelevolve.search.graph import ROOT, Node, SearchGraph
from kernelevolve.types import EvalResult
from kernelevolve.search.policies import make_policy
from kernelevolve.search.termination import Budgets, Progress

# ---- the landscape ----------------------------------------------------------------------------

KNOBS: dict[str, list[Any]] = {
    "BLOCK": [16, 32, 64, 128, 256, 512, 1024, 2048],
    "UNROLL": [1, 2, 4, 8, 16, 32],
    "WARPS": [1, 2, 4, 8, 16, 32],
    "STAGES": [1, 2, 3, 4, 5, 6, 7, 8],
}
NAMES = list(KNOBS)
# (position as value indices, peak speedup, basin width in normalised coordinates)
GLOBAL_PEAK = ((5, 3, 2, 4), 3.0, 0.30)
LOCAL_PEAKS = [((1, 1, 5, 1), 2.3, 0.20), ((7, 0, 4, 7), 2.1, 0.18), ((2, 5, 0, 6), 2.0, 0.18)]
FLOOR = 0.3
NOISE = 0.015

Config = tuple[int, ...]


def _normalised(cfg: Config) -> list[float]:
    return [i / (len(KNOBS[n]) - 1) for i, n in zip(cfg, NAMES)]


def _noise(cfg: Config) -> float:
    digest = hashlib.sha256(repr(cfg).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 * 2 - 1  # [-1, 1), fixed per config


def rejected(cfg: Config) -> bool:
    return KNOBS["BLOCK"][cfg[0]] == 2048 and KNOBS["UNROLL"][cfg[1]] >= 16


def speedup(cfg: Config) -> float:
    if rejected(cfg):
        return 0.0
    x = _normalised(cfg)
    height = 0.0
    for pos, peak, width in [GLOBAL_PEAK, *LOCAL_PEAKS]:
        d2 = sum((a - b) ** 2 for a, b in zip(x, _normalised(pos)))
        height = max(height, (peak - FLOOR) * math.exp(-d2 / (2 * width ** 2)))
    return (FLOOR + height) * (1 + NOISE * _noise(cfg))


ALL = list(itertools.product(*(range(len(v)) for v in KNOBS.values())))
VALUES = {cfg: speedup(cfg) for cfg in ALL}
OPTIMUM = max(ALL, key=VALUES.__getitem__)
BEST = VALUES[OPTIMUM]


def source_of(cfg: Config) -> str:
    lines = [f"{n} = {KNOBS[n][i]!r}" for n, i in zip(NAMES, cfg)]
    space = ", ".join(f"{n!r}: {KNOBS[n]!r}" for n in NAMES)
    # The knobs are read (as a kernel's would be), or tune holds them at their values.
    return "\n".join(["# synthetic candidate", *lines, f"TUNABLES = {{{space}}}",
                      f"KERNEL_CONFIG = ({', '.join(NAMES)},)", ""])


def config_of(source: str) -> Config:
    cfg = read_config(source)
    return tuple(KNOBS[n].index(cfg[n]) for n in NAMES)


def check_landscape() -> dict[str, Any]:
    """The landscape is what the docstring says: a unique optimum at the global peak, and each
    local peak a strict local optimum for one-knob moves."""
    assert OPTIMUM == GLOBAL_PEAK[0], OPTIMUM
    ranked = sorted(VALUES.values(), reverse=True)
    assert ranked[0] > ranked[1] * 1.02, "the optimum must clear its runner-up beyond the noise"
    for pos, _, _ in LOCAL_PEAKS:
        for i, n in enumerate(NAMES):
            for j in range(len(KNOBS[n])):
                other = pos[:i] + (j,) + pos[i + 1:]
                assert other == pos or VALUES[other] < VALUES[pos], (pos, other)
    return {"configurations": len(ALL), "optimum": dict(zip(NAMES, (KNOBS[n][i] for n, i in
                                                                  zip(NAMES, OPTIMUM)))),
            "optimum_speedup": round(BEST, 4), "runner_up": round(ranked[1], 4),
            "rejected": sum(map(rejected, ALL)),
            "median_speedup": round(statistics.median(VALUES.values()), 4)}


# ---- an in-memory search ----------------------------------------------------------------------

class MemoryHooks:
    """The engine's persistence hooks, kept in dicts (tests/test_search.py's FakeHooks shape)."""

    def __init__(self, graph: SearchGraph, sources: dict[int, str]):
        self.graph, self.sources = graph, sources
        self.order: list[int] = []  # node ids in evaluation order
        self.results: dict[int, EvalResult] = {}

    def add_node(self, draft: Draft) -> Node:
        node_id = max(self.graph.nodes) + 1
        self.sources[node_id] = draft.source
        return Node(node_id, draft.parents, draft.operator, draft.rationale,
                    source_hash(draft.source), meta=dict(draft.meta))

    def record(self, node: Node, result: EvalResult, wall_s: float) -> None:
        assert node.id not in self.order, "a node was evaluated twice"
        self.order.append(node.id)
        self.results[node.id] = result

    def infra_failure(self, node: Node, reason: str) -> None:  # never happens here
        raise AssertionError(reason)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        pass

    def source(self, node_id: int) -> str:
        return self.sources[node_id]

    def result(self, node_id: int) -> EvalResult | None:
        return self.results.get(node_id)


async def _evaluate(node: Node, source: str) -> EvalResult:
    cfg = config_of(source)
    if rejected(cfg):
        return EvalResult(accepted=False, stage="run", reason="out of registers", fitness=0.0)
    f = VALUES[cfg]
    return EvalResult(accepted=True, stage="accepted", reason="", speedup=f, fitness=f)


METHODS = {  # name -> (policy, tune restart probability)
    "ucb": ("ucb", 0.1),
    "beam": ("beam", 0.1),
    "greedy": ("greedy", 0.1),
    "random search": ("random", 1.0),
}


def start_config(seed: int) -> Config:
    """A slow starting point (below the median), the same for every method with this seed."""
    median = statistics.median(VALUES.values())
    slow = [c for c in ALL if 0 < VALUES[c] < median]
    return random.Random(f"start:{seed}").choice(slow)


def search(method: str, seed: int, cap: int) -> int | None:
    """Evaluations until the optimum was first evaluated (the seed counts), or None."""
    policy, restart = METHODS[method]
    graph = SearchGraph()
    graph.add(Node(ROOT, (), "reference", "the reference", "root", status="root", fitness=1.0))
    src = source_of(start_config(seed))
    graph.add(Node(1, (ROOT,), "seed", "slow start", source_hash(src), meta=tune_meta(src)))
    hooks = MemoryHooks(graph, {ROOT: "", 1: src})
    engine = SearchEngine(
        graph=graph, operators=[TuneOperator(restart_prob=restart)], policy=make_policy(policy),
        evaluate=_evaluate, hooks=hooks, progress=Progress(),
        # stop as soon as the optimum is measured: only it reaches BEST
        budgets=Budgets(max_evals=cap, plateau_evals=None, target_speedup=BEST),
        problem_path="synthetic.py", problem_source="", platform="cpu",
        config=EngineConfig(max_in_flight=1, seed=seed))
    asyncio.run(engine.run())
    for i, node_id in enumerate(hooks.order, start=1):
        if config_of(hooks.sources[node_id]) == OPTIMUM:
            return i
    return None


# ---- statistics and output --------------------------------------------------------------------

def quantile(sorted_values: list[float], q: float) -> float:
    """Linear-interpolated quantile; +inf entries (not reached) sort last and propagate."""
    pos = (len(sorted_values) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    a, b = sorted_values[lo], sorted_values[hi]
    if math.isinf(a) or math.isinf(b):
        return b if pos == hi or math.isinf(a) else math.inf
    return a + (b - a) * (pos - lo)


def summarise(needed: list[int | None], cap: int) -> dict[str, Any]:
    values = sorted(math.inf if n is None else float(n) for n in needed)
    return {"runs": len(values), "reached": sum(n is not None for n in needed),
            "not_reached_fraction": sum(n is None for n in needed) / len(values),
            "median": quantile(values, 0.5), "q1": quantile(values, 0.25),
            "q3": quantile(values, 0.75), "cap": cap}


def fmt(x: float, cap: int) -> str:
    return f"> {cap}" if math.isinf(x) else f"{x:g}"


def _finite(x: Any) -> Any:
    """JSON has no infinity: a quantile of runs that did not reach the optimum becomes null."""
    if isinstance(x, float) and math.isinf(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_finite(v) for v in x]
    return x


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=30, help="search seeds per method (default 30)")
    ap.add_argument("--cap", type=int, default=300, help="evaluation budget per search")
    ap.add_argument("--json", type=Path, default=None, help="write the raw results here")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.cap < 2:
        ap.error("--seeds must be >= 1 and --cap >= 2")

    console = Console(width=None if sys.stdout.isatty() else 100)
    landscape = check_landscape()
    t0 = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    for method in METHODS:
        needed = [search(method, seed, args.cap) for seed in range(args.seeds)]
        results[method] = {"evaluations_to_optimum": needed, **summarise(needed, args.cap)}
    elapsed = time.perf_counter() - t0

    opt = ", ".join(f"{k}={v}" for k, v in landscape["optimum"].items())
    console.print(f"landscape: {landscape['configurations']} configurations, optimum {opt} at "
                  f"{landscape['optimum_speedup']:.3f}x (runner-up {landscape['runner_up']:.3f}x, "
                  f"median {landscape['median_speedup']:.3f}x, {landscape['rejected']} rejected)")
    table = Table(title=f"evaluations to first measure the optimum ({args.seeds} seeds, cap "
                        f"{args.cap})", title_justify="left")
    for col in ("method", "median", "IQR (q1-q3)", "reached", "not reached"):
        table.add_column(col, justify="left" if col == "method" else "right")
    for method, r in results.items():
        table.add_row(method, fmt(r["median"], args.cap),
                      f"{fmt(r['q1'], args.cap)} - {fmt(r['q3'], args.cap)}",
                      f"{r['reached']}/{r['runs']}", f"{r['not_reached_fraction']:.0%}")
    console.print(table)

    rnd = results["random search"]
    policies = [m for m in METHODS if m != "random search"]
    medians = ", ".join(f"{fmt(results[m]['median'], args.cap)} ({m})" for m in policies)
    verdict = (f"the policies need a median of {medians} evaluations to reach the optimum; "
               f"random search needs {fmt(rnd['median'], args.cap)} "
               f"({rnd['not_reached_fraction']:.0%} of its runs not reached within {args.cap})")
    finite = [results[m]["median"] for m in policies if not math.isinf(results[m]["median"])]
    if finite and not math.isinf(rnd["median"]):
        verdict += f": {rnd['median'] / min(finite):.1f}x more than the best policy"
    console.print(f"conclusion: {verdict}. [{elapsed:.1f} s]")
    if args.json:
        payload = {"landscape": landscape, "seeds": args.seeds, "cap": args.cap,
                   "elapsed_s": round(elapsed, 2), "results": results, "conclusion": verdict}
        args.json.write_text(json.dumps(_finite(payload), indent=2, allow_nan=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
