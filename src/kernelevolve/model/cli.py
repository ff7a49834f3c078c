"""`kernelevolve profile MODEL`, `extract MODEL --top N --out DIR`, `tune-model MODEL`.

MODEL is a KernelBench-format model file (`Model`, `get_inputs`, `get_init_inputs`, optional
`CASES`: the workload). tune-model's exit codes are optimize's: 0 the model is safely faster,
3 no safe improvement, 2 bad input, 130 interrupted (the same command resumes).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from kernelevolve.interrupts import stop_signals
from kernelevolve.cli_options import (OPT_EXECUTOR, OPT_LLM_API_KEY_ENV, OPT_LLM_BASE_URL,
                                       OPT_RAY_ADDRESS)

MODEL_ARG = typer.Argument(..., metavar="MODEL", help="A KernelBench-format model file.")
JSON_OPT = typer.Option(None, "--json", metavar="PATH", help="Also write the figures here.")
HTML_OPT = typer.Option(None, "--html", metavar="PATH", help="Also write an HTML report here.")
REPS_OPT = typer.Option(5, "--reps", metavar="N", help="Forwards per case, timed (5).")
TOP_OPT = typer.Option(5, "--top", metavar="N", help="Hot spots to extract (5).")
MIN_SHARE_OPT = typer.Option(0.01, "--min-share", metavar="F",
                             help="Leave out regions under this share of the time (0.01).")
WS_OPT = typer.Option(Path(".kernelevolve"), "--workspace", metavar="DIR", show_default=False,
                      help="Workspace (./.kernelevolve).")


def _console():
    import sys

    from rich.console import Console

    # piped output (a log, CI) gets wide rows rather than rich's 80 columns of wrapped cells
    return Console(stderr=False, highlight=False, width=None if sys.stdout.isatty() else 180)


def _say(message: str) -> None:
    from kernelevolve.cli_errors import err_console

    err_console.print(message, highlight=False, markup=False, soft_wrap=True)


def _user_errors():
    from kernelevolve.cli_errors import user_errors

    return user_errors()


def _positive(name: str, value: int) -> None:
    from kernelevolve.errors import UsageError

    if value < 1:
        raise UsageError(f"{name} {value}: must be at least 1")


def profile_cmd(model: Path = MODEL_ARG, reps: int = REPS_OPT, top: int = typer.Option(
        12, "--top", metavar="N", help="Kinds shown (12)."), json_path: Optional[Path] = JSON_OPT,
        html_path: Optional[Path] = HTML_OPT) -> None:
    """Profile a model under its workload: per module instance and kind, calls, inclusive and
    exclusive share of the time, input shapes, and Amdahl's bounds."""
    from kernelevolve.model.html import page, profile_section
    from kernelevolve.model.profile import profile
    from kernelevolve.model.cases import timed_cases
    from kernelevolve.model.view import instances_table, kinds_table
    from kernelevolve.model.workload import load_model_file

    with _user_errors():
        _positive("--reps", reps)
        mf = load_model_file(model)
        prof = profile(mf.build(), timed_cases(mf), reps=reps,
                       progress=lambda case: _say(f"profiling case {case}"))
    con = _console()
    con.print(kinds_table(prof, top))
    con.print(instances_table(prof, top))
    if json_path:
        json_path.write_text(json.dumps(prof, indent=1, default=str))
    if html_path:
        html_path.write_text(page(f"kernelevolve profile: {mf.name}", profile_section(prof)))


def extract_cmd(model: Path = MODEL_ARG, top: int = TOP_OPT,
                out: Path = typer.Option(..., "--out", metavar="DIR",
                                         help="Where the problem files go."),
                min_share: float = MIN_SHARE_OPT, reps: int = REPS_OPT,
                json_path: Optional[Path] = JSON_OPT) -> None:
    """Write one problem file per hot region kind of the model (CASES from the observed
    shapes, weights from calls x time, an odd held-out case), each checked to rebuild the
    region exactly; list what was left out and why."""
    from kernelevolve.model.tune import TuneOptions, analyse
    from kernelevolve.model.view import hot_table, left_table
    from kernelevolve.model.workload import load_model_file

    with _user_errors():
        _positive("--top", top)
        _positive("--reps", reps)
        mf = load_model_file(model)
        data = analyse(mf, Path(out), TuneOptions(top=top, min_share=min_share,
                                                  profile_reps=reps), _say)
    con = _console()
    con.print(hot_table(data["hot_spots"]))
    con.print(left_table(data["left_out"], data["coverage"]))
    if json_path:
        json_path.write_text(json.dumps(data, indent=1, default=str))
    written = [h["problem"] for h in data["hot_spots"] if h.get("problem")]
    con.print(f"wrote {len(written)} problem(s) to {Path(out) / 'problems'}")
    if not written:
        raise typer.Exit(3)



def tune_model_cmd(
    model: Path = MODEL_ARG, workspace: Path = WS_OPT, top: int = TOP_OPT,
    max_evals: int = typer.Option(6, "--max-evals", metavar="N",
                                  help="Evaluations per hot spot, on average (6)."),
    min_share: float = MIN_SHARE_OPT, reps: int = typer.Option(
        15, "--reps", metavar="N", help="Whole-model repetitions, paired (15)."),
    compile_: bool = typer.Option(True, "--compile/--no-compile",
                                  help="Also time torch.compile(model)."),
    in_situ: bool = typer.Option(True, "--in-situ/--serve-all",
                                 help="Serve only the kernels faster inside the model than "
                                      "eager (timed in place), or every promoted one."),
    operator: Optional[list[str]] = typer.Option(None, "--operator", metavar="NAME",
                                                 help="Operators, as for optimize."),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N",
                                          help="Evaluation slots per search (1)."),
    executor: Optional[str] = OPT_EXECUTOR, ray_address: Optional[str] = OPT_RAY_ADDRESS,
    llm: Optional[str] = typer.Option(None, "--llm", metavar="PROVIDER:MODEL",
                                      help="The model (none: the built-in synthesizer)."),
    llm_base_url: Optional[str] = OPT_LLM_BASE_URL,
    llm_api_key_env: Optional[str] = OPT_LLM_API_KEY_ENV,
    json_path: Optional[Path] = JSON_OPT, html_path: Optional[Path] = HTML_OPT,
) -> None:
    """Profile the model, extract its hot spots, optimise each (one resumable campaign),
    promote the safe wins, patch them into the model and measure the whole model against
    eager and torch.compile."""
    from kernelevolve.config import build_config
    from kernelevolve.model.tune import TuneOptions, tune_model

    flags = {"operators": operator, "workers": workers, "executor": executor,
             "ray_address": ray_address, "llm": llm, "llm_base_url": llm_base_url,
             "llm_api_key_env": llm_api_key_env}
    with _user_errors():
        _positive("--top", top)
        _positive("--max-evals", max_evals)
        _positive("--reps", reps)
        build_config(None, {k: v for k, v in flags.items() if v is not None})  # bad flags: now
        from kernelevolve.upfront import check_memory

        check_memory(model)  # before the model is profiled and any search's worker starts
        opts = TuneOptions(top=top, max_evals=max_evals, min_share=min_share,
                           measure_reps=reps, compile=compile_, in_situ=in_situ,
                           flags=flags)
    with stop_signals():  # SIGTERM and Ctrl-C stop the same way, never lost
        try:
            with _user_errors():
                summary = tune_model(model, workspace, opts, _say, _row_note)
        except KeyboardInterrupt:
            _say("interrupted; finished work is kept; run the same command to resume")
            raise typer.Exit(130)
    _report(summary, json_path, html_path)
    raise typer.Exit(0 if summary["safe"] else 3)


def _row_note(event: str, row: dict) -> None:
    if event == "start":
        _say(f"{row['problem']}: searching (run {row.get('run_id')}, "
             f"{row.get('max_evals')} evaluations)")
    elif event.startswith("progress "):  # evaluations, finalists (bench/runner.RowProgress)
        _say(f"{row['problem']}: {event[9:]}")
    elif event in ("done", "failed", "skipped"):
        from kernelevolve.harness.protocol.text import inline

        _say(f"{row['problem']}: {event}: {inline(str(row.get('message') or row.get('reason')))}")


def _report(summary: dict, json_path: Optional[Path], html_path: Optional[Path]) -> None:
    from kernelevolve.model.html import hot_section, model_section, page, profile_section
    from kernelevolve.model.view import hot_table, kinds_table, left_table, model_table

    con = _console()
    con.print(kinds_table(summary["profile"], 8))
    con.print(hot_table(summary["hot_spots"], summary["verdicts"]))
    con.print(left_table(summary["left_out"], summary["coverage"]))
    con.print(model_table(summary["model"]))
    m = summary["model"]
    con.print(f"Amdahl's prediction from the kernels' speedups: {m['predicted_speedup']:.2f}x; "
              f"outputs match: {m['outputs_match']} (max abs error {m['max_abs_err']})")
    page_text = page(f"kernelevolve tune-model: {Path(summary['model_path']).name}",
                     model_section(m), hot_section(summary["hot_spots"], summary["verdicts"],
                                                   summary["left_out"], summary["coverage"]),
                     profile_section(summary["profile"]))
    default_html = Path(summary["state"]) / "report.html"
    default_html.write_text(page_text)
    if html_path:
        html_path.write_text(page_text)
    if json_path:
        out = {k: summary[k] for k in ("hot_spots", "verdicts", "left_out", "coverage", "model",
                                       "safe", "state", "model_path", "workspace")}
        json_path.write_text(json.dumps(out, indent=1, default=str))
    con.print(f"state: {summary['state']}; report: {default_html}")
