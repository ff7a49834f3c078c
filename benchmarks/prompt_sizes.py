"""Prompt sizes of the universal operator, section by section, on one example problem.

Builds the prompts the LLM operator would send at three points of a scripted run of
examples/softmax (CPU, C++): the first draft (nothing evaluated yet), a later draft (after five
evaluations: two drafts, a tuned child, a rejected edit and a regression) and an improvement of
the best node. No model is called: a recording client captures each prompt and answers nothing.

Agent mode (`--agent`, row "agent turn 4"): the same improvement as a tool conversation of four
turns, scripted: time(A); check(B) and time(B); time(C) and profile(); the size is what turn 4
sends, the system prompt, the user prompt, the transcript (tool calls' arguments and results)
and the tool specs. Each variant changes one line of the parent; the scripted model sends
SEARCH/REPLACE edits where the tools' `source` accepts them against the last source, the whole
module otherwise. Tool results come from canned evaluation results (no harness runs).

    python benchmarks/prompt_sizes.py [--json] [--show draft2|improve|draft1|agent]

Sizes are characters and approximate tokens (characters / 4). Run it on two commits to compare.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

ROOT_DIR = Path(__file__).resolve().parent.parent
PROBLEM = ROOT_DIR / "examples" / "softmax" / "problem.py"
CANDIDATE = ROOT_DIR / "examples" / "softmax" / "candidate_cpp.py"
CASES = (("512x2048", 2.0), ("128x8192", 1.0), ("tail_131x999", 1.0))
EAGER_MS = {"512x2048": 0.95, "128x8192": 1.02, "tail_131x999": 0.13}
BYTES = {"512x2048": 8388608, "128x8192": 8388608, "tail_131x999": 1046952}


class RecordingClient:
    """Answers every call with the same small module and keeps the prompts."""

    def __init__(self):
        self.prompts: list[tuple[str, str]] = []

    async def complete(self, system: str, user: str):
        from kernelevolve.llm.client import Completion

        self.prompts.append((system, user))
        reply = ("Change: nothing (a recorded prompt).\n```python\nimport torch.nn as nn\n\n\n"
                 "class ModelNew(nn.Module):\n    pass\n```\n")
        return Completion(text=reply, provider="openai", model="recorder", tokens_in=None,
                          tokens_out=None, latency_s=0.0, cost_usd=None, attempts=1,
                          finish_reason="stop")


def _result(stage: str, speedup: float | None, reason: str = "") -> dict:
    cases = []
    for name, weight in CASES:
        case = {"name": name, "weight": weight}
        if speedup is not None:
            ref = EAGER_MS[name]
            cand = ref / speedup
            moved = BYTES[name]
            case.update(correct=True, max_abs_err=3e-8, ref_ms=ref, cand_ms=cand,
                        speedup=speedup, bytes_moved=moved, flops=0,
                        sol_ms=moved / 21.2e6, sol_bound="memory",
                        sol_fraction=moved / 21.2e6 / cand, achieved_gbs=moved / cand / 1e6,
                        profile={"calls": 40, "batches": 20, "threads": 2,
                                 "cpu_ms_per_call": 2 * cand, "user_ms_per_call": 1.9 * cand,
                                 "sys_ms_per_call": 0.1 * cand, "minor_faults_per_call": 0.0,
                                 "major_faults_per_call": 0.0, "vol_ctx_per_call": 2.0,
                                 "invol_ctx_per_call": 0.1,
                                 "perf_unavailable": "no hardware counters on this machine"},
                        ref_profile={"calls": 40, "cpu_ms_per_call": 2 * ref,
                                     "user_ms_per_call": 2 * ref, "sys_ms_per_call": 0.0,
                                     "minor_faults_per_call": 0.0, "vol_ctx_per_call": 2.0,
                                     "invol_ctx_per_call": 0.1})
        elif stage == "correctness":
            case.update(correct=name != "tail_131x999", max_abs_err=0.02 if
                        name == "tail_131x999" else 1e-8)
        cases.append(case)
    return {"stage": stage, "accepted": stage == "accepted", "speedup": speedup,
            "fitness": speedup or 0.0, "reason": reason or f"accepted: {speedup}x", "cases": cases}


def scenario():
    """(graph, results, sources) of five evaluated nodes."""
    from kernelevolve.search.graph import ROOT, Node, SearchGraph

    g = SearchGraph()
    g.add(Node(ROOT, (), "reference", "the PyTorch reference", "h0", status="root", fitness=1.0))
    rows = [
        (1, (0,), "llm", "llm draft: Change: one OpenMP thread per row, three passes (max, "
         "sum of exp, scale) with std::exp. A plain first version.", "accepted", 1.10, ""),
        (2, (0,), "llm", "llm draft: Change: two-pass online softmax (running max and sum), "
         "vectorised with AVX2 intrinsics.", "accepted", 0.80, ""),
        (3, (1,), "llm", "llm improve: Change: fast exp polynomial with -ffast-math.",
         "correctness", None, "wrong result on case 'tail_131x999' (trial 1 of 3): max abs "
         "error 0.02 > atol 1e-4 at [130, 998]; inf/NaN handling changed by -ffast-math"),
        (4, (1,), "tune", "tune: ROWS_PER_THREAD=4", "accepted", 1.30, ""),
        (5, (4,), "llm", "llm improve: Change: unroll the scale pass by 8.", "accepted", 1.05,
         ""),
    ]
    results, sources = {}, {}
    base = CANDIDATE.read_text()
    for order, (nid, parents, op, why, stage, speedup, reason) in enumerate(rows):
        fitness = speedup if stage == "accepted" else 0.0
        g.add(Node(nid, parents, op, why, f"h{nid}", "done", stage, fitness, speedup,
                   meta={"reason": reason or f"accepted: {speedup}x"}, order=order))
        results[nid] = _result(stage, speedup, reason)
        sources[nid] = base + f"\n# variant {nid}\n"
    return g, results, sources


def _memory(graph, results) -> str:
    try:
        from kernelevolve.search.memory import history_table
    except ImportError:  # older commits: the summary
        from kernelevolve.search.memory import summarize

        return summarize(graph)
    from kernelevolve.types import EvalResult

    typed = {nid: EvalResult.from_dict(r) for nid, r in results.items()}  # as the store hands
    return history_table(graph, typed.get)


def build_prompts() -> dict[str, tuple[str, str]]:
    from kernelevolve.knowledge import default_index
    from kernelevolve.operators.llm import LLMOperator

    graph, results, sources, builder, fp = _setup()
    out, seen_meta = {}, []
    for label, parent_id, evaluated in (("draft1", None, False), ("draft2", None, True),
                                        ("improve", 4, True)):
        client = RecordingClient()
        op = LLMOperator(client, builder, default_index())
        ctx = _context(graph, results, sources, fp, parent_id, evaluated, seen_meta)
        drafts = asyncio.run(op.propose(ctx))
        seen_meta += [d.meta for d in drafts]
        out[label] = client.prompts[0]
    return out


def _context(graph, results, sources, fp, parent_id, evaluated, seen_meta):
    from kernelevolve.operators.base import ParentView, ProposalContext
    from kernelevolve.search.graph import SearchGraph

    parents = ()
    if parent_id is not None:
        node = graph.get(parent_id)
        parents = (ParentView(node_id=node.id, source=sources[node.id], fitness=node.fitness,
                              stage=node.stage, reason=node.meta["reason"], meta={},
                              result=results[node.id]),)
    ctx_graph = graph if evaluated else SearchGraph()
    memory = _memory(ctx_graph, results) if evaluated else ""
    fields = ProposalContext.__dataclass_fields__
    extra = {}
    if "earlier_drafts" in fields and evaluated and not parents:
        extra["earlier_drafts"] = tuple(
            ParentView(node_id=n.id, source=sources[n.id], fitness=n.fitness, stage=n.stage,
                       reason=n.meta["reason"], meta={"change": n.rationale.split(": ", 2)[-1]},
                       result=results[n.id])
            for n in graph.evaluated() if n.parents == (0,))
    if "facts" in fields and evaluated:
        extra["facts"] = {"baseline": "eager", "baselines": {"cases": {
            name: {"eager_ms": ms, "compile_ms": ms * 0.9, "bytes_moved": BYTES[name],
                   "flops": 0, "sol_ms": BYTES[name] / 21.2e6, "sol_bound": "memory"}
            for name, ms in EAGER_MS.items()}}}
    return ProposalContext(problem_path=str(PROBLEM), problem_source=PROBLEM.read_text(),
                           platform="cpu", parents=parents, seen_hashes=frozenset(),
                           seen_meta=tuple(seen_meta), rng_seed=0, want=1, memory=memory,
                           fingerprint=fp, **extra)


def _setup():
    from kernelevolve.operators.prompt import PromptBuilder

    graph, results, sources = scenario()
    builder = PromptBuilder(str(PROBLEM), "cpu", "cpp")
    fp = {"platform": "cpu", "device": "AMD EPYC (example)", "threads": 2, "cxx": "g++ 14.2",
          "torch": "2.13.0", "cpu_flags": ["avx2", "fma", "avx512f"]}
    try:  # this machine's static facts, with figures of the kind the worker measures
        from kernelevolve.platforms.machine_facts import static_facts

        fp["machine"] = {**static_facts(),
                         "memory_bandwidth": {"gbs": 21.2, "kernel": "triad", "threads": 2},
                         "peak_gflops": {"float32": {"gflops": 90.9, "how": "torch.mm 1024^3"}}}
    except ImportError:  # older commits
        pass
    return graph, results, sources, builder, fp


# (search, replace) of the agent's three variants, each one line of the parent
VARIANTS = (("#pragma omp simd reduction(max:m)", "#pragma omp simd reduction(max:m) simdlen(16)"),
            ("#pragma omp parallel if (rows * cols >= PARALLEL_MIN_ELEMENTS)",
             "#pragma omp parallel if (rows * cols >= 2 * PARALLEL_MIN_ELEMENTS)"),
            ("return p * scale;", "return scale * p;"))


class ScriptedAgent:
    """A converse() client for four turns of tool calls; keeps what each turn sent."""

    def __init__(self, parent_source: str):
        self.source, self.sent = parent_source, []

    async def converse(self, system, messages, tool_specs, turn=0):
        from types import SimpleNamespace

        from kernelevolve.llm.tools import ToolCall

        self.sent.append((system, [dict(m) for m in messages], tool_specs))
        spec = next(t for t in tool_specs if t.name == "time")
        edits = "SEARCH/REPLACE" in json.dumps(spec.parameters)
        args = []
        for search, replace in VARIANTS[:min(turn, 3)][-1:]:
            self.source = self.source.replace(search, replace, 1)
            args.append({"source": (f"<<<<<<< SEARCH\n{search}\n=======\n{replace}\n"
                                    ">>>>>>> REPLACE\n") if edits else self.source})
        again = {} if edits else args[0]  # the same source: without one, the last sent
        plans = {1: [("time", args[0])],
                 2: [("check", {**args[0], "case": "tail_131x999"}), ("time", again)],
                 3: [("time", args[0]), ("profile", {})]}
        calls = [ToolCall(f"call_{turn}_{i}", name, a)
                 for i, (name, a) in enumerate(plans.get(turn, [("submit", {
                     "source": self.source, "rationale": "Change: done"})]))]
        return SimpleNamespace(text="", tool_calls=calls, model="recorder", tools_mode="native")


def agent_prompt() -> tuple[str, str, str, str]:
    """(system, user, transcript, tool specs) as sent at turn 4 of the scripted conversation."""
    from kernelevolve.knowledge import default_index
    from kernelevolve.operators.agent import AgentSettings
    from kernelevolve.operators.llm import LLMOperator

    graph, results, sources, builder, fp = _setup()
    canned = {**results[4], "measured": True, "speedup_ci": [1.25, 1.35],
              "cases": [dict(c) for c in results[4]["cases"]]}  # the search's own stay as run
    for c in canned["cases"]:
        c.update(speedup_ci=[c["speedup"] * 0.95, c["speedup"] * 1.05],
                 cand_timing={"median_ms": c["cand_ms"], "n": 40})

    async def evaluate(source, tool, only_cases, stop_after, timing=None):
        return {**canned, "cases": [c for c in canned["cases"] if c["name"] in only_cases]}

    client = ScriptedAgent(sources[4])
    op = LLMOperator(client, builder, default_index(),
                     agent=AgentSettings(evaluate=evaluate, turns=6))
    asyncio.run(op.propose(_context(graph, results, sources, fp, 4, True, [])))
    system, messages, specs = client.sent[3]
    user, rest = messages[0]["content"], messages[1:]
    transcript = json.dumps(rest, indent=None, default=str)
    tools = json.dumps([{"name": t.name, "description": t.description,
                         "parameters": t.parameters} for t in specs])
    return system, user, transcript, tools


def sections(user: str) -> list[tuple[str, int]]:
    parts, title, buf = [], "(head)", []
    for line in user.splitlines(keepends=True):
        if line.startswith("## "):
            if buf:
                parts.append((title, len("".join(buf))))
            title, buf = line[3:].strip(), []
        buf.append(line)
    if buf:
        parts.append((title, len("".join(buf))))
    return parts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--show", choices=("draft1", "draft2", "improve", "agent"))
    args = ap.parse_args(argv)
    if args.show == "agent":
        print("\n-----\n".join(agent_prompt()))
        return 0
    prompts = build_prompts()
    if args.show:
        system, user = prompts[args.show]
        print(system, "\n-----\n", user)
        return 0
    table = {label: {"system": len(s), "user": len(u), "sections": dict(sections(u))}
             for label, (s, u) in prompts.items()}
    system, user, transcript, tools = agent_prompt()
    table["agent turn 4"] = {"system": len(system), "user": len(user),
                             "transcript": len(transcript), "tools": len(tools), "sections": {}}
    if args.json:
        print(json.dumps(table, indent=2))
        return 0
    for label, row in table.items():
        extra = row.get("transcript", 0) + row.get("tools", 0)
        total = row["system"] + row["user"] + extra
        more = (f" + transcript {row['transcript']} + tool specs {row['tools']}"
                if "transcript" in row else "")
        print(f"{label}: system {row['system']} + user {row['user']}{more} = {total} chars "
              f"(~{total // 4} tokens)")
        for title, size in row["sections"].items():
            print(f"    {size:6d}  {title}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
