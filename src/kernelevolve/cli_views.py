"""The commands that read a workspace's runs: `runs` (and `runs rm`), `show`, `best`, `report`.
cli.py registers them on the `kernelevolve` app."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from kernelevolve.cli_errors import _user_errors
from kernelevolve.cli_options import HELP_SETTINGS, ID_HELP, WORKSPACE_OPT
from kernelevolve.errors import KernelevolveError


runs_app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                       context_settings=HELP_SETTINGS, rich_markup_mode=None,
                       help="List the runs in the workspace, or delete some (`runs rm`).")


@runs_app.callback(invoke_without_command=True)
def runs_cmd(ctx: typer.Context, workspace: Path = WORKSPACE_OPT,
             as_json: bool = typer.Option(False, "--json", help="JSON lines instead of a table.")) -> None:
    """List the runs in the workspace, one line each."""
    from kernelevolve.report.runs import print_runs

    if ctx.invoked_subcommand is not None:
        return
    with _user_errors():
        print_runs(workspace, as_json)


@runs_app.command("rm")
def runs_rm_cmd(run_ids: Optional[list[str]] = typer.Argument(
                    None, metavar="[ID]...", help="Run ids (or unique prefixes) to delete."),
                status: Optional[str] = typer.Option(
                    None, "--status", metavar="STATUS",
                    help="Also delete every run with this status: interrupted, failed, running "
                         "or completed."),
                workspace: Path = WORKSPACE_OPT) -> None:
    """Delete runs: their nodes, evaluations, events, stored objects no other run uses, and
    their folder under runs/."""
    from kernelevolve.report.runs import delete_runs

    with _user_errors():
        delete_runs(workspace, list(run_ids or []), status)


def show_cmd(run_id: str = typer.Argument(..., metavar="ID", help=ID_HELP),
             workspace: Path = WORKSPACE_OPT,
             as_json: bool = typer.Option(False, "--json", help="The full summary as JSON.")) -> None:
    """Outcome, best node, funnel and timings of a run."""
    from kernelevolve.report.console import stdout_console
    from kernelevolve.report.runs import print_summary
    from kernelevolve.report.summary import run_summary
    from kernelevolve.run import Run

    with _user_errors():
        summary = run_summary(Run.load(run_id, workspace))
        if as_json:
            print(summary.to_json())
        else:
            print_summary(summary, stdout_console())  # wide in a log or pipe: words whole


def best_cmd(run_id: str = typer.Argument(..., metavar="ID", help=ID_HELP),
             out: Path = typer.Option(..., "--out", metavar="PATH",
                                      help="Where to write the best candidate."),
             workspace: Path = WORKSPACE_OPT) -> None:
    """Write the run's best candidate module to a file."""
    from kernelevolve.report.summary import run_summary
    from kernelevolve.run import Run

    with _user_errors():
        summary = run_summary(Run.load(run_id, workspace))
        if summary.best_source is None:
            raise KernelevolveError(f"run {summary.run_id} has no accepted candidate yet")
        out.write_text(summary.best_source)
        print(f"wrote node {summary.best['node_id']} to {out}")


def report_cmd(run_id: str = typer.Argument(..., metavar="ID", help=ID_HELP),
               html: Path = typer.Option(..., "--html", metavar="PATH",
                                         help="Where to write the HTML report."),
               workspace: Path = WORKSPACE_OPT) -> None:
    """Write a self-contained HTML report: search tree, fitness trajectory, funnel, best kernel."""
    from kernelevolve.report.html import write_html
    from kernelevolve.report.summary import run_summary
    from kernelevolve.run import Run

    with _user_errors():
        write_html(run_summary(Run.load(run_id, workspace)), html)
        print(f"wrote {html}")
