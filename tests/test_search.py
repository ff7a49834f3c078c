"""Search engine, policies, termination and acceptance with fakes: deterministic and fast.

The fake operator walks a 1-D configuration space (`X = <int>` sources); the fake evaluator
scores a source by a known function of X, so every expectation can be computed by hand.
"""
from __future__ import annotations

import asyncio
import random
import re

import pytest

from kernelevolve.errors import InfraError
from kernelevolve.operators.base import Draft, check_operator
from kernelevolve.operators.llm import LLMOperator
from kernelevolve.operators.tune import TuneOperator
from kernelevolve.search.acceptance import decide
from kernelevolve.search.engine import EngineConfig, SearchEngine, source_hash
from kernelevolve.search.graph import ROOT, Node, SearchGraph
from kernelevolve.search.policies import BestFirstUCB, DiverseBeam, Greedy, make_policy
from kernelevolve.search.termination import Budgets, Progress, should_stop
from kernelevolve.types import EvalResult
from kernelevolve.operators.synth import SynthOperator


def x_of(source: str) -> int:
    return int(re.search(r"X = (-?\d+)", source).group(1))


class FakeHooks:
    def __init__(self, graph: SearchGraph):
        self.graph = graph
        self.sources = {ROOT: "reference"}
        self.records: list[int] = []
        self.events: list[tuple[str, dict]] = []
        self.infra: list[int] = []

    def add_node(self, draft: Draft) -> Node:
        node_id = max(self.graph.nodes) + 1
        self.sources[node_id] = draft.source
        return Node(node_id, draft.parents, draft.operator, draft.rationale,
                    source_hash(draft.source), meta=dict(draft.meta))

    def record(self, node, result, wall_s):
        assert node.id not in self.records, "a node was evaluated twice"
        self.records.append(node.id)

    def infra_failure(self, node, reason):
        self.infra.append(node.id)

    def event(self, kind, data):
        self.events.append((kind, data))

    def source(self, node_id):
        return self.sources[node_id]

    def result(self, node_id):
        return None


class StepOperator:
    """Proposes X-1 and X+1 around each parent (or X=start from the root), within [lo, hi]."""

    name = "step"
    repairs = False
    exhaustible = True

    def __init__(self, lo=0, hi=20, start=3, repeat=False, steps=(1,)):
        self.lo, self.hi, self.start, self.repeat, self.steps = lo, hi, start, repeat, steps

    async def propose(self, ctx):
        if not ctx.parents:
            return [Draft(f"X = {self.start}", (ROOT,), "step", "start")]
        drafts = []
        for p in ctx.parents:
            x = x_of(p.source)
            for nx in [x + sign * d for d in self.steps for sign in (-1, 1)]:
                src = f"X = {nx}"
                if self.lo <= nx <= self.hi and (self.repeat or source_hash(src) not in ctx.seen_hashes):
                    drafts.append(Draft(src, (p.node_id,), "step", f"{x} -> {nx}"))
        return drafts[: max(ctx.want, 1)] if not self.repeat else drafts


def fitness(x: int) -> float:
    return 2.0 - abs(x - 12) * 0.1  # optimum at X = 12


def verdict(data: dict) -> EvalResult:
    """A scripted evaluation's result, accepted when its stage says so."""
    return EvalResult.from_dict({"accepted": data["stage"] == "accepted", **data})


def make_engine(budgets, *, operator=None, policy=None, in_flight=1, evaluate=None, graph=None,
                progress=None, seed=0):
    graph = graph or SearchGraph()
    if ROOT not in graph.nodes:
        graph.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    hooks = FakeHooks(graph)
    stats = {"now": 0, "max": 0, "calls": []}

    async def default_eval(node, source):
        stats["now"] += 1
        stats["max"] = max(stats["max"], stats["now"])
        stats["calls"].append(node.id)
        await asyncio.sleep(0.001)
        stats["now"] -= 1
        f = fitness(x_of(source))
        return verdict({"stage": "accepted", "fitness": f, "speedup": f, "reason": "ok"})

    engine = SearchEngine(graph=graph, operators=[operator or StepOperator()],
                          policy=policy or Greedy(), evaluate=evaluate or default_eval,
                          hooks=hooks, budgets=budgets, progress=progress or Progress(),
                          problem_path="p.py", problem_source="", platform="cpu",
                          config=EngineConfig(max_in_flight=in_flight, seed=seed))
    return engine, hooks, stats


def run(engine):
    return asyncio.run(engine.run())


def test_evaluation_budget_is_exact():
    engine, hooks, _ = make_engine(Budgets(max_evals=5, plateau_evals=None))
    reason = run(engine)
    assert "evaluation budget" in reason and len(hooks.records) == 5


def test_greedy_climbs_to_the_known_optimum_and_exhausts():
    engine, hooks, _ = make_engine(Budgets(max_evals=100, plateau_evals=None))
    reason = run(engine)
    best = engine.graph.best()
    assert x_of(hooks.sources[best.id]) == 12
    assert "exhausted" in reason
    assert len(hooks.records) == 21  # every X in [0, 20] exactly once


def test_identical_sources_are_evaluated_once():
    engine, hooks, _ = make_engine(Budgets(max_evals=30, plateau_evals=None),
                                   operator=StepOperator(repeat=True))
    run(engine)
    xs = [x_of(hooks.sources[n]) for n in hooks.records]
    assert len(xs) == len(set(xs))
    assert any(kind == "duplicate" for kind, _ in hooks.events)


def test_target_and_plateau_stop_the_search():
    engine, _, _ = make_engine(Budgets(max_evals=100, plateau_evals=None, target_speedup=1.75))
    assert "target speedup" in run(engine)
    assert engine.graph.best().fitness >= 1.75

    flat = lambda node, source: _const(1.5)  # noqa: E731
    engine, hooks, _ = make_engine(Budgets(max_evals=100, plateau_evals=4), evaluate=flat)
    assert "plateau" in run(engine)
    assert len(hooks.records) == 5


async def _const(f):
    return verdict({"stage": "accepted", "fitness": f, "speedup": f})


def test_time_budget():
    async def slow(node, source):
        await asyncio.sleep(0.05)
        return verdict({"stage": "accepted", "fitness": 1.0 + node.id * 0.01, "speedup": 1.0})

    engine, hooks, _ = make_engine(Budgets(max_evals=None, max_time_s=0.3, plateau_evals=None),
                                   evaluate=slow)
    assert "time budget" in run(engine)
    assert 2 <= len(hooks.records) <= 8


def test_in_flight_bound_is_respected_and_used():
    engine, hooks, stats = make_engine(Budgets(max_evals=12, plateau_evals=None), in_flight=3,
                                       policy=make_policy("beam"),
                                       operator=StepOperator(steps=(1, 2, 3)))
    run(engine)
    assert stats["max"] == 3  # concurrency happened, and never beyond the bound
    assert len(hooks.records) == 12


def test_rejected_candidates_get_fitness_zero_and_infra_failures_do_not():
    async def judge(node, source):
        x = x_of(source)
        if x == 2:
            raise InfraError("worker node lost")
        if x % 2:
            return verdict({"stage": "correctness", "fitness": 0.0, "speedup": None,
                            "reason": "wrong"})
        return verdict({"stage": "accepted", "fitness": fitness(x), "speedup": fitness(x)})

    engine, hooks, _ = make_engine(Budgets(max_evals=40, plateau_evals=None), evaluate=judge,
                                   operator=StepOperator(start=4, steps=(1, 2)))
    run(engine)
    graph = engine.graph
    buggy = [n for n in graph.candidates() if n.buggy]
    assert buggy and all(n.fitness == 0.0 and x_of(hooks.sources[n.id]) % 2 for n in buggy)
    infra = [graph.get(i) for i in hooks.infra]
    assert [x_of(hooks.sources[n.id]) for n in infra] == [2]
    assert infra[0].status == "infra_failed" and infra[0].fitness is None


def test_pending_nodes_are_evaluated_first_and_done_nodes_never_again():
    graph = SearchGraph()
    graph.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    done = graph.add(Node(1, (ROOT,), "step", "", source_hash("X = 3"), status="done",
                          stage="accepted", fitness=fitness(3), order=0))
    graph.add(Node(2, (1,), "step", "", source_hash("X = 4"), status="pending"))
    progress = Progress()
    progress.note_evaluation(done.fitness)
    engine, hooks, stats = make_engine(Budgets(max_evals=4, plateau_evals=None), graph=graph,
                                       progress=progress)
    hooks.sources.update({1: "X = 3", 2: "X = 4"})
    run(engine)
    assert stats["calls"][0] == 2          # the pending node first
    assert 1 not in stats["calls"]          # the completed one never again
    assert progress.evals == 4              # the budget counts the evaluation done before


def test_ucb_explores_then_exploits_and_is_deterministic():
    graph = SearchGraph()
    graph.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    for i, f in enumerate([1.2, 1.5, 1.4], start=1):
        graph.add(Node(i, (ROOT,), "op", "", f"h{i}", status="done", stage="accepted", fitness=f))
    for j in range(4):  # the best node has been expanded a lot already
        graph.add(Node(10 + j, (2,), "op", "", f"c{j}", status="done", stage="correctness",
                       fitness=0.0))
    ucb = BestFirstUCB()
    first = ucb.select(graph, 3, random.Random(0))
    assert first == ucb.select(graph, 3, random.Random(1))  # no hidden randomness
    assert 2 not in first[:1] and set(first) <= {1, 2, 3}  # the unexplored ones come first
    assert BestFirstUCB(exploration=0.0).select(graph, 2, random.Random(0)) == [2, 2]


def test_beam_keeps_branches_diverse():
    graph = SearchGraph()
    graph.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    graph.add(Node(1, (ROOT,), "op", "", "a", status="done", stage="accepted", fitness=1.1))
    graph.add(Node(2, (ROOT,), "op", "", "b", status="done", stage="accepted", fitness=1.0))
    for i, f in enumerate([2.0, 1.9, 1.8, 1.7], start=3):  # four strong children of branch 1
        graph.add(Node(i, (1,), "op", "", f"x{i}", status="done", stage="accepted", fitness=f))
    beam = DiverseBeam(width=3, per_branch=2).beam(graph)
    assert [n.id for n in beam] == [3, 4, 2]  # branch 2 keeps a seat despite lower fitness


def test_termination_rules_directly():
    p = Progress(evals=3, in_flight=2)
    assert "evaluation budget" in should_stop(Budgets(max_evals=5), p)
    assert should_stop(Budgets(max_evals=6), p) is None
    p = Progress(exhausted=True)
    assert "exhausted" in should_stop(Budgets(), p)
    assert "cost budget" in should_stop(Budgets(max_cost=1.0), Progress(cost=1.5))
    assert "token budget" in should_stop(Budgets(max_tokens=10), Progress(tokens=10))


def test_unknown_policy_lists_the_registered_ones():
    from kernelevolve.errors import UsageError

    with pytest.raises(UsageError, match="ucb, beam, greedy, random"):
        make_policy("annealing")


def test_acceptance_needs_the_interval_to_clear_one():
    from kernelevolve.types import EvalResult

    good = EvalResult(True, "accepted", "", speedup=1.3, speedup_ci=(1.2, 1.4))
    noisy = EvalResult(True, "accepted", "", speedup=1.05, speedup_ci=(0.97, 1.12))
    bad = EvalResult(False, "correctness", "", speedup=None, speedup_ci=None)
    out = decide([(3, noisy), (5, good)], "budget")
    assert out["kind"] == "improved" and out["node_id"] == 5 and "1.300x" in out["message"]
    out = decide([(3, noisy)], "budget")
    assert out["kind"] == "no_safe_improvement" and "does not clear 1" in out["message"]
    assert decide([(4, bad)], "budget")["kind"] == "no_safe_improvement"
    assert decide([], "budget")["kind"] == "no_safe_improvement"


def test_fitness_and_final_decision_follow_the_compile_baseline():
    """--baseline compile: fitness is the speedup over torch.compile, and so is the verdict."""
    from kernelevolve.harness.gates.scoring import score
    from kernelevolve.types import CaseResult, EvalResult

    data = {"ref_ms": [2.0] * 9, "cand_ms": [1.0] * 9, "compile_ms": [1.5] * 9,
            "calls_per_batch": 1}
    results = {}
    for baseline in ("eager", "compile"):
        r = EvalResult(accepted=False, stage="timing", reason="", baseline=baseline,
                       cases=[CaseResult(name="a", weight=1.0)])
        score(r, {"a": data})
        results[baseline] = r
    assert results["eager"].fitness == pytest.approx(2.0)
    assert results["compile"].fitness == pytest.approx(1.5)
    assert results["compile"].compile_speedup_ci[0] == pytest.approx(1.5)
    assert results["compile"].reason.startswith("accepted: 1.500x weighted speedup over "
                                                "torch.compile")  # the judged figure leads
    final = results["compile"]
    eager = decide([(3, final)], "budget")
    comp = decide([(3, final)], "budget", "compile")
    assert eager["speedup"] == pytest.approx(2.0)
    assert comp["speedup"] == pytest.approx(1.5) and comp["kind"] == "improved"
    assert comp["message"].startswith("improved 1.500x over torch.compile")


def test_an_operator_must_declare_its_capabilities():
    """The engine reads `repairs` and `exhaustible`; an operator that does not declare them is
    refused when the search is built, naming what is missing (they were guessed with getattr:
    a forgotten `exhaustible = False` made an LLM operator look finished after one empty
    reply)."""
    class Vague:
        name = "vague"

        async def propose(self, ctx):
            return []

    with pytest.raises(TypeError, match="'vague' does not declare repairs, exhaustible"):
        check_operator(Vague())
    Vague.repairs, Vague.exhaustible = False, "yes"
    with pytest.raises(TypeError, match="does not declare exhaustible"):
        check_operator(Vague())
    Vague.exhaustible = True
    check_operator(Vague())
    for op in (StepOperator(), TuneOperator(), LLMOperator.__new__(LLMOperator),
               SynthOperator("p.py", "cpu")):
        check_operator(op)
