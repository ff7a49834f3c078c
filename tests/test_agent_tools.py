"""The agent's tools without a model: sources as edits against the last one sent, the system
prompt of agent mode, the transcript's one module, and the paired `time`'s order, budget and
interval (the harness's results here are the dicts it returns; test_agent.py runs the harness)."""
from __future__ import annotations

import asyncio
import math
import re

import pytest

from kernelevolve.llm.tools import ToolCall
from kernelevolve.operators import agent_timing
from kernelevolve.operators.agent import SUPERSEDED, _shorten_modules, agent_system
from kernelevolve.operators.agent_tools import AgentTools
from kernelevolve.operators.base import ParentView
from kernelevolve.operators.reply import GenerationFailure

PARENT = "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n" \
         "        return x * 2 + 1\n"


def _edit(search: str, replace: str) -> str:
    return f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n"


def _parent(**kw) -> ParentView:
    return ParentView(node_id=3, source=PARENT, fitness=1.5, stage="accepted", reason="",
                      **kw)


def test_edits_apply_to_the_last_source_sent_then_to_the_parent_at_first():
    tools = AgentTools(None, None, ["a"], _parent())
    first = tools.source_of({"source": _edit("return x * 2 + 1", "return x + x + 1")})
    assert "return x + x + 1" in first  # against the parent
    second = tools.source_of({"source": _edit("def forward(self, x):",
                                              "def forward(self, x):  # fused")})
    assert "return x + x + 1" in second and "# fused" in second  # against the last source
    with pytest.raises(GenerationFailure, match="does not match the last source sent"):
        tools.source_of({"source": _edit("return x * 2 + 1", "return 0")})  # the parent's line
    whole = PARENT.replace("x * 2", "x * 3")
    assert tools.source_of({"source": whole}) == whole and tools.last_source == whole
    assert tools.source_of({}) == whole  # no source: the last one sent, as it is
    draft = AgentTools(None, None, ["a"], None)
    with pytest.raises(GenerationFailure, match="send the whole module first"):
        draft.source_of({"source": _edit("a", "b")})
    with pytest.raises(GenerationFailure, match="no source was sent yet"):
        draft.source_of({"source": ""})


def test_agent_system_prompt_has_no_single_block_answer_format():
    from conftest import PROBLEMS
    from kernelevolve.operators.prompt import PromptBuilder, template

    builder = PromptBuilder(str(PROBLEMS / "agent_affine.py"), "cpu", "cpp")
    for plain in (template("system") + "\n" + template("answer-module"),
                  template("system") + "\n" + template("answer-edit")):
        assert "single ```python" in plain  # what plain mode asks for ...
        system = agent_system(plain, 6, [c.name for c in builder.problem.cases])
        assert "single ```python" not in system and "ONE complete" not in system  # ... not here
        assert "Begin your answer with" not in system
        assert "You are an expert kernel engineer" in system
        assert "SEARCH/REPLACE edits applied to the LAST" in system and "`n4096`" in system


def test_the_transcript_keeps_one_whole_module():
    other = PARENT.replace("x * 2", "x * 4")
    messages = [{"role": "user", "content": "task"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "1", "name": "time", "arguments": {"source": PARENT}}]},
                {"role": "tool", "tool_call_id": "1", "content": "passed"},
                {"role": "assistant", "content": "", "tool_calls": [
                    {"id": "2", "name": "check", "arguments": {"source": _edit("a", "b")}}]}]
    kept = messages[1]
    _shorten_modules(messages, [ToolCall("3", "time", {"source": _edit("x", "y")})])
    assert messages[1]["tool_calls"][0]["arguments"]["source"] == PARENT  # edits: no change
    _shorten_modules(messages, [ToolCall("3", "time", {"source": other})])
    assert messages[1]["tool_calls"][0]["arguments"]["source"] == SUPERSEDED
    assert messages[3]["tool_calls"][0]["arguments"]["source"] == _edit("a", "b")
    assert kept["tool_calls"][0]["arguments"]["source"] == PARENT  # a recorded copy is kept


def _timed(speedup: float, width: float = 0.05, case: str = "a") -> dict:
    return {"accepted": True, "stage": "accepted", "measured": True, "reason": "ok",
            "cases": [{"name": case, "speedup": speedup, "ref_ms": 1.0, "cand_ms": 1 / speedup,
                       "speedup_ci": [speedup * (1 - width), speedup * (1 + width)],
                       "cand_timing": {"n": 50}, "profile": {"calls": 400}}]}


class Harness:
    """Answers each evaluation by source: the figures a real one returns, in that shape."""

    def __init__(self, figures: dict[str, dict]):
        self.figures, self.calls = figures, []

    async def __call__(self, source, tool, only_cases, stop_after, timing=None):
        self.calls.append((source, tool, only_cases, stop_after, timing))
        return self.figures[source]


def test_paired_time_alternates_base_and_candidate_and_returns_the_ratio_interval():
    harness = Harness({"base": _timed(2.0), "cand": _timed(2.4)})
    p = asyncio.run(agent_timing.paired_time(harness, "cand", "a", ("the parent (node 3)",
                                                                   "base")))
    assert [c[0] for c in harness.calls] == ["cand", "base", "base", "cand"]
    assert all(c[4] == agent_timing.TIMING and c[2] == ("a",) for c in harness.calls)
    ratio, lo, hi = p.ratio()
    assert math.isclose(ratio, 1.2) and 1.0 < lo < 1.2 < hi
    text = "\n".join(agent_timing.paired_text(p, "a"))
    assert "candidate / the parent (node 3): 1.200x [" in text and ": faster" in text
    assert "candidate 100 batches (800 calls); the parent (node 3) 100 batches" in text


def test_paired_time_says_when_no_difference_is_resolved_and_when_the_base_fails():
    close = Harness({"base": _timed(2.0, 0.2), "cand": _timed(2.04, 0.2)})
    p = asyncio.run(agent_timing.paired_time(close, "cand", "a", ("the parent", "base")))
    assert "no difference resolved" in "\n".join(agent_timing.paired_text(p, "a"))
    broken = Harness({"base": {"accepted": False, "stage": "correctness", "reason": "wrong\nx"},
                      "cand": _timed(2.0)})
    p = asyncio.run(agent_timing.paired_time(broken, "cand", "a", ("the parent", "base")))
    assert [c[0] for c in broken.calls] == ["cand", "base", "cand"]  # the base once, then alone
    text = "\n".join(agent_timing.paired_text(p, "a"))
    assert "the parent could not be timed this time (stage correctness: " in text
    assert "wrong" in text and "compared with eager only" in text
    rejected = Harness({"base": _timed(2.0), "cand": {"accepted": False, "stage": "run"}})
    asyncio.run(agent_timing.paired_time(rejected, "cand", "a", ("the parent", "base")))
    assert [c[0] for c in rejected.calls] == ["cand"]  # the verdict is decided


def test_paired_time_starts_no_evaluation_past_its_budget(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(agent_timing.time, "monotonic", lambda: clock[0])

    class Slow(Harness):
        def __init__(self, figures, seconds):
            super().__init__(figures)
            self.seconds = seconds

        async def __call__(self, *args, **kw):
            clock[0] += self.seconds  # each evaluation "takes" this long
            return await super().__call__(*args, **kw)

    figures = {"base": _timed(2.0), "cand": _timed(2.4)}
    harness = Slow(figures, 0.4 * agent_timing.TIME_BUDGET_S)
    p = asyncio.run(agent_timing.paired_time(harness, "cand", "a", ("the parent", "base")))
    assert [c[0] for c in harness.calls] == ["cand", "base"]  # a third would pass the budget
    assert p.ratio() is not None and not p.base.earlier
    # A case whose evaluation takes more than half the budget is not paired: the base's
    # earlier figure stands in for it, and the result says so.
    harness = Slow(figures, 0.6 * agent_timing.TIME_BUDGET_S)
    p = asyncio.run(agent_timing.paired_time(harness, "cand", "a", ("the parent", "base"),
                                             earlier=(2.0, (1.9, 2.1))))
    assert [c[0] for c in harness.calls] == ["cand"] and p.base.earlier
    assert math.isclose(p.ratio()[0], 1.2)
    text = "\n".join(agent_timing.paired_text(p, "a"))
    assert "(its earlier figure:" in text and "not paired)" in text
    assert "candidate / the parent: 1.200x [" in text
    harness = Slow(figures, 0.6 * agent_timing.TIME_BUDGET_S)
    p = asyncio.run(agent_timing.paired_time(harness, "cand", "a", ("the parent", "base")))
    assert p.ratio() is None
    assert "has no earlier figure for it" in "\n".join(agent_timing.paired_text(p, "a"))


def test_profile_after_time_in_one_reply_sees_that_time():
    harness = Harness({PARENT: _timed(1.5)})
    tools = AgentTools(harness, None, ["a"], None)
    timed = asyncio.run(tools.call(ToolCall("1", "time", {"source": PARENT})))
    profiled = asyncio.run(tools.call(ToolCall("2", "profile", {})))
    assert "no earlier candidate to compare with: the baseline is eager alone" in timed
    assert "case a figures:" in profiled and "1.500x over eager [" in profiled
    assert [row["tool"] for row in tools.log] == ["time", "profile"]
    assert tools.log[0]["speedup"] == 1.5 and tools.log[1]["verdict"] == "passed"


def test_a_profile_asked_before_a_time_in_the_same_reply_runs_after_it():
    from types import SimpleNamespace

    from kernelevolve.operators.agent import _turn

    harness = Harness({PARENT: _timed(1.5)})
    tools = AgentTools(harness, None, ["a"], None)
    reply = SimpleNamespace(text="", tool_calls=[ToolCall("p", "profile", {}),
                                                 ToolCall("t", "time", {"source": PARENT})])
    messages = [{"role": "user", "content": "task"}]
    assert asyncio.run(_turn(tools, messages, reply, None, last=False)) is None
    results = [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"]
    assert [r[0] for r in results] == ["p", "t"]  # answered in the order asked
    assert "case a figures:" in results[0][1] and "nothing timed" not in results[0][1]


def test_time_falls_back_on_the_parents_own_figure_for_a_case_too_slow_to_pair(monkeypatch):
    monkeypatch.setattr(agent_timing, "TIME_BUDGET_S", 0.0)  # no time for a second evaluation
    cand = PARENT.replace("x * 2", "x + x")
    harness = Harness({cand: _timed(3.0)})
    parent = _parent(result={"cases": [{"name": "a", "speedup": 2.0,
                                        "speedup_ci": [1.9, 2.1]}]})
    tools = AgentTools(harness, None, ["a"], parent)
    timed = asyncio.run(tools.call(ToolCall("1", "time", {"source": cand})))
    assert [c[0] for c in harness.calls] == [cand]
    assert re.search(r"the parent \(node 3\): 2\.000x over eager \[1\.9\d*-2\.1\d*\] \(its "
                     r"earlier figure", timed), timed
    assert "candidate / the parent (node 3): 1.500x [" in timed
    assert tools.log[0]["paired"] is False and tools.log[0]["ratio"] == 1.5


def test_tool_traffic_lines_say_what_each_call_measured_and_stay_inert():
    from kernelevolve.report.tool_traffic import call_text, traffic_lines

    paired = {"tool": "time", "case": "a", "verdict": "passed", "speedup": 1.46,
              "interval": [1.31, 1.63], "ratio": 1.004, "ratio_interval": [0.89, 1.132],
              "against": "the parent (node 1)", "paired": True, "seconds": 10.71}
    assert call_text(paired) == ("time a: passed; 1.46x over eager [1.31-1.63]; 1.004x the "
                                 "parent (node 1) [0.890-1.132]; 10.7 s")
    assert call_text({**paired, "paired": False}).endswith(
        "[0.890-1.132] (not paired: its earlier figure); 10.7 s")
    row = {"proposal": 4, "parent": None, "node": None, "turns": 2, "outcome": "failed",
           "reason": "no candidate\x1b[31m submitted", "rationale": None,
           "calls": [{"tool": "check", "verdict": "error", "error": "error: bad\x1b[2J case"}]}
    lines = traffic_lines([row])
    assert lines[0].startswith("  proposal 4, a draft, 2 turn(s), 1 call(s) no candidate (")
    assert "\x1b" not in "".join(lines) and "check: error (error: bad" in lines[1]


def test_time_without_a_source_times_what_check_just_edited():
    edited = PARENT.replace("x * 2", "x + x")
    harness = Harness({edited: _timed(1.5), PARENT: _timed(1.2)})
    tools = AgentTools(harness, None, ["a"], _parent())
    asyncio.run(tools.call(ToolCall("1", "check", {"source": _edit("x * 2", "x + x")})))
    again = asyncio.run(tools.call(ToolCall("2", "time", {})))  # an edit would not match twice
    assert "verdict: passed" in again and "candidate / the parent (node 3): 1.250x" in again
    assert [c[0] for c in harness.calls] == [edited, edited, PARENT, PARENT, edited]
