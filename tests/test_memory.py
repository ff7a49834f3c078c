"""The history table every LLM prompt carries (search/memory.py): noise told apart from change,
intervals shown, noisy cases flagged, and every rejection with a reason a model can act on.

The results are scored by the harness's own scoring (harness/gates/scoring.py) from seeded synthetic
samples drawn like the harness's (tests/test_timing_stats.py's `paired`), so each interval is a
real bootstrap interval and each figure one fixed number.
"""
from __future__ import annotations

import asyncio
import re

import numpy as np

from conftest import example
from engine_hooks import MemoryHooks
from test_timing_stats import _result_from, paired

from kernelevolve.operators.base import Draft, ParentView
from kernelevolve.operators.prompt import PromptBuilder
from kernelevolve.search.engine import EngineConfig, SearchEngine
from kernelevolve.search.graph import ROOT, Node, SearchGraph
from kernelevolve.search.memory import (NOISY_LEGEND, fitness_baseline, fitness_interval,
                                        history_table)
from kernelevolve.search.policies import Greedy
from kernelevolve.search.termination import Budgets, Progress
from kernelevolve.types import EvalResult

WEIGHTS = {"big": 2.0, "small": 1.0}


def _burst(rng, ref_ms: float, cand_ms: float, n: int, frac: float = 0.6, factor: float = 7.0):
    """Paired samples of one case whose candidate was slowed `factor` times in `frac` of its
    repetitions (a busy neighbour on its cores): the same code, timed in a bad moment."""
    ref, cand = paired(rng, ref_ms, cand_ms, n)
    hit = np.zeros(n, bool)
    hit[rng.permutation(n)[: int(frac * n)]] = True
    return ref, np.where(hit, cand * factor, cand)


def _results(seed: int = 0) -> dict[str, dict]:
    """quiet: 1.5x, timed calmly. rerun: the same code, its small case timed ~6.5x slower in
    the same evaluation. slower: a real 1.1x, timed calmly."""
    rng = np.random.default_rng(seed)
    quiet = _result_from({"big": paired(rng, 3.0, 2.0, 30), "small": paired(rng, 0.3, 0.2, 30)},
                         WEIGHTS)
    rerun = _result_from({"big": paired(rng, 3.0, 2.0, 30), "small": _burst(rng, 0.3, 0.2, 30)},
                         WEIGHTS)
    slower = _result_from({"big": paired(rng, 3.0, 2.7, 30), "small": paired(rng, 0.3, 0.27, 30)},
                          WEIGHTS)
    return {"quiet": quiet.to_dict(), "rerun": rerun.to_dict(), "slower": slower.to_dict()}


def _graph(rows) -> tuple[SearchGraph, dict[int, EvalResult]]:
    """rows: (id, parent, rationale, result dict); accepted when the result is. The results
    come back typed, as the store hands them to the search."""
    g = SearchGraph()
    g.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    results = {}
    for order, (nid, parent, why, result) in enumerate(rows):
        fit = result.get("fitness") if result.get("accepted") else 0.0
        g.add(Node(nid, (parent,), "llm", why, f"h{nid}", "done", result["stage"], fit,
                   result.get("speedup"), meta={"reason": result.get("reason", "")},
                   order=order))
        results[nid] = EvalResult.from_dict(result)
    return g, results


def _row(text: str, nid: int) -> str:
    return next(ln for ln in text.splitlines() if ln.startswith(f"| {nid} |"))


def _failed_ideas(text: str) -> str:
    return text.split("Ideas that failed or regressed", 1)[1] if "Ideas that failed" in text \
        else ""


def test_a_noisy_case_with_unchanged_code_is_not_marked_regressed():
    r = _results()
    quiet, rerun = r["quiet"], r["rerun"]
    small_q, small_r = quiet["cases"][1], rerun["cases"][1]
    assert small_r["cand_ms"] > 5 * small_q["cand_ms"]   # the small case: 6.5x slower
    assert rerun["fitness"] < 0.6 * quiet["fitness"]     # the old rule called this REGRESSED
    graph, results = _graph([(1, ROOT, "llm draft: Change: rows in blocks", quiet),
                             (2, 1, "llm improve: Change: same kernel, re-timed", rerun)])
    text = history_table(graph, results.get)
    row = _row(text, 2)
    assert "REGRESSED (" not in text
    assert re.search(r"\| accepted, within noise of parent \(1\.\d{3}x \[1\.\d+-1\.\d+\]\)", row)
    assert "node 2" not in _failed_ideas(text)
    cells = row.rsplit("|", 2)[1].split(" / ")
    assert "noisy(x" in cells[1] and "noisy" not in cells[0]  # the small case, not the big one
    assert NOISY_LEGEND in text and "differences under about F times" in text


def test_a_node_whose_interval_lies_below_its_parents_is_regressed():
    r = _results()
    graph, results = _graph([(1, ROOT, "llm draft: Change: rows in blocks", r["quiet"]),
                             (3, 1, "llm improve: Change: scalar exp", r["slower"])])
    lo, hi = r["slower"]["speedup_ci"]
    assert hi < r["quiet"]["speedup_ci"][0]
    text = history_table(graph, results.get)
    assert re.search(r"\| REGRESSED \(parent 1\.\d{3}x \[1\.\d+-1\.\d+\]\) "
                     r"\| 1\.\d{3}x \[1\.\d+-1\.\d+\] \|", _row(text, 3))
    assert re.search(r"- node 3 \(REGRESSED\): scalar exp: 1\.\d{3}x \[[\d.-]+\], below parent "
                     r"1's 1\.\d{3}x \[[\d.-]+\] beyond noise", _failed_ideas(text))
    assert "noisy" not in text


def test_intervals_are_in_the_rows_and_the_best_line():
    r = _results()
    graph, results = _graph([(1, ROOT, "llm draft: Change: rows in blocks", r["quiet"])])
    text = history_table(graph, results.get)
    lo, hi = r["quiet"]["speedup_ci"]
    assert (f"Best: node 1 at {r['quiet']['fitness']:.3f}x over eager (95% interval "
            f"{lo:.3g}-{hi:.3g}).") in text
    assert f"| best | {r['quiet']['fitness']:.3f}x [{lo:.3g}-{hi:.3g}] |" in _row(text, 1)
    assert "REGRESSED: its interval lies wholly below its parent's" in text


def test_the_fitness_interval_is_that_of_the_fitness_baseline():
    result = EvalResult(True, "accepted", "", speedup=3.0, speedup_ci=(2.8, 3.2),
                        compile_speedup=1.4, compile_speedup_ci=(1.3, 1.5))
    over_compile = Node(1, (0,), "llm", "x", "h1", "done", "accepted", 1.4, 3.0)
    over_eager = Node(2, (0,), "llm", "x", "h2", "done", "accepted", 3.0, 3.0)
    assert fitness_interval(over_compile, result) == (1.3, 1.5)
    assert fitness_interval(over_eager, result) == (2.8, 3.2)
    old = EvalResult.from_dict({"accepted": True, "stage": "accepted", "speedup": 3.0})
    assert fitness_interval(over_eager, old) is None  # an old store
    assert fitness_baseline(over_compile, result) == "torch.compile"
    assert fitness_baseline(over_eager, result) == "eager"
    slow = Node(3, (0,), "llm", "slow", "h3", "done", "accepted", 0.8, 1.6)
    graph = SearchGraph()
    for node in (Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0),
                 over_compile, slow):
        graph.add(node)
    both = {1: result, 3: EvalResult(True, "accepted", "", speedup=1.6, speedup_ci=(1.5, 1.7),
                                     compile_speedup=0.8, compile_speedup_ci=(0.7, 0.9))}
    text = history_table(graph, both.get)
    assert "Best: node 1 at 1.400x over torch.compile (95% interval 1.3-1.5)." in text
    assert "| accepted, slower than torch.compile | 0.800x [0.7-0.9] |" in _row(text, 3)


def test_without_intervals_a_relative_margin_decides():
    """Stores written before intervals: more than 10% below the parent is a regression."""
    def plain(fit):
        return {"accepted": True, "stage": "accepted", "fitness": fit, "speedup": fit,
                "reason": "ok", "cases": []}
    graph, results = _graph([(1, ROOT, "a", plain(1.5)), (2, 1, "b", plain(1.42)),
                             (3, 1, "c", plain(1.2))])
    text = history_table(graph, results.get)
    assert "within noise of parent (1.500x)" in _row(text, 2)
    assert "REGRESSED (parent 1.500x)" in _row(text, 3)


def test_a_rejection_without_rationale_or_reason_still_teaches():
    r = _results()
    blank = {"accepted": False, "stage": "timing", "reason": "", "cases": []}
    graph, results = _graph([(1, ROOT, "llm draft: Change: rows in blocks", r["quiet"]),
                             (4, 1, "", blank), (5, 1, "llm improve:", dict(blank)),
                             (6, ROOT, "", {"accepted": False, "stage": "load", "cases": []})])
    text = history_table(graph, results.get)
    ideas = _failed_ideas(text)
    for nid in (4, 5):
        assert (f"- node {nid} (rejected: timing): llm change to node 1, no description given: "
                "no reason recorded (rejected at the timing stage)") in ideas
        assert "| llm change to node 1, no description given | rejected: timing | - | no reason " \
               "recorded (rejected at the timing stage) |" in _row(text, nid)
    assert ("- node 6 (rejected: load): llm draft from the reference, no description given: "
            "no reason recorded (rejected at the load stage)") in ideas
    for line in ideas.splitlines()[1:]:
        assert not re.search(r":\s*:|:\s*$", line), line  # no blank description or reason


def test_eager_moving_across_evaluations_is_named_and_marked():
    """eager swung 416 -> 284 -> 181 ms over three evaluations of one case: the table says the
    load moved, and marks the evaluation whose eager sat far off the run's median."""
    def timed(ref_ms, cand_ms):
        return {"accepted": True, "stage": "accepted", "fitness": ref_ms / cand_ms,
                "speedup": ref_ms / cand_ms, "reason": "ok",
                "cases": [{"name": "big", "weight": 1.0, "ref_ms": ref_ms, "cand_ms": cand_ms}]}
    graph, results = _graph([(1, ROOT, "a", timed(416.0, 200.0)),
                             (2, ROOT, "b", timed(284.0, 140.0)),
                             (3, ROOT, "c", timed(181.0, 90.0))])
    text = history_table(graph, results.get)
    assert "Eager itself varied across evaluations (`big` 181-416 ms)" in text
    assert "compare speedups" in text
    assert "90 noisy(x1.6)" in _row(text, 3) and "noisy" not in _row(text, 2)


def test_the_parent_section_shows_each_case_interval_and_flags_the_noisy_one():
    """The parent's evaluation in an improvement prompt: each case's speedup with its 95%
    interval; the case timed in a bad moment says under which factor differences are noise."""
    rerun = _results()["rerun"]
    for case, name in zip(rerun["cases"], ("512x2048", "128x8192")):
        case["name"] = name
    builder = PromptBuilder(str(example("softmax")), "cpu", "cpp")
    text = builder._parent(ParentView(2, "X = 1", rerun["fitness"], "accepted", "ok",
                                      result=rerun))
    assert "| speedup [95% interval] |" in text
    big = next(ln for ln in text.splitlines() if ln.startswith("| 512x2048 |"))
    small = next(ln for ln in text.splitlines() if ln.startswith("| 128x8192 |"))
    assert re.search(r"\| 1\.\d+ \[1\.\d+-1\.\d+\] \|", big) and "noisy" not in big
    assert re.search(r"\| 0\.\d+ \[[\d.]+-[\d.]+\]; noisy: differences under x\d(\.\d)? "
                     r"are noise \|", small), small


# ---- through the real search engine ----------------------------------------------------------
class ScriptedOperator:
    """Proposes a fixed list of drafts, one per call, and keeps the memory each call was given."""

    name = "scripted"
    repairs = False
    exhaustible = True

    def __init__(self, drafts):
        self.drafts, self.memories = list(drafts), []

    async def propose(self, ctx):
        self.memories.append(ctx.memory)
        return [self.drafts.pop(0)] if self.drafts else []


def test_the_engine_hands_the_operator_a_table_that_tells_noise_from_change():
    r = _results()
    scored = {"A": r["quiet"], "A'": r["rerun"], "B": r["slower"],
              "C": {"accepted": False, "stage": "timing", "reason": "", "fitness": 0.0,
                    "cases": []}}
    op = ScriptedOperator([Draft("A", (ROOT,), "scripted", "Change: rows in blocks"),
                           Draft("A'", (1,), "scripted", "Change: same kernel, re-timed"),
                           Draft("B", (1,), "scripted", "Change: scalar exp"),
                           Draft("C", (1,), "scripted", "")])
    graph = SearchGraph()
    graph.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    hooks = MemoryHooks(graph)

    async def evaluate(node, source):
        return EvalResult.from_dict(scored[source])

    engine = SearchEngine(graph=graph, operators=[op], policy=Greedy(), evaluate=evaluate,
                          hooks=hooks, budgets=Budgets(max_evals=4, plateau_evals=None),
                          progress=Progress(), problem_path="p.py", problem_source="",
                          platform="cpu", config=EngineConfig(max_in_flight=1, seed=0),
                          memory=lambda g: history_table(g, hooks.result))
    asyncio.run(engine.run())
    assert len(hooks.results) == 4
    last = op.memories[-1]   # given before the fourth draft: nodes 1-3 evaluated
    assert "within noise of parent (1." in _row(last, 2) and "noisy(x" in _row(last, 2)
    assert "REGRESSED (parent 1." in _row(last, 3)
    assert "node 2" not in _failed_ideas(last) and "- node 3 (REGRESSED)" in last
    final = history_table(graph, hooks.result)
    assert ("- node 4 (rejected: timing): scripted change to node 1, no description given: "
            "no reason recorded (rejected at the timing stage)") in final
