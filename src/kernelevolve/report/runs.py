"""Text views of runs: the `runs` list and the `show` summary."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from kernelevolve.errors import UsageError


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
    for col in ("run", "created", "status", "problem", "evals", "outcome"):
        table.add_column(col)
    for r in runs:
        table.add_row(r.id, time.strftime("%Y-%m-%d %H:%M", time.localtime(r.created)), r.status,
                      Path(r.problem_path).parent.name + "/" + Path(r.problem_path).name,
                      str(store.eval_count(r.id)), (r.outcome or {}).get("message", "-"))
    console = Console()
    if not console.is_terminal:
        console.width = 160
    console.print(table if runs else "no runs yet")


def print_summary(s: dict[str, Any], console: Console) -> None:
    outcome = s.get("outcome") or {}
    console.print(f"[bold]run {s['run_id']}[/] · {s['status']} · {s['platform']} · {s['problem']}")
    console.print(f"outcome: {outcome.get('message', '(not finished)')}")
    console.print(f"stopped: {s.get('stop_reason') or '-'}; {s['evaluations']} evaluations in "
                  f"{s['elapsed_s']:.1f} s of search")
    if s.get("best"):
        b = s["best"]
        console.print(f"best: node {b['node_id']}, {b['speedup']:.3f}x")
    funnel = s["funnel"]
    console.print("funnel: " + " -> ".join(f"{k} {funnel.get(k, 0)}" for k in (
        "proposed", "generation", "static", "load", "run", "correctness", "integrity", "timing",
        "accepted")))
    cost = s["cost"]
    dollars = "unknown (unpriced model)" if cost["dollars"] is None else f"${cost['dollars']:.4f}"
    console.print(f"LLM cost: {cost['tokens']} tokens, {dollars}")
    for model, m in cost.get("by_model", {}).items():
        usd = "unknown" if m["dollars"] is None else f"${m['dollars']:.4f}"
        console.print(f"  {model}: {m['calls']} calls ({m['failed']} failed), "
                      f"{m['tokens_in']} in / {m['tokens_out']} out tokens, {usd}")
    if s.get("synth_coverage"):
        console.print("synthesizer coverage:\n" + s["synth_coverage"], highlight=False)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, title="nodes", title_justify="left")
    for col in ("id", "parents", "operator", "stage", "fitness", "rationale"):
        table.add_column(col)
    for n in s["nodes"]:
        fit = "-" if n["fitness"] is None else f"{n['fitness']:.3f}"
        table.add_row(str(n["id"]), ",".join(map(str, n["parents"])), n["operator"],
                      n["stage"] or n["status"], fit, (n["rationale"] or "")[:60])
    console.print(table)
