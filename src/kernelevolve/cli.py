"""The `kernelevolve` command line."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

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


class _user_errors:
    """Print a user mistake as one line on stderr and exit 2; never a traceback."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is not None and issubclass(exc_type, KernelevolveError):
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(2)
        if exc_type is not None and issubclass(exc_type, OSError) and not isinstance(exc, BlockingIOError):
            err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
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
