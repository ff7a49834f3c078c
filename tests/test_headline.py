"""One baseline in the headline, and output that reads whole in a log.

- `eval --baseline compile`: the verdict leads with the speedup over torch.compile, the figure
  fitness and the outcome judge (it led with the eager one);
- `optimize` and `show` print the outcome's speedup over torch.compile once, when the run timed
  torch.compile (the compile comparison line, report/compile_compare.py);
- `show` in a pipe or a log keeps whole words (report/console.py).

All in-process: a real Store and Run, with evaluations recorded as the search records them.
"""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from kernelevolve.harness.gates.scoring import score
from kernelevolve.report.table import verdict_text
from kernelevolve.types import CaseResult, EvalResult
from test_optimize import CANDIDATE, PROBLEM

DATA = {"ref_ms": [2.0] * 9, "cand_ms": [1.0] * 9, "compile_ms": [1.5] * 9, "calls_per_batch": 1}


def _scored(baseline: str) -> EvalResult:
    result = EvalResult(accepted=False, stage="timing", reason="", baseline=baseline,
                        cases=[CaseResult(name="a", weight=1.0)])
    score(result, {"a": DATA})
    return result


def test_the_verdict_leads_with_the_baseline_fitness_uses():
    comp, eager = _scored("compile"), _scored("eager")
    assert comp.fitness == pytest.approx(1.5) and eager.fitness == pytest.approx(2.0)
    assert comp.reason.startswith("accepted: 1.500x weighted speedup over torch.compile (95% "
                                  "interval 1.500-1.500) across 1 case(s); 2.000x over eager")
    assert eager.reason.startswith("accepted: 2.000x weighted speedup over eager PyTorch")
    assert verdict_text(comp).plain.startswith(
        "ACCEPTED  1.500x weighted speedup over torch.compile, 2.000x over eager")
    assert verdict_text(eager).plain.startswith(
        "ACCEPTED  2.000x weighted speedup over eager, 1.500x over torch.compile")


def _header_and_row(result: EvalResult) -> tuple[list[str], list[str]]:
    from kernelevolve.report.table import case_table

    out = io.StringIO()
    Console(file=out, width=200).print(case_table(result))
    lines = [line.split() for line in out.getvalue().splitlines() if line.strip()]
    header = next(i for i, words in enumerate(lines) if words and words[0] == "case")
    return lines[header], lines[header + 1 + (lines[header + 1][0].startswith("─"))]


def test_per_case_columns_lead_with_the_baseline_fitness_uses():
    # --baseline compile: compile ms, cand ms and the speedup over it (1.5 / 1.0) first, then
    # eager's figures as the secondary ones
    header, row = _header_and_row(_scored("compile"))
    assert " ".join(header).endswith("compile ms cand ms speedup eager ms over eager eager 95% CI")
    assert row[-6:] == ["1.500", "1.000", "1.50x", "2.000", "2.00x", "2.00-2.00"]
    header, row = _header_and_row(_scored("eager"))  # eager: as before
    assert " ".join(header).endswith("eager ms compile ms cand ms speedup 95% CI")
    assert row[-5:] == ["2.000", "1.500", "1.000", "2.00x", "2.00-2.00"]


def _finished_run(tmp_path, baseline: str, compile_in_final: bool):
    """A run whose node 1 was evaluated once in the search (timing torch.compile: the run's
    one compile measurement) and re-measured at the end, with the stored outcome."""
    from kernelevolve.config import RunConfig
    from kernelevolve.run import Run
    from kernelevolve.search.acceptance import decide

    tmp_path.mkdir()
    seed = tmp_path / "seed.py"
    seed.write_text(CANDIDATE.read_text())
    run = Run.create(PROBLEM, RunConfig(operators=["tune"], baseline=baseline), seeds=[seed],
                     workspace=tmp_path / "ws")
    search = EvalResult(accepted=False, stage="timing", reason="", baseline=baseline,
                        cases=[CaseResult(name="a", weight=1.0)])
    score(search, {"a": {**DATA, "ref_ms": [2.2] * 9, "compile_ms": [3.0] * 9}})
    run.store.record_evaluation(run.id, 1, search, 1.0)
    final = EvalResult(accepted=False, stage="timing", reason="", baseline=baseline,
                       cases=[CaseResult(name="a", weight=1.0)])
    score(final, {"a": {k: v for k, v in DATA.items()
                        if compile_in_final or k != "compile_ms"}})
    run.store.add_event(run.id, "final_measurement", {"node_id": 1, "result": final.to_dict()})
    outcome = decide([(1, final)], "budget", baseline)
    run.store.set_run_status(run.id, "completed", outcome)
    return run


def _shown(run) -> str:
    from kernelevolve.report.runs import print_summary
    from kernelevolve.report.summary import run_summary

    out = io.StringIO()
    print_summary(run_summary(run), Console(file=out, width=200))
    return out.getvalue()


def _optimize_text(run) -> str:
    from kernelevolve.cli_run import _print_outcome
    from kernelevolve.report.summary import run_summary

    out = io.StringIO()
    _print_outcome(run, run.outcome, run_summary(run), Console(file=out, width=200))
    return out.getvalue()


def test_the_compile_comparison_line_once_when_torch_compile_was_timed(tmp_path):
    from kernelevolve.report.summary import RunSummary

    # --baseline eager: torch.compile timed once (3.0 ms) in the search; the outcome's node
    # re-measured at 1.0 ms: 3.0x over torch.compile, said as unpaired, with no interval
    run = _finished_run(tmp_path / "eager", "eager", compile_in_final=False)
    assert run.outcome["message"].startswith("improved 2.000x (95% interval")
    for text in (_shown(run), _optimize_text(run)):
        lines = [line for line in text.splitlines() if "torch.compile" in line]
        assert len(lines) == 1, text
        assert lines[0].startswith("over torch.compile: 3.000x by node 1 (") and \
            "not paired, so no interval" in lines[0]
    from kernelevolve.report.html import render_html

    html = render_html(run.summary())  # the HTML report says it too, once, in its header
    assert html.count('id="compile-comparison"') == 1
    assert "over torch.compile: 3.000x by node 1 (" in html
    assert run.summary().compile_comparison == {"node_id": 1, "baseline": "eager",
                                                "speedup": pytest.approx(3.0),
                                                "interval": None, "paired": False}
    # --baseline compile: the outcome is over torch.compile already; no second line
    run = _finished_run(tmp_path / "compile", "compile", compile_in_final=True)
    assert run.outcome["message"].startswith("improved 1.500x over torch.compile")
    assert 'id="compile-comparison"' not in render_html(run.summary())
    for text in (_shown(run), _optimize_text(run)):
        assert "improved 1.500x over torch.compile" in text
        assert not any(line.startswith("over torch.compile") for line in text.splitlines())
    # paired in the re-measurement (timed beside the candidate): its interval is given
    paired = RunSummary(compile_comparison={"node_id": 4, "baseline": "eager", "speedup": 1.25,
                                            "interval": [1.1, 1.4], "paired": True})
    from kernelevolve.report.compile_compare import compile_line

    assert compile_line(paired.compile_comparison) == (
        "over torch.compile: 1.250x by node 4 (95% interval 1.100-1.400, timed beside it)")
    assert compile_line(None) is None  # not timed: nothing said


def test_show_in_a_pipe_keeps_whole_words(monkeypatch):
    """Through a pipe (not a terminal), the nodes table is not squeezed into 80 columns, even
    with COLUMNS=80 exported as CI and xdist workers do: each rationale stays on one line."""
    from kernelevolve.report.console import stdout_console
    from kernelevolve.report.runs import print_summary
    from kernelevolve.report.summary import RunSummary

    monkeypatch.setenv("COLUMNS", "80")
    rationale = "tune: BLOCK_ROWS 8 -> 32, UNROLL 2 -> 4, VECTORIZE off -> on"
    nodes = [{"id": i, "parents": [0], "operator": "tune", "stage": "accepted",
              "status": "done", "fitness": 1.5, "rationale": rationale} for i in range(1, 4)]
    summary = RunSummary(run_id="r1", status="completed", platform="cpu",
                         problem="/a/rather/long/path/to/examples/rmsnorm/problem.py",
                         nodes=nodes, cost={"tokens": 0, "dollars": 0.0, "by_model": {}})
    out = io.StringIO()
    console = stdout_console(file=out)
    assert not console.is_terminal
    print_summary(summary, console)
    text = out.getvalue()
    assert sum(rationale in line for line in text.splitlines()) == 3, text
    assert summary.problem in text
