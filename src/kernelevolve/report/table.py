"""Rich tables for evaluation results."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from kernelevolve.harness.protocol.roofline import sol_text
from kernelevolve.types import CaseResult, EvalResult

LOG_LINES = 4  # of each stream the candidate printed, under the verdict


def _fmt(value: float | None, spec: str = ".4g", unit: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{unit}"


def _ci(c: CaseResult) -> str:
    return f"{c.speedup_ci[0]:.2f}-{c.speedup_ci[1]:.2f}" if c.speedup_ci else "-"


def _over(base_ms: float | None, cand_ms: float | None) -> float | None:
    return base_ms / cand_ms if base_ms is not None and cand_ms else None


def timing_columns(result: EvalResult) -> list[tuple[str, Callable[[CaseResult], str]]]:
    """The per-case timing columns, led by the baseline fitness uses: with --baseline compile,
    torch.compile's ms and the speedup over it first (no per-case interval is kept for it),
    then eager's ms, speedup and interval as the secondary figures."""
    compile_ms = ("compile ms", lambda c: _fmt(c.compile_ms, ".3f"))
    eager_ms = ("eager ms", lambda c: _fmt(c.ref_ms, ".3f"))
    cand_ms = ("cand ms", lambda c: _fmt(c.cand_ms, ".3f"))
    timed_compile = any(c.compile_ms is not None for c in result.cases)
    if timed_compile and result.baseline == "compile":
        return [compile_ms, cand_ms,
                ("speedup", lambda c: _fmt(_over(c.compile_ms, c.cand_ms), ".2f", "x")),
                eager_ms, ("over eager", lambda c: _fmt(c.speedup, ".2f", "x")),
                ("eager 95% CI", _ci)]
    return [eager_ms, *([compile_ms] if timed_compile else []), cand_ms,
            ("speedup", lambda c: _fmt(c.speedup, ".2f", "x")), ("95% CI", _ci)]


def case_table(result: EvalResult) -> Table:
    show_sol = any(c.sol_fraction is not None for c in result.cases)
    title = Path(result.problem).parent.name if Path(result.problem).stem == "problem" \
        else Path(result.problem).stem
    table = Table(title=f"{title} · {result.platform} · {result.language}", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1))
    table.add_column("case", overflow="fold")
    timing = timing_columns(result)
    for col in ("w", "ok", "abs err", "rel err", *(name for name, _ in timing),
                *(["SOL"] if show_sol else [])):
        table.add_column(col, justify="right", no_wrap=True)
    for c in result.cases:
        correct = {True: Text("yes", "green"), False: Text("NO", "bold red"), None: Text("-")}[c.correct]
        row = [c.name + (" (held out)" if c.held_out else ""), f"{c.weight:g}", correct,
               _fmt(c.max_abs_err, ".1e"), _fmt(c.max_rel_err, ".1e"),
               *(cell(c) for _, cell in timing)]
        if show_sol:  # fraction of the machine's speed of light (harness/protocol/roofline.py)
            row.append(sol_text(c))
        table.add_row(*row)
    return table


def headline(result: EvalResult) -> str:
    """"S x weighted speedup over B, T x over C": B is the baseline fitness uses (torch.compile
    with --baseline compile, when it was timed), so the headline leads with the judged figure."""
    eager = (result.speedup, "eager")
    comp = (result.compile_speedup, "torch.compile")
    order = [comp, eager] if result.baseline == "compile" else [eager, comp]
    parts = [f"{s:.3f}x over {name}" for s, name in order if s is not None]
    return ", ".join([parts[0].replace("x over", "x weighted speedup over", 1), *parts[1:]])


def verdict_text(result: EvalResult) -> Text:
    if result.accepted:
        head = Text("ACCEPTED", "bold green")
        if result.speedup is not None:
            head.append("  " + headline(result), "green")
        else:
            head.append("  (correct, not timed on this platform)", "yellow")
    else:
        head = Text(f"REJECTED at {result.stage}", "bold red")
    head.append("\n" + result.reason)  # Text: candidate text inert (harness/protocol/text.py), no markup
    return head


def output_text(result: EvalResult, lines: int = LOG_LINES) -> Text | None:
    """The last lines the candidate printed, per stream; inert already (harness/protocol/text.py made
    them so where they entered the driver) and shown as Text, so no markup is read either."""
    if not result.logs:
        return None
    out = Text(f"candidate output (last {lines} lines of each stream; --json keeps the tails):",
               "dim")
    for stream, log in result.logs.items():
        for line in log.rstrip("\n").splitlines()[-lines:]:
            out.append(f"\n  {stream} | ", "dim")
            out.append(line)
    return out


def print_result(result: EvalResult, console: Console | None = None) -> None:
    console = console or Console()
    if not console.is_terminal and console.width < 140:
        console.width = 140  # logs and pipes: no terminal to fit, keep the table unsquashed
    if result.stage != "static":
        console.print(case_table(result))
    console.print(verdict_text(result))
    output = output_text(result)
    if output is not None:
        console.print(output)
    for warning in result.sandbox.warnings:
        console.print(Text(f"warning: {warning}", "bold yellow"))
