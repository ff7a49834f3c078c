"""The `kernelevolve` command line."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from kernelevolve.errors import KernelevolveError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Agentic kernel optimisation with a harness you can trust.")
err_console = Console(stderr=True)


@app.callback()
def _root() -> None:
    """Agentic kernel optimisation with a harness you can trust."""


@app.command("version")
def version_cmd() -> None:
    """Print the kernelevolve version."""
    from kernelevolve import __version__

    print(__version__)


@app.command("eval")
def eval_cmd(
    problem: Path = typer.Argument(..., help="Problem module (KernelBench format)."),
    candidate: Path = typer.Argument(..., help="Candidate module defining ModelNew."),
    platform: str = typer.Option("cpu", help="Platform: cpu, cuda or rocm."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write the full result here."),
    trials: int = typer.Option(3, help="Correctness trials per case (fresh inputs each), >= 3."),
    seed: Optional[int] = typer.Option(None, help="Seed for input generation (default: fresh)."),
    baseline: str = typer.Option("eager", help="eager, or compile to also time torch.compile."),
    sandbox: Optional[str] = typer.Option(None, help="auto, bwrap, unshare or none."),
    allow_no_kernel: bool = typer.Option(False, "--allow-no-kernel",
                                         help="Accept candidates that launch no custom kernel."),
    strict: bool = typer.Option(False, "--strict",
                                help="Reject any ATen compute op inside the candidate's forward."),
) -> None:
    """Evaluate CANDIDATE against PROBLEM: exit 0 accepted, 1 rejected, 2 bad input."""
    from kernelevolve.harness.evaluate import EvalOptions, Evaluator
    from kernelevolve.harness.integrity import IntegrityPolicy
    from kernelevolve.problem import load_problem
    from kernelevolve.report.table import print_result

    console = Console()
    with _user_errors():
        options = EvalOptions(trials=trials, seed=seed, baseline=baseline,
                              integrity=IntegrityPolicy(allow_no_kernel=allow_no_kernel,
                                                        strict=strict))
        options.validate()
        if not candidate.is_file():
            raise KernelevolveError(f"{candidate}: no such candidate file; pass the path of a .py "
                                    "module that defines ModelNew")
        prob = load_problem(problem)
        with err_console.status("starting sandboxed worker") as status:
            with Evaluator(platform, options=options, sandbox_mode=sandbox) as evaluator:
                result = evaluator.evaluate(prob, candidate,
                                            progress=lambda msg: status.update(msg))
        print_result(result, console)
        if json_path:
            json_path.write_text(json.dumps(result.to_dict(), indent=2))
    raise typer.Exit(0 if result.accepted else 1)


WORKSPACE_OPT = typer.Option(Path(".kernelevolve"), "--workspace",
                             help="Workspace directory holding runs (default ./.kernelevolve).")


@app.command("optimize")
def optimize_cmd(
    problem: Path = typer.Argument(..., help="Problem module (KernelBench format)."),
    seed_candidate: Optional[list[Path]] = typer.Option(None, "--seed-candidate",
                                                        help="Starting candidate (repeatable)."),
    config_file: Optional[Path] = typer.Option(None, "--config",
                                               help="Run config file (TOML); flags override it."),
    platform: Optional[str] = typer.Option(None, help="Platform: cpu, cuda or rocm."),
    operator: Optional[list[str]] = typer.Option(None, "--operator",
                                                 help="Operator (repeatable): synth, tune, llm."),
    policy: Optional[str] = typer.Option(None, help="Selection policy: ucb, beam, greedy, random."),
    max_evals: Optional[int] = typer.Option(None, "--max-evals", help="Evaluation budget (30)."),
    max_time: Optional[float] = typer.Option(None, "--max-time", help="Wall-time budget, seconds."),
    max_cost: Optional[float] = typer.Option(None, "--max-cost", help="LLM budget, dollars."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", help="LLM budget, tokens."),
    target: Optional[float] = typer.Option(None, "--target", help="Stop at this speedup."),
    workers: Optional[int] = typer.Option(None, help="Evaluation slots: local workers (1), or "
                                                       "Ray actors (default: the cluster's)."),
    executor: Optional[str] = typer.Option(None, "--executor",
                                           help="Where evaluations run: local or ray."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address",
                                              help="Ray cluster (HOST:PORT); default: a private "
                                                   "one on 127.0.0.1."),
    seed: Optional[int] = typer.Option(None, help="Seed for the search's random choices."),
    llm: Optional[str] = typer.Option(None, "--llm", help="PROVIDER:MODEL, e.g. openai:gpt-5."),
    llm_base_url: Optional[str] = typer.Option(None, "--llm-base-url",
                                               help="OpenAI-compatible server (vLLM, Ollama...)."),
    llm_api_key_env: Optional[str] = typer.Option(None, "--llm-api-key-env",
                                                  help="Variable holding the API key."),
    language: Optional[str] = typer.Option(None, help="Language the LLM writes (cpp, triton...)."),
    notes: Optional[list[Path]] = typer.Option(None, "--notes", help="Extra knowledge notes dir."),
    workspace: Path = WORKSPACE_OPT,
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write the run summary here."),
    allow_no_kernel: bool = typer.Option(False, "--allow-no-kernel"),
    strict: bool = typer.Option(False, "--strict"),
) -> None:
    """Search for a faster kernel for PROBLEM; prints the outcome and the best kernel's path."""
    from kernelevolve.config import build_config
    from kernelevolve.run import Run

    with _user_errors():
        flags = {"platform": platform, "operators": operator, "policy": policy,
                 "max_evals": max_evals, "max_time": max_time, "max_cost": max_cost,
                 "max_tokens": max_tokens, "target": target, "workers": workers, "seed": seed,
                 "llm": llm, "llm_base_url": llm_base_url, "llm_api_key_env": llm_api_key_env,
                 "language": language, "notes": [str(n) for n in notes or []] or None,
                 "allow_no_kernel": allow_no_kernel or None, "strict": strict or None,
                 "executor": executor, "ray_address": ray_address}
        config = build_config(config_file, flags)
        run = Run.create(problem, config, seeds=list(seed_candidate or []), workspace=workspace)
        _execute(run, json_path)


@app.command("resume")
def resume_cmd(
    run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
    workspace: Path = WORKSPACE_OPT,
    force: bool = typer.Option(False, "--force", help="Continue even if the platform changed."),
    json_path: Optional[Path] = typer.Option(None, "--json", help="Write the run summary here."),
    ray_address: Optional[str] = typer.Option(None, "--ray-address",
                                              help="The Ray cluster now (a Ray run's address "
                                                   "may have changed)."),
) -> None:
    """Continue a run that was interrupted or killed."""
    from kernelevolve.errors import UsageError
    from kernelevolve.run import Run

    with _user_errors():
        run = Run.load(run_id, workspace)
        if ray_address is not None and run.config.executor != "ray":
            raise UsageError(f"--ray-address: run {run.id} evaluates with the "
                             f"{run.config.executor} executor, not ray")
        _execute(run, json_path, force=force, ray_address=ray_address)


def _execute(run, json_path: Optional[Path], force: bool = False,
             ray_address: Optional[str] = None) -> None:
    from kernelevolve.report.live import LiveView
    from kernelevolve.report.summary import run_summary

    console = Console()
    drafting = {"synth", "llm"} & set(run.config.operators)
    if not run.store.nodes(run.id)[1:]:
        if drafting:
            err_console.print(f"no seed candidate: drafting from the reference with "
                              f"{' and '.join(sorted(drafting))}, then tuning")
        else:
            err_console.print("[yellow]note:[/] no seed candidate and no drafting operator "
                              "(synth, llm): the search has nothing to start from. Pass "
                              "--seed-candidate FILE.")
    with LiveView(run, console) as view:
        outcome = run.execute(force=force, on_change=view.refresh, on_status=view.set_status,
                              ray_address=ray_address)
        view.set_status("finished")
    if not console.is_terminal:
        console.line()  # the live view's last frame ends without a newline in logs and pipes
    summary = run_summary(run)
    style = "bold green" if outcome["kind"] == "improved" else "bold yellow"
    console.print(f"[{style}]{outcome['message']}[/]")
    console.print(f"run {run.id}: {summary['evaluations']} evaluations, stopped: "
                  f"{outcome['stop_reason']}")
    best = run.workspace / "runs" / run.id / "best.py"
    if outcome.get("node_id") is not None:
        console.print(f"best kernel: {best}")
    if json_path:
        json_path.write_text(json.dumps(summary, indent=2, default=str))


@app.command("synth")
def synth_cmd(problem: Path = typer.Argument(..., help="Problem module (KernelBench format)."),
              explain: bool = typer.Option(False, "--explain",
                                           help="Print which ops are fused into which kernels."),
              language: str = typer.Option("cpp", help="cpp or triton."),
              out: Optional[Path] = typer.Option(None, "--out", help="Write the draft here.")) -> None:
    """Write a fused kernel for PROBLEM with the built-in synthesizer (no LLM needed)."""
    from kernelevolve.problem import load_problem
    from kernelevolve.synth import explain_problem, synthesize

    with _user_errors():
        load_problem(problem)  # one-line errors for bad problem files
        if language not in ("cpp", "triton"):
            raise KernelevolveError(f"--language {language!r}: choose cpp or triton")
        if explain or out is None:
            print(explain_problem(str(problem)))
        if out is not None:
            from kernelevolve.synth.capture import NotCovered

            try:
                source, _ = synthesize(str(problem), language)
            except NotCovered as exc:
                err_console.print(f"not covered: {exc}", highlight=False, soft_wrap=True)
                raise typer.Exit(1)
            out.write_text(source)
            print(f"wrote {out}")


@app.command("runs")
def runs_cmd(workspace: Path = WORKSPACE_OPT,
             as_json: bool = typer.Option(False, "--json", help="JSON lines instead of a table.")) -> None:
    """List the runs in the workspace, one line each."""
    from kernelevolve.report.runs import print_runs

    with _user_errors():
        print_runs(workspace, as_json)


@app.command("show")
def show_cmd(run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
             workspace: Path = WORKSPACE_OPT,
             as_json: bool = typer.Option(False, "--json", help="The full summary as JSON.")) -> None:
    """Outcome, best node, funnel and timings of a run."""
    from kernelevolve.report.runs import print_summary
    from kernelevolve.report.summary import run_summary
    from kernelevolve.run import Run

    with _user_errors():
        summary = run_summary(Run.load(run_id, workspace))
        if as_json:
            print(json.dumps(summary, indent=2, default=str))
        else:
            print_summary(summary, Console())


@app.command("best")
def best_cmd(run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
             out: Path = typer.Option(..., "--out", help="Where to write the best candidate."),
             workspace: Path = WORKSPACE_OPT) -> None:
    """Write the run's best candidate module to a file."""
    from kernelevolve.report.summary import run_summary
    from kernelevolve.run import Run

    with _user_errors():
        summary = run_summary(Run.load(run_id, workspace))
        if summary["best_source"] is None:
            raise KernelevolveError(f"run {summary['run_id']} has no accepted candidate yet")
        out.write_text(summary["best_source"])
        print(f"wrote node {summary['best']['node_id']} to {out}")


@app.command("report")
def report_cmd(run_id: str = typer.Argument(..., help="Run id (or a unique prefix)."),
               html: Path = typer.Option(..., "--html", help="Where to write the HTML report."),
               workspace: Path = WORKSPACE_OPT) -> None:
    """Write a self-contained HTML report: search tree, fitness trajectory, funnel, best kernel."""
    from kernelevolve.report.html import write_html
    from kernelevolve.report.summary import run_summary
    from kernelevolve.run import Run

    with _user_errors():
        write_html(run_summary(Run.load(run_id, workspace)), html)
        print(f"wrote {html}")


def _register_subapps() -> None:
    from kernelevolve.knowledge.cli import kb_app

    app.add_typer(kb_app, name="kb", help="The knowledge base: list, search, show, add, validate.")


try:
    _register_subapps()
except ImportError:  # pragma: no cover - the knowledge package ships with kernelevolve
    pass


class _user_errors:
    """Print a user mistake as one line on stderr and exit 2; never a traceback."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None and issubclass(exc_type, KernelevolveError):
            # escaped: a message may hold brackets ("pip install 'kernelevolve[ray]'")
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(2)
        if exc_type is not None and issubclass(exc_type, OSError) and not isinstance(exc, BlockingIOError):
            err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False,
                              soft_wrap=True)
            raise typer.Exit(2)
        return False


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
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
