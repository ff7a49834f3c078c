"""Rich tables for evaluation results."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernelevolve.types import EvalResult


def _fmt(value: float | None, spec: str = ".4g", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def case_table(result: EvalResult) -> Table:
    show_compile = any(c.compile_ms is not None for c in result.cases)
    table = Table(title=f"{result.problem.split('/')[-2] if '/' in result.problem else result.problem}"
                        f" · {result.platform} · {result.language}", title_justify="left")
    for col in ("case", "weight", "correct", "max abs err", "max rel err", "eager ms"):
        table.add_column(col, justify="left" if col == "case" else "right")
    if show_compile:
        table.add_column("compile ms", justify="right")
    table.add_column("candidate ms", justify="right")
    table.add_column("speedup (95% CI)", justify="right")
    for c in result.cases:
        correct = {True: Text("yes", "green"), False: Text("NO", "bold red"), None: Text("-")}[c.correct]
        speed = "-" if c.speedup is None else f"{c.speedup:.2f}x"
        if c.speedup_ci:
            speed += f" [{c.speedup_ci[0]:.2f}, {c.speedup_ci[1]:.2f}]"
        row = [c.name + (" (held out)" if c.held_out else ""), f"{c.weight:g}", correct,
               _fmt(c.max_abs_err, ".2e"), _fmt(c.max_rel_err, ".2e"), _fmt(c.ref_ms, ".4f")]
        if show_compile:
            row.append(_fmt(c.compile_ms, ".4f"))
        row += [_fmt(c.cand_ms, ".4f"), speed]
        table.add_row(*row)
    return table


def verdict_text(result: EvalResult) -> Text:
    if result.accepted:
        head = Text("ACCEPTED", "bold green")
        if result.speedup is not None:
            head.append(f"  {result.speedup:.3f}x weighted speedup over eager", "green")
            if result.compile_speedup is not None:
                head.append(f", {result.compile_speedup:.3f}x over torch.compile", "green")
        else:
            head.append("  (correct, not timed on this platform)", "yellow")
    else:
        head = Text(f"REJECTED at {result.stage}", "bold red")
    head.append("\n" + result.reason)
    return head


def print_result(result: EvalResult, console: Console | None = None) -> None:
    console = console or Console()
    if result.stage != "static":
        console.print(case_table(result))
    console.print(verdict_text(result))
    for warning in result.sandbox.warnings:
        console.print(Text(f"warning: {warning}", "bold yellow"))
