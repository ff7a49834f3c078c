"""The `kernelevolve` command line."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelevolve.cli_errors import BUG_EXIT, _internal_error, _user_errors, err_console  # noqa: F401
from kernelevolve.cli_options import (  # noqa: F401
    HELP_SETTINGS,
    ALLOW_NO_KERNEL_OPT, STRICT_OPT, STAGE_TIMEOUT_OPT, QUIET_OPT,
    JSON_LINES_OPT, EVAL_PROBLEM, EVAL_CANDIDATE, EVAL_PLATFORM,
    EVAL_JSON_PATH, EVAL_TRIALS, EVAL_SEED, EVAL_BASELINE,
    EVAL_SANDBOX, EVAL_PROFILE, EVAL_TIMING_CAP, WORKSPACE_OPT, OPT_PROBLEM,
    OPT_SEED_CANDIDATE, OPT_CONFIG_FILE, OPT_PLATFORM, OPT_OPERATOR,
    OPT_POLICY, OPT_MAX_EVALS, OPT_MAX_TIME, OPT_MAX_COST,
    OPT_MAX_TOKENS, OPT_TARGET, OPT_STOP_AT_SOL, OPT_BASELINE,
    OPT_COMPILE_FIGURES, OPT_WORKERS, OPT_EXECUTOR, OPT_RAY_ADDRESS,
    OPT_SEED, OPT_LLM, OPT_LLM_BASE_URL, OPT_LLM_API_KEY_ENV,
    OPT_LLM_TIMEOUT, OPT_LLM_MAX_FAILURES, OPT_AGENT, OPT_AGENT_TURNS, OPT_LANGUAGE,
    OPT_NOTES, OPT_JSON_PATH, ID_HELP)
from kernelevolve.cli_views import best_cmd, report_cmd, runs_app, show_cmd
from kernelevolve.errors import KernelevolveError


def _plain_arguments() -> None:
    """Typer 0.29 prints an argument's annotation type after its metavar ("PROBLEM <path>"),
    and braces around a required one in the usage line; the metavar already says what to pass.
    Older typers do neither and have neither method."""
    argument = getattr(getattr(typer, "core", None), "TyperArgument", None)
    if argument is None:
        return
    if hasattr(argument, "display_type_rich"):
        argument.display_type_rich = lambda self, ctx=None: None
    if hasattr(argument, "_usage_display_name"):
        def usage(self) -> str:
            name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
            return name + ("..." if self.nargs != 1 else "")

        argument._usage_display_name = usage


_plain_arguments()
# Plain click help: metavars that read as values (PATH, N), flags without one, wrapped to the
# terminal. (Rich help printed annotation types, "<list[Path]>", in a column of their own.)
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  context_settings=HELP_SETTINGS, rich_markup_mode=None,
                  help="Agentic kernel optimisation with a harness you can trust.")


def _print_version(value: bool) -> None:
    if value:
        from kernelevolve import __version__

        print(__version__)
        raise typer.Exit(0)


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                       help="Print the kernelevolve version and exit.")) -> None:
    """Agentic kernel optimisation with a harness you can trust.

    Defaults are shown in parentheses; -h on any command shows its options.
    """


@app.command("version")
def version_cmd() -> None:
    """Print the kernelevolve version."""
    from kernelevolve import __version__

    print(__version__)


@app.command("eval")
def eval_cmd(
    problem: Path = EVAL_PROBLEM,
    candidate: Path = EVAL_CANDIDATE,
    platform: str = EVAL_PLATFORM,
    json_path: Optional[Path] = EVAL_JSON_PATH,
    trials: int = EVAL_TRIALS,
    seed: Optional[int] = EVAL_SEED,
    baseline: str = EVAL_BASELINE,
    sandbox: Optional[str] = EVAL_SANDBOX,
    allow_no_kernel: bool = ALLOW_NO_KERNEL_OPT,
    strict: bool = STRICT_OPT,
    stage_timeout: Optional[float] = STAGE_TIMEOUT_OPT,
    profile: bool = EVAL_PROFILE,
    timing_cap: float = EVAL_TIMING_CAP,
) -> None:
    """Evaluate CANDIDATE against PROBLEM: exit 0 accepted, 1 rejected, 2 bad input."""
    from kernelevolve.harness.driver.evaluate import EvalOptions, Evaluator
    from kernelevolve.harness.gates.integrity import IntegrityPolicy
    from kernelevolve.report.table import print_result
    from kernelevolve.report.timing_notes import eval_timing, print_eval_notes

    console = Console()
    with _user_errors():
        options = EvalOptions(trials=trials, seed=seed, baseline=baseline,
                              integrity=IntegrityPolicy(allow_no_kernel=allow_no_kernel,
                                                        strict=strict),
                              timing=eval_timing(timing_cap))
        options.validate()
        cand, prob, limits = _eval_inputs(problem, candidate, platform, stage_timeout)
        from kernelevolve.report.steps import Steps

        # a spinner on a terminal, a line per stage in a log (no worker until static passes)
        with Steps(err_console, "static gate", prefix="eval: ") as status:
            from kernelevolve.target import resolve

            with Evaluator(resolve(platform), options=options, sandbox_mode=sandbox,
                           limits=limits) as evaluator:
                result = evaluator.evaluate(prob, cand,
                                            progress=lambda msg: status.update(msg))
        print_result(result, console)
        print_eval_notes(result, options.timing, console)
        if profile:
            from kernelevolve.harness.gates.profile_view import profile_lines

            for line in profile_lines(result):
                console.print(line, markup=False, highlight=False)
        if json_path:
            json_path.write_text(json.dumps(result.to_dict(), indent=2))
    raise typer.Exit(0 if result.accepted else 1)


def _eval_inputs(problem: Path, candidate: Path, platform: str, stage_timeout: Optional[float]):
    """`eval`'s checks before any worker: candidate, problem, memory (only for a candidate
    the static gate passes: a rejection starts no worker), stage limit."""
    from kernelevolve.candidate_file import read_candidate
    from kernelevolve.harness.driver.pool import Limits
    from kernelevolve.problem import load_problem
    from kernelevolve.upfront import check_memory, static_report

    cand = read_candidate(candidate)  # checked and read here, once
    prob = load_problem(problem)
    if static_report(cand.source, cand.name, platform).ok:
        check_memory(prob.path)  # before any worker starts, as `optimize` and `bench` do
    if stage_timeout is not None and not stage_timeout > 0:
        raise KernelevolveError(f"--stage-timeout {stage_timeout}: must be a positive "
                                "number of seconds")
    return cand, prob, Limits(stage_timeout_s=stage_timeout) if stage_timeout else None


@app.command("optimize")
def optimize_cmd(
    problem: Path = OPT_PROBLEM,
    seed_candidate: Optional[list[Path]] = OPT_SEED_CANDIDATE,
    config_file: Optional[Path] = OPT_CONFIG_FILE,
    platform: Optional[str] = OPT_PLATFORM,
    operator: Optional[list[str]] = OPT_OPERATOR,
    policy: Optional[str] = OPT_POLICY,
    max_evals: Optional[int] = OPT_MAX_EVALS,
    max_time: Optional[float] = OPT_MAX_TIME,
    max_cost: Optional[float] = OPT_MAX_COST,
    max_tokens: Optional[int] = OPT_MAX_TOKENS,
    target: Optional[float] = OPT_TARGET,
    stop_at_sol: Optional[float] = OPT_STOP_AT_SOL,
    baseline: Optional[str] = OPT_BASELINE,
    compile_figures: Optional[bool] = OPT_COMPILE_FIGURES,
    workers: Optional[int] = OPT_WORKERS,
    executor: Optional[str] = OPT_EXECUTOR,
    ray_address: Optional[str] = OPT_RAY_ADDRESS,
    seed: Optional[int] = OPT_SEED,
    llm: Optional[str] = OPT_LLM,
    llm_base_url: Optional[str] = OPT_LLM_BASE_URL,
    llm_api_key_env: Optional[str] = OPT_LLM_API_KEY_ENV,
    llm_timeout: Optional[float] = OPT_LLM_TIMEOUT,
    llm_max_failures: Optional[int] = OPT_LLM_MAX_FAILURES,
    agent: bool = OPT_AGENT,
    agent_turns: Optional[int] = OPT_AGENT_TURNS,
    language: Optional[str] = OPT_LANGUAGE,
    notes: Optional[list[Path]] = OPT_NOTES,
    workspace: Path = WORKSPACE_OPT,
    json_path: Optional[Path] = OPT_JSON_PATH,
    allow_no_kernel: bool = ALLOW_NO_KERNEL_OPT,
    strict: bool = STRICT_OPT,
    stage_timeout: Optional[float] = STAGE_TIMEOUT_OPT,
    quiet: bool = QUIET_OPT,
    json_lines: bool = JSON_LINES_OPT,
) -> None:
    """Search for a faster kernel for PROBLEM; prints the outcome and the best kernel's path.

    Progress: the live panel on a terminal, one line per evaluation elsewhere. Exit codes: 0
    improved, 2 bad usage, 3 no safe improvement, 4 nothing to search from, 5 stopped by
    failures, 130 interrupted.
    """
    flags = _run_flags(dict(locals()))  # the arguments only: nothing else is bound yet
    from kernelevolve.cli_run import execute, view_mode
    from kernelevolve.config import build_config
    from kernelevolve.run import Run

    with _user_errors():
        config = build_config(config_file, flags)
        run = Run.create(problem, config, seeds=list(seed_candidate or []), workspace=workspace)
        execute(run, json_path, view=view_mode(quiet, json_lines))


_NOT_FLAGS = ("problem", "seed_candidate", "config_file", "workspace", "json_path", "quiet",
              "json_lines")


def _run_flags(given: dict) -> dict:
    """optimize's arguments as config flags (None: not given, so the config file's or the
    default applies)."""
    flags = {k: v for k, v in given.items() if k not in _NOT_FLAGS}
    flags["operators"] = flags.pop("operator")
    flags["notes"] = [str(n) for n in flags["notes"] or []] or None
    for switch in ("agent", "allow_no_kernel", "strict"):  # off means "not given"
        flags[switch] = flags[switch] or None
    return flags


@app.command("resume")
def resume_cmd(
    run_id: str = typer.Argument(..., metavar="ID", help=ID_HELP),
    workspace: Path = WORKSPACE_OPT,
    force: bool = typer.Option(False, "--force",
                               help="Continue even if the problem or the platform changed."),
    json_path: Optional[Path] = typer.Option(None, "--json", metavar="PATH",
                                             help="Write the run summary here."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", metavar="HOST:PORT",
                                              help="The Ray cluster now (a Ray run's address "
                                                   "may have changed)."),
    quiet: bool = QUIET_OPT,
    json_lines: bool = JSON_LINES_OPT,
) -> None:
    """Continue a run that was interrupted or killed (exit codes as for optimize)."""
    from kernelevolve.cli_run import execute, view_mode
    from kernelevolve.errors import UsageError
    from kernelevolve.run import Run

    with _user_errors():
        run = Run.load(run_id, workspace)
        if ray_address is not None and run.config.executor != "ray":
            raise UsageError(f"--ray-address: run {run.id} evaluates with the "
                             f"{run.config.executor} executor, not ray")
        execute(run, json_path, force=force, ray_address=ray_address,
                view=view_mode(quiet, json_lines))


@app.command("synth")
def synth_cmd(problem: Path = typer.Argument(..., metavar="PROBLEM",
                                             help="Problem module (KernelBench format)."),
              explain: bool = typer.Option(False, "--explain",
                                           help="Print which ops are fused into which kernels."),
              language: Optional[str] = typer.Option(
                  None, metavar="NAME", help="A language the synthesizer writes (the first: "
                                             "see `kernelevolve targets`)."),
              out: Optional[Path] = typer.Option(None, "--out", metavar="PATH",
                                                 help="Write the draft here.")) -> None:
    """Write a fused kernel for PROBLEM with the built-in synthesizer (no LLM needed)."""
    from kernelevolve.problem import load_problem
    from kernelevolve.synth import explain_problem, synthesize

    with _user_errors():
        load_problem(problem)  # one-line errors for bad problem files
        from kernelevolve.synth.api import languages

        written = languages()
        language = language or written[0]
        if language not in written:
            raise KernelevolveError(f"--language {language!r}: choose {' or '.join(written)}")
        if explain or out is None:
            print(explain_problem(str(problem)))
        if out is not None:
            from kernelevolve.synth.api import not_covered_text
            from kernelevolve.synth.capture import NotCovered

            try:
                source, _ = synthesize(str(problem), language)
            except NotCovered as exc:
                err_console.print(not_covered_text(exc), highlight=False, soft_wrap=True)
                raise typer.Exit(1)
            out.write_text(source)
            print(f"wrote {out}")


@app.command("targets")
def targets_cmd(as_json: bool = typer.Option(False, "--json", help="JSON instead of text.")
                ) -> None:
    """List the registered platforms and languages: built-in, and from installed plug-ins
    (entry points kernelevolve.platforms / kernelevolve.languages)."""
    from kernelevolve.plugins import describe

    with _user_errors():
        found = describe()
    if as_json:
        print(json.dumps(found, indent=2))
        return
    print("platforms:")
    for row in found["platforms"]:
        what = row.get("error") or (
            f"{row['summary']} [device {row['device']}; runs {', '.join(row['languages'])}; "
            f"times {', '.join(row['measured']) or 'none'}; default {row['default_language']}]")
        print(f"  {row['name']:<10} {what} ({row['source']})")
    print("languages:")
    for row in found["languages"]:
        print(f"  {row['name']:<10} {row.get('error') or row['summary']} ({row['source']})")


app.add_typer(runs_app, name="runs")  # the run-reading commands: cli_views.py
app.command("show")(show_cmd)
app.command("best")(best_cmd)
app.command("report")(report_cmd)


def _register_subapps() -> None:
    from kernelevolve.knowledge.cli import kb_app

    app.add_typer(kb_app, name="kb", help="The knowledge base: list, search, show, add, validate.")
    from kernelevolve.registry.cli import promote_cmd, registry_app

    app.add_typer(registry_app, name="registry",
                  help="Promoted kernels: list, show, promote, set-state, rollback, stats, "
                       "revalidate, import.")
    app.command("promote")(promote_cmd)
    from kernelevolve.share.cli import export_cmd, import_cmd, verify_cmd

    app.command("export")(export_cmd)
    app.command("verify")(verify_cmd)
    registry_app.command("import")(import_cmd)
    from kernelevolve.bench.cli import bench_cmd

    app.command("bench")(bench_cmd)
    from kernelevolve.model.cli import extract_cmd, profile_cmd, tune_model_cmd

    app.command("profile")(profile_cmd)
    app.command("extract")(extract_cmd)
    app.command("tune-model")(tune_model_cmd)


try:
    _register_subapps()
except ImportError:  # pragma: no cover - the knowledge package ships with kernelevolve
    pass


def _click_exceptions() -> list:
    """Typer >= 0.26 vendors click as typer._click; older ones use click itself."""
    modules = []
    for name in ("typer._click.exceptions", "click.exceptions"):
        try:
            modules.append(__import__(name, fromlist=["UsageError"]))
        except ImportError:
            continue
    return modules


def main() -> None:
    try:
        _main()
    except BrokenPipeError:  # `kernelevolve ... | head`: the reader left; not an error of ours
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)


def _main() -> None:
    mods = _click_exceptions()
    no_args = tuple(m.NoArgsIsHelpError for m in mods if hasattr(m, "NoArgsIsHelpError"))
    usage = tuple(m.UsageError for m in mods if hasattr(m, "UsageError"))
    abort = tuple(m.Abort for m in mods if hasattr(m, "Abort"))
    try:
        code = app(standalone_mode=False)
    except no_args as exc:  # bare `kernelevolve`: show the help
        print(exc.ctx.get_help() if exc.ctx else "")
        sys.exit(0)
    except usage as exc:
        # One line naming the problem and where to look; click's boxed usage is noisier.
        where = f"{exc.ctx.command_path} --help" if exc.ctx else "kernelevolve --help"
        err_console.print(f"[bold red]error:[/] {exc.format_message()} (see `{where}`)",
                          highlight=False, soft_wrap=True)
        sys.exit(2)
    except abort:
        err_console.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        err_console.print("interrupted")
        sys.exit(130)
    except BrokenPipeError:
        raise                               # main() ends quietly
    except KernelevolveError as exc:        # raised outside a command's _user_errors
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False,
                          soft_wrap=True)
        sys.exit(exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - the last resort: a bug of ours, said as one
        _internal_error(exc)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
