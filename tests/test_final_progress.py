"""The final re-measurement told as it happens (run_final.py): the estimate from the search's own
timings, the line per finalist without a terminal, the bar under the live panel, and no phase
when nothing was accepted. In-process, on a real store and a real run; the end-to-end lines are
asserted by the optimize runs in test_run_feedback.py."""
from __future__ import annotations

import io
import json

from rich.console import Console

from test_optimize import CANDIDATE, PROBLEM

from kernelevolve.harness.protocol.timing import TimingPolicy
from kernelevolve.run_final import FinalProgress, Finalist, estimate, left_text
from kernelevolve.types import CaseResult, EvalResult

SEARCH = TimingPolicy()  # min 15 reps, 0.3-3.0 s per case
FINAL = TimingPolicy(min_reps=30, min_time_s=1.0, max_time_s=6.0)


def _result(wall_s: float, measured_s: float) -> EvalResult:
    cases = [CaseResult("a", 1.0, cand_ms=1.0), CaseResult("b", 1.0, cand_ms=1.0),
             CaseResult("held", 1.0, cand_ms=1.0, held_out=True), CaseResult("c", 1.0)]
    return EvalResult(True, "accepted", "", cases=cases, wall_s=wall_s, measured_s=measured_s)


def test_estimate_from_the_search_evaluation():
    # 2 timed cases at 0.4 s each: 4.2 s of loading and checking, then the final minimum, 1 s
    assert estimate(_result(5.0, 0.8), SEARCH, FINAL) == (6.2, 6.2)
    # a `tight` policy may time each case up to its cap: a range
    low, high = estimate(_result(5.0, 0.8), SEARCH, TimingPolicy(
        min_reps=30, min_time_s=1.0, max_time_s=6.0, tight=1.2))
    assert (low, high) == (6.2, 4.2 + 2 * 6.0)
    # a slow kernel bounded by its reps: twice the reps, twice the time (under the cap)
    low, _ = estimate(_result(10.0, 4.0), SEARCH, FINAL)
    assert abs(low - (6.0 + 2 * 4.0)) < 1e-9
    assert estimate(None, SEARCH, FINAL) is None
    assert estimate(EvalResult(True, "accepted", "", wall_s=3.0), SEARCH, FINAL) is None


def test_time_left_and_the_line_per_finalist():
    final = FinalProgress([Finalist(5, "tune", 1.456, (10.0, 20.0)),
                           Finalist(7, "llm", 1.2, (10.0, 20.0)), Finalist(9, "seed", None)])
    assert final.left() == (30.0, 60.0)  # the one without a search timing counts as the mean
    final.k, final.started = 1, 100.0
    assert final.left(now=104.0) == (26.0, 56.0)
    assert final.line(now=104.0) == ("finalist 1/3: node 5 (tune, 1.456x search-time) · "
                                     "about 26-56 s left")
    final.ended, final.walls, final.k, final.started = 1, [12.0], 2, 200.0
    assert final.line(now=200.0) == ("finalist 2/3: node 7 (llm, 1.200x search-time) · "
                                     "about 24 s left")  # from the measured finalist now
    event = final.event(now=200.0)
    assert event == {"event": "finalist", "k": 2, "of": 3, "node": 7, "operator": "llm",
                     "search_fitness": 1.2, "left_s": [24.0, 24.0]}
    final.ended, final.walls = 3, [12.0, 11.0, 13.0]
    assert final.line() == "3 finalist(s) re-measured in 36 s"
    assert left_text(None).startswith("time left unknown")
    assert left_text((0.0, 0.0)) == "finishing (past the estimate)"
    assert left_text((0.0, 0.4)) == "under a second left"
    assert left_text((130.0, 300.0)) == "about 2-5 min left"



def test_an_estimate_under_a_second_is_not_past_it_at_its_start():
    """A finalist whose whole estimate is under a second (a quick policy on a warm pool) starts
    with time left; only once its time is spent is it past the estimate (seen in CI: the one
    line a finalist printed read 'finishing (past the estimate)' at its start)."""
    final = FinalProgress([Finalist(3, "tune", 1.361, (0.3, 0.6))])
    final.k, final.started = 1, 50.0
    assert final.line(now=50.0).endswith("· under a second left")
    assert final.line(now=52.0).endswith("· finishing (past the estimate)")


def _run(tmp_path, seeds=()):
    from kernelevolve.config import RunConfig
    from kernelevolve.run import Run

    return Run.create(PROBLEM, RunConfig(operators=["tune"]), seeds=list(seeds),
                      workspace=tmp_path)


def test_lines_and_json_lines_tell_each_finalist_once(tmp_path):
    from kernelevolve.report.lines import LineProgress

    seed = tmp_path / "seed.py"
    seed.write_text(CANDIDATE.read_text())
    run = _run(tmp_path, [seed])
    run.live_graph = run.graph()
    final = FinalProgress([Finalist(1, "seed", 2.0, (3.0, 9.0)), Finalist(2, "tune", 1.5)])
    run.live_final = final
    text, machine = io.StringIO(), io.StringIO()
    views = [LineProgress(run, stream=text), LineProgress(run, json_lines=True, stream=machine)]
    for k in (1, 1, 2, 2):  # notified at each start and end: one line per finalist
        final.k = k
        for view in views:
            view.refresh()
    lines = text.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("finalist 1/2: node 1 (seed, 2.000x")
    assert lines[1].startswith("finalist 2/2: node 2 (tune, 1.500x") and " left" in lines[1]
    events = [json.loads(line) for line in machine.getvalue().splitlines()]
    assert [(e["event"], e["node"]) for e in events] == [("finalist", 1), ("finalist", 2)]


def test_the_live_panel_shows_a_bar_under_it(tmp_path):
    from kernelevolve.report.live import FinalBar

    final = FinalProgress([Finalist(4, "tune", 1.3, (40.0, 90.0))], k=1)
    console = Console(file=io.StringIO(), width=160, force_terminal=False)
    console.print(FinalBar(final))
    out = console.file.getvalue()
    assert "re-measuring" in out and "finalist 1/1: node 4 (tune, 1.300x search-time)" in out
    assert "about 40-90 s left" in out


def test_no_phase_when_nothing_was_accepted(tmp_path):
    run = _run(tmp_path)
    said: list[str] = []
    outcome = run._finalize(None, None, run.graph(), "budget", said.append, lambda: None)
    assert said == [] and outcome["kind"] == "nothing_to_search"
    assert getattr(run, "live_final", None) is None


def test_bench_and_tune_model_rows_hear_evaluations_and_finalists(tmp_path):
    from kernelevolve.bench.runner import RowProgress

    seed = tmp_path / "seed.py"
    seed.write_text(CANDIDATE.read_text())
    run = _run(tmp_path, [seed])
    notes: list[str] = []
    progress = RowProgress(run, {"problem": "p"}, lambda event, _row: notes.append(event))
    run.live_graph = run.graph()
    progress()  # what was evaluated before (a resumed run) is not news
    run.store.record_evaluation(run.id, 1, EvalResult(True, "accepted", "", fitness=1.1,
                                                      speedup=1.1), 1.0)
    run.live_graph = run.graph()
    progress()
    run.live_final = FinalProgress([Finalist(1, "seed", 1.1, (5.0, 5.0))], k=1)
    progress()
    progress()
    budget = run.config.budgets.max_evals
    assert notes == [f"progress 1{f'/{budget}' if budget else ''} evaluations done",
                     "progress finalist 1/1: node 1 (seed, 1.100x search-time) · "
                     "about 5 s left"]


def test_steps_are_a_spinner_on_a_terminal_and_lines_elsewhere():
    from kernelevolve.report.steps import Steps

    out = io.StringIO()
    with Steps(Console(file=out, force_terminal=False), "static gate", prefix="eval: ") as steps:
        steps.update("starting sandboxed worker")
        steps.update("timing")
    # the first step is not printed in a log: an error before any work stays one line
    assert out.getvalue().splitlines() == ["eval: starting sandboxed worker", "eval: timing"]
    quiet = io.StringIO()
    with Steps(Console(file=quiet, force_terminal=False), "x", quiet=True) as steps:
        steps.update("y")
    assert quiet.getvalue() == ""
