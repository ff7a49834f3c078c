"""`kernelevolve bench PATH...`: a folder of problems as one resumable campaign.

Prints one line per problem as it finishes, then the table and the suite's figures; writes
WORKSPACE/benches/NAME.json (the state, updated after every problem) and NAME.html. Ctrl-C or
SIGTERM stops it (exit 130); the same command again resumes where it stopped.
"""
from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any, Optional

import typer


def _user_errors():
    from kernelevolve.cli import _user_errors as handler

    return handler()


def bench_cmd(
    paths: list[Path] = typer.Argument(..., metavar="PATH",
                                       help="Problem files, or folders of them."),
    name: Optional[str] = typer.Option(None, "--name", metavar="NAME",
                                       help="Campaign name (derived from the problem list); "
                                            "the same name resumes it."),
    workspace: Path = typer.Option(Path(".kernelevolve"), "--workspace", metavar="DIR",
                                   show_default=False, help="Workspace (./.kernelevolve)."),
    max_evals: int = typer.Option(6, "--max-evals", metavar="N",
                                  help="Evaluations per problem (6)."),
    max_time: Optional[float] = typer.Option(None, "--max-time", metavar="SECONDS",
                                             help="Search time per problem (none)."),
    total_time: Optional[float] = typer.Option(None, "--total-time", metavar="SECONDS",
                                               help="Stop starting problems after this long "
                                                    "(none); the rest stay pending."),
    operator: Optional[list[str]] = typer.Option(None, "--operator", metavar="NAME",
                                                 help="Operators, as for optimize (synth, "
                                                      "tune; with --llm: llm, tune)."),
    platform: Optional[str] = typer.Option(None, "--platform", metavar="NAME",
                                           help="cpu, cuda or rocm (cpu)."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N",
                                          help="Evaluation slots per problem (1)."),
    executor: Optional[str] = typer.Option(None, "--executor", metavar="NAME",
                                           help="local or ray (local)."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", metavar="HOST:PORT"),
    llm: Optional[str] = typer.Option(None, "--llm", metavar="PROVIDER:MODEL",
                                      help="The model (none: the built-in synthesizer)."),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url", metavar="URL"),
    llm_api_key_env: Optional[str] = typer.Option(None, "--llm-api-key-env", metavar="VAR"),
    compile_baseline: bool = typer.Option(True, "--compile/--no-compile",
                                          help="Time torch.compile once per problem, for fast_p "
                                               "over it (on; one inductor compile per case)."),
    json_path: Optional[Path] = typer.Option(None, "--json", metavar="PATH",
                                             help="Also write the rows and figures here."),
    html_path: Optional[Path] = typer.Option(None, "--html", metavar="PATH",
                                             help="Also write the HTML report here."),
) -> None:
    """Optimize every problem of a folder in turn (resumable), then report fast_p over eager
    and over torch.compile, the correctness rate and the search cost."""
    from kernelevolve.bench.campaign import Campaign, default_name
    from kernelevolve.bench.suite import find_problems
    from kernelevolve.cli import err_console

    with _user_errors():
        problems = find_problems(list(paths))
        flags: dict[str, Any] = {
            "max_evals": max_evals, "max_time": max_time, "operators": operator,
            "platform": platform, "workers": workers, "executor": executor,
            "ray_address": ray_address, "llm": llm, "llm_base_url": llm_base_url,
            "llm_api_key_env": llm_api_key_env, "time_compile": compile_baseline,
            "compile_figures": compile_baseline}
        flags = {k: v for k, v in flags.items() if v is not None}
        from kernelevolve.config import build_config

        build_config(None, flags)  # a bad flag is one line now, not at the first problem
        camp, resumed = Campaign.open(Path(workspace), name or default_name(problems),
                                      problems, flags)
        if resumed:
            flags = camp.data["settings"]
            done = sum(1 for r in camp.rows if r["status"] in ("done", "skipped", "failed"))
            err_console.print(f"resuming bench {camp.name}: {done} of {len(camp.rows)} "
                              "problems finished", highlight=False)
        _run(camp, Path(workspace), flags, total_time)
        _report(camp, json_path, html_path)


def _run(camp: Any, workspace: Path, flags: dict[str, Any], total_time: float | None) -> None:
    from kernelevolve.bench.runner import run_campaign
    from kernelevolve.cli import err_console

    total = len(camp.rows)

    def say(event: str, row: dict[str, Any]) -> None:
        i = camp.rows.index(row) + 1
        if event == "start":
            err_console.print(f"[{i}/{total}] {row['problem']}: searching (run {row['run_id']})",
                              highlight=False, soft_wrap=True)
        elif event in ("done", "skipped", "failed"):
            what = row.get("message") if event == "done" else f"{event}: {row.get('reason')}"
            err_console.print(f"[{i}/{total}] {row['problem']}: {what}", highlight=False,
                              soft_wrap=True)

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        run_campaign(camp, workspace, flags, total_time=total_time, say=say)
    except KeyboardInterrupt:
        camp.save()
        err_console.print(f"interrupted; finished problems are kept; run the same command to "
                          f"resume bench {camp.name}", highlight=False, soft_wrap=True)
        raise typer.Exit(130)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _report(camp: Any, json_path: Optional[Path], html_path: Optional[Path]) -> None:
    from kernelevolve.bench.metrics import summary
    from kernelevolve.bench.report import html_page, summary_lines, table_rows

    rows = camp.rows
    s = summary(rows)
    table = table_rows(rows)
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for row in table:
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())
    for line in summary_lines(s):
        typer.echo(line)
    if camp.data.get("stopped"):
        typer.echo(f"stopped: {camp.data['stopped']}; run the same command to go on")
    page = html_page(camp.data, s)
    out = {"name": camp.name, "rows": rows, "summary": s, "stopped": camp.data.get("stopped")}
    camp.path.with_suffix(".html").write_text(page)
    if html_path:
        html_path.write_text(page)
    if json_path:
        json_path.write_text(json.dumps(out, indent=2, default=str))
    typer.echo(f"state: {camp.path}; report: {camp.path.with_suffix('.html')}")


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt
