"""Text views of runs: the `runs` list and the `show` summary."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from kernelevolve.errors import UsageError
from kernelevolve.report.compile_compare import compile_line
from kernelevolve.report.console import stdout_console
from kernelevolve.report.summary import RunSummary


def print_runs(workspace: Path, as_json: bool) -> None:
    from kernelevolve.store import Store

    if not Path(workspace, "kernelevolve.db").exists():
        raise UsageError(f"no kernelevolve workspace at {workspace}; pass --workspace DIR")
    store = Store.open(workspace)
    runs = store.list_runs()
    if as_json:
        for r in runs:
            print(json.dumps({"run_id": r.id, "status": r.status, "problem": r.problem_path,
                              "platform": r.platform, "created": r.created,
                              "evaluations": store.eval_count(r.id),
                              "outcome": (r.outcome or {}).get("message")}))
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("run", "created", "status", "problem", "evals"):
        table.add_column(col, no_wrap=True)  # ids and dates whole, whatever the width
    table.add_column("outcome", overflow="fold")
    for r in runs:
        table.add_row(r.id, time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created)), r.status,
                      Path(r.problem_path).parent.name + "/" + Path(r.problem_path).name,
                      str(store.eval_count(r.id)), Text((r.outcome or {}).get("message", "-")))
    console = stdout_console()
    console.print(table if runs else "no runs yet")
    _say_last(store, runs, console)


def _say_last(store, runs: list, console: Console) -> None:
    """When the newest run evaluated nothing, say which run `last` names instead."""
    if not runs or store.eval_count(runs[0].id):
        return
    evaluated = [r for r in runs if store.eval_count(r.id)]
    console.print(f"`last` is {evaluated[0].id}: runs with no evaluation are skipped"
                  if evaluated else "`last` names no run yet: none has evaluated anything",
                  highlight=False, soft_wrap=True)


def delete_runs(workspace: Path, run_ids: list[str], status: str | None) -> None:
    """`runs rm`: the named runs and those with `status`; one line per run deleted."""
    import shutil

    from kernelevolve.store import Store
    from kernelevolve.store.records import RUN_STATUSES

    if not Path(workspace, "kernelevolve.db").exists():
        raise UsageError(f"no kernelevolve workspace at {workspace}; pass --workspace DIR")
    if status is not None and status not in RUN_STATUSES:
        raise UsageError(f"--status {status!r}: choose one of {', '.join(RUN_STATUSES)}")
    if not run_ids and status is None:
        raise UsageError("runs rm: name the runs to delete (ID ...) or pass --status STATUS")
    store = Store.open(workspace)
    targets = [store.get_run(r).id for r in run_ids]  # every id resolved before any deletion
    targets += [r.id for r in store.list_runs() if r.status == status and r.id not in targets]
    if not targets:
        print(f"no {status} runs in {workspace}")
        return
    for run_id in dict.fromkeys(targets):
        removed = store.delete_run(run_id)
        shutil.rmtree(Path(workspace, "runs", run_id), ignore_errors=True)
        print(f"deleted run {run_id} ({removed} stored objects no other run used)")


def print_sol_cases(cases: list[dict[str, Any]], console: Console) -> None:
    """The best node's cases with their speed of light (harness/protocol/roofline.py)."""
    from kernelevolve.harness.protocol.roofline import sol_text

    for c in cases:
        if c.get("cand_ms") is None:
            continue
        line = f"  {c['name']}: {c['cand_ms']:.4g} ms"
        if c.get("speedup") is not None:
            line += f", {c['speedup']:.2f}x"
        if c.get("sol_fraction") is not None:
            line += (f", SOL {sol_text(c)} (limit {c['sol_ms']:.3g} ms; "
                     f"{c['achieved_gbs']:.3g} GB/s, {c['achieved_gflops']:.3g} GFLOP/s)")
        console.print(line, highlight=False)


def best_text(b: dict[str, Any], outcome: dict[str, Any]) -> str:
    """The re-measured figure of a completed run, else the search-time best's 95% lower bound
    (report/best_figure.py): the figure `show` can defend, labelled."""
    from kernelevolve.report.best_figure import lower_bound_text, remeasured_text

    done = remeasured_text(outcome) if outcome.get("node_id") == b["node_id"] else None
    return done or lower_bound_text(b["fitness"] if b.get("fitness") is not None
                                    else b["speedup"], b.get("interval"), b["node_id"])


def print_summary(s: RunSummary, console: Console) -> None:
    outcome = s.outcome or {}
    # Every string below that a run's data supplies is printed without markup: rationales come
    # from an LLM, reasons and messages may quote a candidate ("[green]ACCEPTED[/]" is text).
    console.print(f"[bold]run {s.run_id}[/] · {s.status} · {s.platform} · "
                  f"{escape(str(s.problem))}")
    console.print(f"outcome: {outcome.get('message', '(not finished)')}", markup=False)
    compared = compile_line(s.compile_comparison)  # once, when torch.compile was timed
    if compared:
        console.print(compared, markup=False, highlight=False)
    console.print(f"stopped: {s.stop_reason or '-'}; {s.evaluations} evaluations in "
                  f"{s.elapsed_s:.1f} s of search", markup=False)
    if s.best:
        b = s.best
        console.print(f"best: {best_text(b, outcome)}"
                      + (f", {b['sol_fraction']:.0%} of speed of light"
                         if b.get("sol_fraction") is not None else ""), markup=False)
        print_sol_cases(s.best_cases or [], console)
    from kernelevolve.report.summary import (calls_line, failure_line, measurement_notes,
                                             operators_line)

    for note in [operators_line(s.operators) or ""] + measurement_notes(s) + [
            calls_line(s.cost) or "", failure_line(s.llm_failures) or ""]:
        if note:
            console.print(note, highlight=False, soft_wrap=True, markup=False)
    from kernelevolve.store.funnel import funnel_text

    console.print("funnel: " + funnel_text(s.funnel), highlight=False)
    cost = s.cost
    dollars = "unknown (unpriced model)" if cost["dollars"] is None else f"${cost['dollars']:.4f}"
    console.print(f"LLM cost: {cost['tokens']} tokens, {dollars}")
    for model, m in cost.get("by_model", {}).items():
        usd = "unknown" if m["dollars"] is None else f"${m['dollars']:.4f}"
        console.print(f"  {model}: {m['calls']} calls ({m['failed']} failed, "
                      f"{m.get('retried', 0)} retried), "
                      f"{m['tokens_in']} in / {m['tokens_out']} out tokens, {usd}",
                      markup=False, emoji=False, highlight=False)  # "openai:m:..." is no emoji
    if s.machine:
        console.print("machine: " + "; ".join(s.machine), highlight=False, soft_wrap=True)
    if s.synth_coverage:
        console.print("synthesizer coverage:\n" + s.synth_coverage, highlight=False,
                      markup=False)
    if s.tool_traffic:  # --agent: the tool calls of each proposal
        from kernelevolve.report.tool_traffic import traffic_lines

        console.print("\n".join(["agent tool calls:"] + traffic_lines(s.tool_traffic)),
                      highlight=False, markup=False, soft_wrap=True)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="nodes", title_justify="left")
    for col in ("id", "parents", "operator", "stage", "search-time fitness", "rationale"):
        table.add_column(col)
    for n in s.nodes:
        fit = "-" if n["fitness"] is None else f"{n['fitness']:.3f}"
        table.add_row(str(n["id"]), ",".join(map(str, n["parents"])), n["operator"],
                      n["stage"] or n["status"], fit, Text((n["rationale"] or "")[:60]))
    console.print(table)
