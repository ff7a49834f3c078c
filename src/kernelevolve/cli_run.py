"""`optimize` and `resume` on the command line: the progress view (live panel or lines), the
final text, the resume hint on Ctrl-C / SIGTERM, and the exit code (exit_codes.py)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelevolve.interrupts import stop_signals

if TYPE_CHECKING:  # pragma: no cover - the summary is imported where a run has finished
    from kernelevolve.report.summary import RunSummary

err_console = Console(stderr=True)


def view_mode(quiet: bool, json_lines: bool) -> str:
    from kernelevolve.errors import UsageError

    if quiet and json_lines:
        raise UsageError("--quiet and --json-lines: choose one")
    return "quiet" if quiet else "json" if json_lines else "auto"


def progress_view(run, console: Console, mode: str):
    """The live panel on a terminal; elsewhere (a log, a pipe, CI) plain lines as things happen."""
    from kernelevolve.report.lines import LineProgress
    from kernelevolve.report.live import LiveView

    if mode == "auto" and console.is_terminal:
        return LiveView(run, console)
    return LineProgress(run, json_lines=mode == "json", quiet=mode == "quiet")


def execute(run, json_path: Optional[Path], force: bool = False,
             ray_address: Optional[str] = None, view: str = "auto") -> None:
    from kernelevolve import exit_codes
    from kernelevolve.errors import ExecutorError
    from kernelevolve.report.summary import run_summary

    console = Console()
    if not console.is_terminal:
        console.soft_wrap = True  # a log keeps whole lines: no 80-column hard wraps
    _say_how_it_starts(run)
    hint = f"kernelevolve resume {run.id}" + (
        "" if run.workspace == Path(".kernelevolve") else f" --workspace {run.workspace}")
    with stop_signals():  # SIGTERM and Ctrl-C stop the same way, never lost
        try:
            with progress_view(run, console, view) as progress:
                outcome = run.execute(force=force, on_change=progress.refresh,
                                      on_status=progress.set_status, ray_address=ray_address)
                progress.set_status("finished")
        except KeyboardInterrupt:
            err_console.print(f"interrupted; every finished evaluation is kept; resume with "
                              f"`{hint}`", highlight=False, soft_wrap=True)
            raise typer.Exit(exit_codes.INTERRUPTED)
        except ExecutorError as exc:
            if getattr(run, "live_graph", None) is None:
                raise  # could not start (no cluster): a one-line error, exit 2, resumable
            err_console.print(f"[bold red]stopped by failures:[/] {escape(str(exc))}. Every "
                              f"finished evaluation is kept; resume with `{hint}`", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(exit_codes.FAILED)
    summary = run_summary(run)
    if view == "json":
        print(json.dumps({"event": "outcome", **(run.outcome or {}),
                          "exit_code": exit_codes.for_outcome(outcome),
                          "best_kernel": str(run.best_path()) if run.best_path() else None,
                          "llm_failures": summary.llm_failures}, default=str))
    else:
        _print_outcome(run, outcome, summary, console)
    if json_path:
        json_path.write_text(summary.to_json())
    raise typer.Exit(exit_codes.for_outcome(outcome))


def _say_how_it_starts(run) -> None:
    """Without a seed, say which operator drafts the first candidate (or that none can)."""
    if run.store.nodes(run.id)[1:]:
        return
    drafting = {"synth", "llm"} & set(run.config.operators)
    if drafting:
        rest = [op for op in run.config.operators if op not in drafting]
        err_console.print(f"no seed candidate: drafting from the reference with "
                          f"{' and '.join(sorted(drafting))}"
                          + (f", then {', '.join(rest)}" if rest else ""))
    else:
        err_console.print("[yellow]note:[/] no seed candidate and no drafting operator "
                          "(synth, llm): the search has nothing to start from. Pass "
                          "--seed-candidate FILE.")


def _print_outcome(run, outcome: dict, summary: "RunSummary", console: Console) -> None:
    from kernelevolve.report.compile_compare import compile_line
    from kernelevolve.report.summary import calls_line, failure_line, measurement_notes

    style = {"improved": "bold green", "stopped_by_failures": "bold red"}.get(
        outcome["kind"], "bold yellow")
    if outcome["kind"] == "nothing_to_search":  # one line: why, and what to pass instead
        console.print(f"[{style}]{escape(outcome['message'])}[/] (run {run.id})", soft_wrap=True)
    else:
        console.print(f"[{style}]{escape(outcome['message'])}[/]", soft_wrap=True)
        compared = compile_line(summary.compile_comparison)  # once, when torch.compile was timed
        if compared:
            console.print(compared, soft_wrap=True, markup=False, highlight=False)
        console.print(f"run {run.id}: {summary.evaluations} evaluations, stopped: "
                      f"{escape(outcome['stop_reason'])}", soft_wrap=True)
    for note in measurement_notes(summary):
        console.print(escape(note), soft_wrap=True, style="dim" if not note.startswith(
            "warning") else "yellow")
    calls = calls_line(summary.cost)
    if calls:
        console.print(escape(calls), soft_wrap=True)
    failures = failure_line(summary.llm_failures)
    if failures:
        console.print(f"[bold red]{escape(failures)}[/]", soft_wrap=True)
    best = run.best_path()
    if best is not None:
        console.print(f"best kernel: {best}", soft_wrap=True)
    elif outcome.get("node_id") is not None:
        node = run.workspace / "runs" / run.id / "nodes" / f"node{outcome['node_id']}.py"
        console.print(f"best candidate, not a safe improvement: {node}", soft_wrap=True)

