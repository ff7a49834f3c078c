"""The tools an LLM may call within one proposal (`--agent`): what each one runs, what it says.

compile / check / time / profile run the candidate through the run's own executor, so the same
sandbox, gates and containment as a full evaluation, restricted to one case and stopped after a
gate (EvalOptions.only_cases / stop_after). The run records each one as a `tool_evaluation`
event; none becomes a search node or counts toward --max-evals. read_note reads the knowledge
index; submit ends the loop (operators/agent.py).

A `source` is a whole module or SEARCH/REPLACE edits applied to the last source the model sent
in this conversation (the parent's at first), so a transcript need not grow by a module per
call. `time` compares the candidate with the last one that passed `time`, or the parent, paired
and within a time budget (operators/agent_timing.py). Every call is logged (`log`) for the
run's record of tool traffic.
"""
from __future__ import annotations

import json
import time
from typing import Any, Awaitable, Callable

from kernelevolve.harness.protocol.text import REASON_LABEL, quoted
from kernelevolve.llm.tools import ToolCall, ToolSpec
from kernelevolve.operators.agent_timing import paired_text, paired_time
from kernelevolve.operators.reply import GenerationFailure, parse_reply

# (source, tool, only_cases, stop_after, timing=None) -> the EvalResult dict, or {"error": "..."}
# when the infrastructure could not evaluate it (run.py `Run._agent_settings`). `timing`, when
# given, is a TimingPolicy's fields for this evaluation (the paired `time`).
ToolEvaluate = Callable[..., Awaitable[dict[str, Any]]]

RESULT_CHARS = 4000   # a reason can be 20 000 characters; a tool result stays readable
REASON_CHARS = 3000   # cut before it is fenced, so the cap never cuts the closing fence
_SOURCE = {"type": "string", "description": "the whole module, or SEARCH/REPLACE edits applied "
           "to the last source sent (see the system prompt); omitted: the last source sent"}
_CASE = {"type": "string", "description": "a case name (default: the first case)"}
# Fields of a result that are not figures (paths, provenance, logs) or shown elsewhere.
_NOT_FIGURES = {"accepted", "stage", "reason", "cases", "fingerprint", "sandbox", "platform",
                "problem", "candidate", "source_hash", "libraries", "logs", "measured_on",
                "partial", "language", "baseline", "integrity", "fitness"}


def specs() -> list[ToolSpec]:
    def obj(props: dict, required: list[str]) -> dict:
        return {"type": "object", "properties": props, "required": required}

    return [
        ToolSpec("compile", "Compile and load the module; 'ok' or the compiler's error text.",
                 obj({"source": _SOURCE}, [])),
        ToolSpec("check", "Run the static, load, run, correctness and integrity gates on one "
                          "case; returns the verdict, the stage and the reason.",
                 obj({"source": _SOURCE, "case": _CASE}, [])),
        ToolSpec("time", "The full evaluation on one case, paired with the last candidate that "
                         "passed `time` (or the parent): verdict, speedup over eager and over "
                         "that candidate, each with a 95% interval. Up to about 30 s.",
                 obj({"source": _SOURCE, "case": _CASE}, [])),
        ToolSpec("profile", "Every figure the harness has for an evaluation on one case; "
                            "without a source, the last one timed (also by a `time` "
                            "call earlier in the same reply).",
                 obj({"source": _SOURCE, "case": _CASE}, [])),
        ToolSpec("read_note", "The full text of a knowledge note, by title or id.",
                 obj({"title": {"type": "string"}}, ["title"])),
        ToolSpec("submit", "Submit the final candidate; ends the conversation.",
                 obj({"source": _SOURCE, "rationale": {
                     "type": "string", "description": "what you changed and why it is faster"}},
                     [])),
    ]


class AgentTools:
    """One proposal's tools: bound to the parent, the problem's cases and the run's evaluator."""

    def __init__(self, evaluate: ToolEvaluate, index: Any, cases: list[str],
                 parent: Any = None):
        self.evaluate, self.index, self.cases, self.parent = evaluate, index, cases, parent
        self.last_timed: dict[str, Any] | None = None
        self.last_timed_source: str | None = None
        self.last_pair: list[str] = []  # the paired lines of the last `time`
        if parent is not None and (parent.result or {}).get("measured"):
            self.last_timed = parent.result
            self.last_timed_source = parent.source
        # What edits apply to: the last source sent in this conversation (the parent's at first)
        self.last_source: str | None = parent.source if parent is not None else None
        # What `time` compares with: the last candidate that passed it, or the parent; and
        # that one's figures per case (speedup over eager, interval), for a case too slow to
        # evaluate twice within the budget
        self.base: tuple[str, str] | None = (
            (f"the parent (node {parent.node_id})", parent.source)
            if parent is not None and parent.stage == "accepted" else None)
        self.base_figures: dict[str, tuple[float, tuple[float, float]]] = {
            c["name"]: (c["speedup"], tuple(c["speedup_ci"]))
            for c in ((parent.result or {}).get("cases") or [] if self.base else [])
            if c.get("speedup") and c.get("speedup_ci")}
        self.used: list[str] = []
        self.log: list[dict[str, Any]] = []  # one row per call: the run's tool traffic
        self.times = 0

    def source_of(self, args: dict[str, Any]) -> str:
        """The module in a `source` argument: a whole module (fenced or not), SEARCH/REPLACE
        edits applied to the last source sent (the parent's at first), or, without one, the
        last source itself. It becomes the last source; GenerationFailure when there is none."""
        text = args.get("source")
        if text is None or (isinstance(text, str) and not text.strip()):
            if self.last_source is None:
                raise GenerationFailure("no `source` argument, and no source was sent yet in "
                                        "this conversation: send the whole module")
            return self.last_source  # the last source sent, as it is
        if not isinstance(text, str):
            raise GenerationFailure("the `source` argument is not text (a module, or "
                                    "SEARCH/REPLACE edits)")
        if "<<<<<<<" in text:
            if self.last_source is None:
                raise GenerationFailure("SEARCH/REPLACE edits, but no source was sent yet in "
                                        "this conversation: send the whole module first")
            try:
                source = parse_reply(text, self.last_source)[0]
            except GenerationFailure as exc:
                raise GenerationFailure(str(exc).replace(
                    "does not match the parent", "does not match the last source sent (edits "
                    "apply to it; copy SEARCH lines from it exactly)")) from None
        elif "```" in text:
            source = parse_reply(text, self.last_source)[0]
        elif "ModelNew" not in text:
            raise GenerationFailure("the source defines no ModelNew (a fragment, not a module; "
                                    "for a change, send SEARCH/REPLACE edits)")
        else:
            source = text.strip() + "\n"
        self.last_source = source
        return source

    async def call(self, call: ToolCall) -> str:
        """Run one tool call (not submit) and return its result as text for the model."""
        self.used.append(call.name or "?")
        row: dict[str, Any] = {"tool": call.name or "?"}
        self.log.append(row)
        t0 = time.monotonic()
        try:
            text = await self._call(call, row)
        finally:
            row["seconds"] = round(time.monotonic() - t0, 2)
        if text.startswith(("error", "nothing timed")):
            row.setdefault("verdict", "error")
            row.setdefault("error", text.splitlines()[0][:200])
        return text

    async def _call(self, call: ToolCall, row: dict[str, Any]) -> str:
        if call.error:
            return f"error: {call.error}"
        args = call.arguments
        try:
            if call.name == "read_note":
                return _cap(self.read_note(str(args.get("title") or "")))
            if call.name not in ("compile", "check", "time", "profile"):
                known = ", ".join(s.name for s in specs())
                return f"error: unknown tool {call.name!r}; the tools: {known}"
            case = args.get("case") or self.cases[0]
            if case not in self.cases:
                return f"error: unknown case {case!r}; the cases: {', '.join(self.cases)}"
            row["case"] = case
            if call.name == "profile" and not args.get("source"):
                if self.last_timed is None:
                    return "nothing timed yet: pass a source to profile"
                row["verdict"] = _verdict(self.last_timed)
                return _cap(self._profile_last(case))
            source = self.source_of(args)
        except GenerationFailure as exc:
            return f"error: {exc}"
        if call.name == "time":
            return _cap(await self._time(source, case, row))
        if call.name == "profile" and source == self.last_timed_source:
            row["verdict"] = _verdict(self.last_timed)
            return _cap(self._profile_last(case))
        stop = {"compile": "load", "check": "integrity"}.get(call.name)
        result = await self.evaluate(source, call.name, (case,), stop)
        if "error" in result and "stage" not in result:
            return f"error: the harness could not evaluate it: {result['error']}"
        row["verdict"] = _verdict(result)
        if result.get("measured"):
            self.last_timed, self.last_timed_source, self.last_pair = result, source, []
        text = {"compile": compile_text, "check": check_text,
                "profile": profile_text}[call.name](result, case)
        return _cap(text)

    async def _time(self, source: str, case: str, row: dict[str, Any]) -> str:
        """The paired `time` (operators/agent_timing.py); a passing candidate becomes the base
        of the next one."""
        self.times += 1
        base = self.base if self.base is not None and self.base[1] != source else None
        paired = await paired_time(self.evaluate, source, case, base,
                                   self.base_figures.get(case) if base is not None else None)
        result = paired.cand.last or {}
        if "error" in result and "stage" not in result:
            return f"error: the harness could not evaluate it: {result['error']}"
        row["verdict"] = _verdict(result)
        pair = paired_text(paired, case)
        if paired.cand.runs:
            speedup, lo, hi = paired.cand.speedup()
            row.update(speedup=round(speedup, 4), interval=[round(lo, 4), round(hi, 4)],
                       evaluations=paired.evaluations, batches=paired.cand.batches)
            ratio = paired.ratio()
            if ratio is not None:
                row.update(against=paired.base.label, ratio=round(ratio[0], 4),
                           ratio_interval=[round(ratio[1], 4), round(ratio[2], 4)],
                           paired=not paired.base.earlier)
            self.last_timed, self.last_timed_source, self.last_pair = result, source, pair
            self.base = (f"your candidate of time call {self.times}", source)
            self.base_figures = {case: (speedup, (lo, hi))}
        return "\n".join([time_text(result, case)] + pair)

    def _profile_last(self, case: str) -> str:
        return "\n".join([profile_text(self.last_timed, case)] + self.last_pair)

    def read_note(self, title: str) -> str:
        if self.index is None:
            return "error: no knowledge index in this run"
        want = title.strip().lower()
        if not want:
            return "error: give a note's title or id"
        notes = self.index.all()
        found = (next((n for n in notes if n.id.lower() == want or n.title.lower() == want), None)
                 or next((n for n in notes if want in n.title.lower()), None))
        if found is None:
            titles = "; ".join(n.title for n in notes[:12])
            return f"error: no note titled {title!r}; some titles: {titles}"
        return f"# {found.title} (id {found.id})\n{found.body.strip()}"


def _cap(text: str) -> str:
    return text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + "\n… (cut)"


def _verdict(result: dict[str, Any]) -> str:
    return "passed" if result.get("accepted") else "rejected"


def compile_text(result: dict[str, Any], case: str) -> str:
    if result.get("accepted"):
        reason = result.get("reason") or ""
        i = reason.find("; then at ")  # it loaded, and forward failed later (evaluate.py stop)
        return "ok: compiled and loaded" + ("" if i < 0 else "\n" + _reason(reason[i + 2:]))
    return f"error at stage {result.get('stage')}:\n{_reason(result.get('reason'))}"


def _reason(text: Any) -> str:
    """A verdict's reason for the model: cut, cleaned and fenced as the candidate's data."""
    text = str(text or "")
    cut = text[:REASON_CHARS] + ("\n… (cut)" if len(text) > REASON_CHARS else "")
    return quoted(cut, REASON_LABEL)


def check_text(result: dict[str, Any], case: str) -> str:
    lines = [f"verdict: {_verdict(result)}", f"stage: {result.get('stage')}",
             _reason(result.get("reason"))]
    for c in result.get("cases") or []:
        if c.get("correct") is not None:
            lines.append(f"case {c['name']}: correct {c['correct']}, max abs err "
                         f"{_num(c.get('max_abs_err'))}, max rel err "
                         f"{_num(c.get('max_rel_err'))} (of the output's largest |value|)")
    return "\n".join(lines)


def time_text(result: dict[str, Any], case: str) -> str:
    lines = [f"verdict: {_verdict(result)}", f"stage: {result.get('stage')}"]
    if not result.get("measured"):
        lines.append(_reason(result.get("reason")))
        return "\n".join(lines)
    for c in result.get("cases") or []:
        if c.get("cand_ms") is not None:
            lines.append(f"case {c['name']}: eager {_num(c.get('ref_ms'))} ms, candidate "
                         f"{_num(c.get('cand_ms'))} ms, speedup {_num(c.get('speedup'))}x")
    return "\n".join(lines)


def profile_text(result: dict[str, Any], case: str) -> str:
    """Whatever figures the result carries, generically (other fields may be added later)."""
    lines = [time_text(result, case)]
    for c in result.get("cases") or []:
        figures = {k: v for k, v in c.items() if v is not None and k not in ("name", "weight")}
        lines.append(f"case {c['name']} figures: {json.dumps(figures, default=str)}")
    for key, value in result.items():
        if key not in _NOT_FIGURES and value not in (None, {}, []):
            lines.append(f"{key}: {json.dumps(value, default=str)}")
    outside = (result.get("integrity") or {}).get("outside")
    if outside:
        lines.append(f"timed-process facts: {json.dumps(outside, default=str)}")
    return "\n".join(lines)


def _num(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
