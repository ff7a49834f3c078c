"""The draft phase (search/drafting.py) and notes a stateless model can use (knowledge/applies.py).

Engine tests use a scripted operator and an evaluator that reads a marker in the source (BROKEN:
rejected at load with a compiler error; SLOW: correct, 0.5x; FAST: correct, 1.5x), so every
expectation is known in advance. The scripted runs put the real LLM operator, prompt builder and
knowledge index in that engine and answer over the wire from tests/llm_servers.py's server (both
protocols); the prompts are asserted as they were sent.
"""
from __future__ import annotations

import asyncio
import re

import pytest

from conftest import PROBLEMS, example
from llm_servers import ScriptedServer, prompt_of
from engine_hooks import MemoryHooks

from kernelevolve.knowledge import default_index
from kernelevolve.knowledge.applies import ProblemFacts, source_ops
from kernelevolve.knowledge.notes import NoteError, parse_note
from kernelevolve.knowledge.sections import choose, split
from kernelevolve.operators.base import Draft, ProposalContext
from kernelevolve.operators.prompt import PromptBuilder
from kernelevolve.search.drafting import draft_cap, next_step, repairable, superseded
from kernelevolve.search.engine import EngineConfig, SearchEngine
from kernelevolve.search.graph import ROOT, Node, SearchGraph
from kernelevolve.search.policies import Greedy
from kernelevolve.types import EvalResult
from kernelevolve.search.termination import Budgets, Progress

KEY_VAR = "KE_DRAFT_TEST_KEY"
COMPILE_ERROR = "C++ compilation failed: 'undeclared_tile' was not declared in this scope"


def verdict(data: dict) -> EvalResult:
    """A scripted evaluation's result, accepted when its stage says so."""
    return EvalResult.from_dict({"accepted": data["stage"] == "accepted", **data})


# ---- the engine with a scripted operator -----------------------------------------------------
async def judge(node, source):
    await asyncio.sleep(0.05 if "SLOW draft" in source else 0.001)
    if "BROKEN" in source:
        return verdict({"stage": "load", "fitness": 0.0, "speedup": None, "reason": COMPILE_ERROR})
    fit = 1.5 if "FAST" in source else 0.5
    return verdict({"stage": "accepted", "fitness": fit, "speedup": fit, "reason": "ok"})


class Writer:
    """Drafts from `drafts` (the last one repeats, numbered), repairs to FAST, improves to SLOW.
    Every call is recorded as (kind, parent id or None)."""

    name = "writer"
    repairs = True
    exhaustible = False

    def __init__(self, drafts=("SLOW",), repair_delay=0.0):
        self.drafts, self.repair_delay = list(drafts), repair_delay
        self.calls: list[tuple[str, int | None]] = []
        self.n = 0

    async def propose(self, ctx):
        out = []
        for _ in range(max(1, ctx.want) if not ctx.parents else 1):
            self.n += 1
            if not ctx.parents:
                self.calls.append(("draft", None))
                kind = self.drafts[min(len(self.calls_of("draft")) - 1, len(self.drafts) - 1)]
                out.append(Draft(f"{kind} draft {self.n}", (), self.name, "draft"))
                continue
            parent = ctx.parents[0]
            if parent.stage != "accepted":
                self.calls.append(("repair", parent.node_id))
                await asyncio.sleep(self.repair_delay)
                out.append(Draft(f"FAST fix of {parent.node_id} ({self.n})", (parent.node_id,),
                                 self.name, "repair"))
            else:
                self.calls.append(("improve", parent.node_id))
                out.append(Draft(f"SLOW child of {parent.node_id} ({self.n})",
                                 (parent.node_id,), self.name, "improve"))
        return out

    def calls_of(self, kind):
        return [c for c in self.calls if c[0] == kind]


def search(operator, max_evals, in_flight=1, problem="p.py"):
    graph = SearchGraph()
    graph.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    engine = SearchEngine(graph=graph, operators=[operator], policy=Greedy(), evaluate=judge,
                          hooks=MemoryHooks(graph), budgets=Budgets(max_evals=max_evals,
                                                              plateau_evals=None),
                          progress=Progress(), problem_path=problem, problem_source="",
                          platform="cpu", config=EngineConfig(max_in_flight=in_flight))
    asyncio.run(engine.run())
    return graph


def root_drafts(graph):
    return [n for n in graph.candidates() if n.parents == (ROOT,)]


@pytest.mark.parametrize("in_flight", [1, 2])
def test_the_draft_cap_holds_when_every_draft_is_only_slower(in_flight):
    writer = Writer(drafts=("SLOW",))
    graph = search(writer, max_evals=12, in_flight=in_flight)
    assert EngineConfig().draft_count == 2 and draft_cap(2, 12) == 2
    assert len(root_drafts(graph)) == 2                  # drafted again (strategy), then capped
    assert len(writer.calls_of("improve")) >= 8          # the rest of the budget expanded
    assert draft_cap(2, 3) == 1 and draft_cap(5, None) == 5


def test_drafting_stops_as_soon_as_a_draft_beats_the_baseline():
    writer = Writer(drafts=("FAST",))
    graph = search(writer, max_evals=6)
    assert len(root_drafts(graph)) == 1 and writer.calls[0] == ("draft", None)
    assert all(kind == "improve" for kind, _ in writer.calls[1:])


def test_a_build_failure_is_repaired_instead_of_drafted_again():
    writer = Writer(drafts=("BROKEN", "SLOW"))
    graph = search(writer, max_evals=6)
    assert writer.calls[:2] == [("draft", None), ("repair", 1)]
    assert len(root_drafts(graph)) == 1                  # the fix (1.5x) ended drafting
    assert graph.get(2).parents == (1,) and graph.get(2).accepted


def test_a_node_is_sent_for_repair_once_even_with_calls_in_flight():
    # node 1 fails at once; node 2's evaluation ends while node 1's repair call is out
    writer = Writer(drafts=("BROKEN", "SLOW"), repair_delay=0.3)
    search(writer, max_evals=6, in_flight=2)
    repaired = [p for kind, p in writer.calls if kind == "repair"]
    assert repaired and len(repaired) == len(set(repaired)), writer.calls


def test_a_rejected_node_fixed_later_is_not_sent_for_repair():
    graph = SearchGraph()
    graph.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    broken = graph.add(Node(1, (ROOT,), "llm", "", "h1", "done", "load", 0.0, order=0))
    assert repairable(graph, broken)
    assert next_step(graph, 2, 1, can_repair=True).node is broken
    # the same source, accepted at a later node (e.g. a flaky build that passed on re-run)
    graph.add(Node(2, (ROOT,), "llm", "", "h1", "done", "accepted", 0.8, order=1))
    assert superseded(graph, broken) and not repairable(graph, broken)
    # a child that fixed it, with a grandchild still rejected: neither is sent to be fixed
    g = SearchGraph()
    g.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    g.add(Node(1, (ROOT,), "llm", "", "a", "done", "load", 0.0, order=0))
    g.add(Node(2, (1,), "llm", "", "b", "done", "accepted", 0.7, order=1))
    g.add(Node(3, (2,), "llm", "", "c", "done", "correctness", 0.0, order=2))
    assert superseded(g, g.get(1))
    step = next_step(g, 2, 1, can_repair=True)
    assert step is not None and step.kind == "repair" and step.node.id == 3


# ---- note selection by the problem's facts ---------------------------------------------------
def _facts(path, language="cpp"):
    b = PromptBuilder(str(path), "cpu", language)
    return b, b.facts


def _chosen(path):
    b, facts = _facts(path)
    hits = default_index().search(" ".join(facts.terms()), platform="cpu", language="cpp", k=4)
    return {s.heading for s in choose(hits, facts=facts, terms=facts.terms(),
                                      budget_chars=100_000)}


def test_facts_come_from_the_reference_ops_not_its_name():
    _, conv = _facts(PROBLEMS / "synth_chan_bias.py")
    assert {"conv2d", "relu"} <= conv.ops and "conv" in conv.classes
    assert conv.dtypes == {"float32"}
    _, soft = _facts(PROBLEMS / "softmax_unfused.py")
    assert {"amax", "exp", "sum"} <= soft.ops and {"math", "softmax"} <= soft.classes
    assert source_ops("class Model:\n    def forward(self, a, b):\n        return a @ b\n") \
        == {"matmul"}


def test_an_fp32_copy_or_conv_gets_no_bf16_softmax_or_exp_notes():
    for path in (PROBLEMS / "synth_flip.py", PROBLEMS / "synth_chan_bias.py"):
        chosen = _chosen(path)
        assert chosen, path
        for heading in ("Formats", "Rule: low-precision storage, fp32 arithmetic",
                        "Softmax and exp", "Inf arithmetic you rely on", "libm in vector loops"):
            assert heading not in chosen, (path, heading)


def test_a_softmax_gets_the_softmax_and_exp_notes():
    chosen = _chosen(PROBLEMS / "softmax_unfused.py")
    assert {"Softmax and exp", "Inf arithmetic you rely on", "libm in vector loops"} <= chosen
    assert "Formats" not in chosen  # fp32: no bf16 summation rule


def test_bf16_notes_reach_a_bf16_problem(tmp_path):
    path = tmp_path / "bf16_sum.py"
    path.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
                    "    def forward(self, x):\n        return x.sum(dim=-1)\n\n"
                    "def get_inputs():\n    return [torch.randn(64, 512, dtype=torch.bfloat16)]\n"
                    "\ndef get_init_inputs():\n    return []\n")
    chosen = _chosen(path)
    assert {"Formats", "Rule: low-precision storage, fp32 arithmetic", "Long sums"} <= chosen


NOTE = """---
id: {id}
title: A user note
platforms: [any]
languages: [any]
tags: [softmax, conv, copy]
source: curated
confidence: 0.8
created: 2026-01-01
{front}---

Plain lead, no metadata.

<!-- applies: ops=softmax -->
**Only with softmax.** Text for softmax problems.

**Untagged.** Text for everyone.
"""


def test_applies_metadata_is_validated_and_untagged_notes_still_work():
    note = parse_note(NOTE.format(id="user-note", front="applies: {dtypes: [fp32]}\n"))
    assert note.applies == {"dtypes": ["fp32"]}
    sections = split(note)
    assert [s.heading for s in sections] == ["", "Only with softmax", "Untagged"]
    assert "<!--" not in sections[1].text and sections[1].where["ops"] == ["softmax"]
    copy = ProblemFacts(frozenset({"flip"}), frozenset({"float32"}), "cpu", "cpp")
    soft = copy.with_ops(["softmax"])
    hit = type("Hit", (), {"note": note, "score": 1.0})()
    assert [s.heading for s in choose([hit], facts=copy, terms=[], budget_chars=9999)] == \
        ["", "Untagged"]
    assert "Only with softmax" in [s.heading for s in choose([hit], facts=soft, terms=[],
                                                             budget_chars=9999)]
    half = ProblemFacts(frozenset({"flip"}), frozenset({"float16"}), "cpu", "cpp")
    assert choose([hit], facts=half, terms=[], budget_chars=9999) == []  # the note is fp32-only
    with pytest.raises(NoteError, match="applies: unknown key 'op'"):
        parse_note(NOTE.replace("ops=softmax", "op=softmax").format(id="bad", front=""))


# ---- scripted runs: the real operator, prompts and notes over the wire -----------------------
FUSED = (example("softmax").parent / "candidate_cpp.py").read_text()


class Script:
    """Draft 1 does not build; any other draft is prose. A repair returns a FAST fix; an
    improvement a SLOW child (each unique)."""

    def __init__(self):
        self.n = 0

    def __call__(self, request):
        prompt = prompt_of(request)
        self.n += 1
        if "## Parent candidate" not in prompt:
            if self.n == 1:
                return "Change: tiles.\n```python\n# BROKEN\n" + FUSED + "```"
            return "No other idea (prose)."
        if "stage reached: load" in prompt:
            return f"Change: declared the tile.\n```python\n# FAST {self.n}\n" + FUSED + "```"
        return f"Change: variant.\n```python\n# SLOW {self.n}\n" + FUSED + "```"


def scripted_run(provider, max_evals=5):
    from kernelevolve.llm import LLMClient, LLMConfig
    from kernelevolve.operators.llm import LLMOperator

    path = str(PROBLEMS / "softmax_unfused.py")
    with ScriptedServer(handler=Script()) as server:
        config = LLMConfig(provider, "m", base_url=server.base_url_for(provider),
                           api_key_env=KEY_VAR, retry_base_s=0.001)
        op = LLMOperator(LLMClient(config), PromptBuilder(path, "cpu", "cpp"), default_index())
        graph = search(op, max_evals=max_evals, problem=path)
        return graph, [r.prompt for r in server.requests]


@pytest.fixture(scope="module", params=["openai", "anthropic"])
def wire(request):
    env = pytest.MonkeyPatch()
    env.setenv(KEY_VAR, "sk-test")
    try:
        yield scripted_run(request.param)
    finally:
        env.undo()


def test_after_a_build_failure_the_next_call_repairs_it_with_its_error(wire):
    graph, prompts = wire
    assert "## Parent candidate" not in prompts[0]
    repair = prompts[1]
    assert "## Parent candidate (node 1" in repair and "stage reached: load" in repair
    assert "undeclared_tile" in repair                   # the error itself
    assert not any("different strategy" in p for p in prompts)
    assert len(root_drafts(graph)) == 1 and graph.get(2).parents == (1,)


def test_every_prompt_carries_the_notes_it_needs_in_full(wire):
    _, prompts = wire
    assert len(prompts) >= 3
    for p in prompts:
        notes = p.split("## Knowledge notes", 1)[1]
        for heading in ("**Softmax and exp.**", "**libm in vector loops.**",
                        "**Inf arithmetic you rely on.**"):
            assert heading in notes, (heading, notes[:400])
        assert "**Formats.**" not in notes                # no bf16 rule in an fp32 softmax
        assert "not repeated" not in p and "Given in full earlier" not in p
        assert re.search(r"Subtract the row max before `exp`.*half precision\.", notes, re.S)


def test_a_note_learned_on_this_problem_is_not_crowded_out_by_tagged_notes(tmp_path):
    from kernelevolve.knowledge import write_learned_note
    from kernelevolve.operators.llm import LLMOperator

    write_learned_note(tmp_path, title="softmax_unfused: 2.10x with cpp on cpu",
                       body="Rows handed out in blocks of 16 won on every case.",
                       platforms=["cpu"], languages=["cpp"], tags=["softmax", "learned-win"],
                       provenance={}, confidence=0.6)
    path = str(PROBLEMS / "softmax_unfused.py")
    builder = PromptBuilder(path, "cpu", "cpp")
    op = LLMOperator(None, builder, default_index(learned_folder=tmp_path))
    ctx = ProposalContext(problem_path=path, problem_source="", platform="cpu", parents=(),
                          seen_hashes=frozenset(), seen_meta=(), rng_seed=0)
    text, _ = builder.knowledge(op.retrieve(ctx, None))
    assert "Rows handed out in blocks of 16" in text
    assert "**Softmax and exp.**" in text and "**libm in vector loops.**" in text


def test_another_draft_is_asked_for_a_different_strategy_only_after_slower_drafts():
    from kernelevolve.operators.base import ParentView

    path = str(PROBLEMS / "softmax_unfused.py")
    builder = PromptBuilder(path, "cpu", "cpp")
    broken = ParentView(1, "class ModelNew: ...", 0.0, "load", COMPILE_ERROR)
    slow = ParentView(2, "class ModelNew: ...", 0.6, "accepted", "")

    def task(*drafts):
        ctx = ProposalContext(problem_path=path, problem_source="", platform="cpu", parents=(),
                              seen_hashes=frozenset(), seen_meta=(), rng_seed=0,
                              earlier_drafts=drafts)
        return builder.build(ctx, [])[1].split("## Candidate contract", 1)[0]

    assert "different strategy" not in task(broken)
    assert "avoid that error" in task(broken)
    assert "different strategy" in task(slow) and "Node(s) 2 were correct but slower" in task(slow)
    both = task(broken, slow)
    assert "Node(s) 1 were rejected for an error" in both and "Node(s) 2 were correct" in both


def test_a_seed_that_beats_the_baseline_does_not_stop_drafting():
    graph = SearchGraph()
    graph.add(Node(ROOT, (), "reference", "ref", "h0", status="root", fitness=1.0))
    graph.add(Node(1, (ROOT,), "seed", "", "s", "done", "accepted", 1.4, order=0))
    assert next_step(graph, 2, 1, can_repair=True).kind == "draft"
    graph.add(Node(2, (ROOT,), "llm", "", "d", "done", "accepted", 1.1, order=1))
    assert next_step(graph, 2, 1, can_repair=True) is None  # a draft beat it: expand
