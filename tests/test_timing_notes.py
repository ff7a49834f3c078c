"""Figures that hold still (issue 31 item 4): every timed case says how its timing ended (at
the `tight` width, or at a cap, with the width it got), `eval` warns on a wide interval as
`optimize` and `show` do, and the best figure a search shows is one it can defend, labelled: the
95% lower bound while searching, the re-measured figure once done."""
from __future__ import annotations

import io
from dataclasses import replace
from types import SimpleNamespace

import pytest
from rich.console import Console

from conftest import PROBLEMS
from kernelevolve.harness.gates.integrity import IntegrityPolicy
from kernelevolve.harness.protocol.timing import TimingPolicy
from kernelevolve.report.timing_notes import (eval_notes, eval_timing, timing_line,
                                              wide_interval_warning)
from kernelevolve.types import CaseResult, EvalResult

ALTERNATING = PROBLEMS / "alternating_time.py"
SLOW_EVERY_OTHER = PROBLEMS / "alternating_time_candidate.py"


def _options(evaluator, policy: TimingPolicy):
    """One timed case, no derived held-out one; the candidates have no compiled kernel."""
    return replace(evaluator.options, timing=policy, held_out=False, seed=1,
                   integrity=IntegrityPolicy(allow_no_kernel=True))


# ---- real evaluations ----------------------------------------------------------------------------

def test_a_case_timed_to_the_cap_says_so_and_its_wide_interval_warns(evaluator):
    # Every second call six times slower, one call per batch: the samples alternate between
    # two speeds, so no interval gets within 1.05 and the median's interval spans both.
    policy = TimingPolicy(min_reps=5, min_time_s=0.05, max_time_s=0.3, tight=1.05)
    result = evaluator.evaluate(ALTERNATING, SLOW_EVERY_OTHER, options=_options(evaluator, policy))
    assert result.accepted, result.reason
    case = result.cases[0]
    assert case.timing_stop == "time cap"
    lo, hi = case.speedup_ci
    notes = eval_notes(result, policy)
    assert notes[0] == (f"timing: 1 at the 0.3 s time cap (case '16x16', interval "
                        f"{hi / lo:.2f} wide)"), notes
    assert notes[1].startswith(f"warning: the 95% interval {result.speedup_ci[0]:.3f}-"
                               f"{result.speedup_ci[1]:.3f} is wide"), notes


def test_a_case_whose_interval_got_narrow_enough_says_so(evaluator, tmp_path):
    steady = tmp_path / "steady.py"  # the reference's own work, every call: nothing alternates
    steady.write_text(SLOW_EVERY_OTHER.read_text().replace(
        "_SPIN if self.calls % 2 else 6 * _SPIN", "_SPIN"))
    policy = TimingPolicy(min_reps=5, min_time_s=0.05, max_time_s=5.0, tight=10.0)
    result = evaluator.evaluate(ALTERNATING, steady, options=_options(evaluator, policy))
    assert result.accepted, result.reason
    assert result.cases[0].timing_stop == "tight"
    assert eval_notes(result, policy)[0] == "timing: 1 case stopped with the interval within 10.00"


# ---- the wording, in-process ---------------------------------------------------------------------

def test_timing_line_counts_each_way_a_case_stopped():
    cases = [CaseResult("a", 1, timing_stop="tight", speedup_ci=(1.9, 2.0)),
             CaseResult("b", 1, timing_stop="tight", speedup_ci=(1.0, 1.1)),
             CaseResult("c", 1, timing_stop="time cap", speedup_ci=(1.0, 1.42)),
             CaseResult("d", 1, timing_stop="time cap", speedup_ci=(2.0, 3.2)),
             CaseResult("held", 1)]  # not timed: not counted
    policy = TimingPolicy(tight=1.1, max_time_s=3.0)
    assert timing_line(cases, policy) == ("timing: 2 cases stopped with the interval within "
                                          "1.10; 2 at the 3 s time cap (cases 'c', 'd'; "
                                          "widest interval 1.60)")
    quiet = [{"name": "a", "timing_stop": "minimums"}, {"name": "b", "timing_stop": "rep cap"}]
    assert timing_line(quiet, {"max_time_s": 6.0}, "re-measurement timing") == (
        "re-measurement timing: 1 case at the minimum repetitions and time; 1 at the "
        "repetition cap (case 'b')")
    assert timing_line([CaseResult("a", 1)], None) is None  # stored before it was recorded


def test_the_wide_interval_warning_is_one_wording_for_eval_and_optimize():
    from kernelevolve.report.summary import RunSummary, measurement_notes

    warning = wide_interval_warning((0.62, 3.01), 1.4)  # the eval
    assert warning.startswith("warning: the 95% interval 0.620-3.010 is wide (about ±85%)")
    assert wide_interval_warning((1.3, 1.5), 1.4) is None
    assert measurement_notes(RunSummary(outcome={"speedup": 1.4, "interval": [0.62, 3.01]})
                             ) == [warning]
    # eval warns on the figure fitness uses: over torch.compile with --baseline compile
    result = EvalResult(True, "accepted", "", speedup=2.0, speedup_ci=(1.9, 2.1),
                        compile_speedup=1.4, compile_speedup_ci=(0.62, 3.01), baseline="compile")
    assert eval_notes(result, TimingPolicy()) == [warning]
    assert eval_notes(replace(result, baseline="eager"), TimingPolicy()) == []


def test_eval_timing_defaults_and_cap():
    from kernelevolve.config import RunConfig
    from kernelevolve.errors import UsageError
    from kernelevolve.harness.protocol.timing import EVAL_TIMING, TIGHT

    assert EVAL_TIMING.tight == TIGHT and RunConfig().final_timing.tight == TIGHT
    assert RunConfig().search_timing.tight is None  # the search's figures only steer
    assert eval_timing(0.5) == replace(EVAL_TIMING, max_time_s=0.5)
    with pytest.raises(UsageError, match="--timing-cap 0: must be a positive number"):
        eval_timing(0)


# ---- the best figure shown ----------------------------------------------------------------------

def _graph():
    from kernelevolve.search.graph import Node, SearchGraph

    graph = SearchGraph()
    graph.add(Node(0, (), "root", "", "h0", status="root", fitness=1.0))
    graph.add(Node(4, (0,), "tune", "", "h4", status="done", stage="accepted", fitness=2.604,
                   speedup=2.604, meta={"fitness_ci": (1.92, 3.3)}, order=0))
    return graph


def test_progress_lines_and_live_panel_show_the_lower_bound_then_the_remeasured_figure():
    from kernelevolve.config import RunConfig
    from kernelevolve.report.lines import LineProgress
    from kernelevolve.report.live import LiveView
    from kernelevolve.search.termination import Progress

    run = SimpleNamespace(id="r1", config=RunConfig(), live_graph=_graph(), live_events={},
                          live_progress=Progress(evals=1), outcome=None)
    out = io.StringIO()
    LineProgress(run, stream=out)._evaluation(run.live_graph.get(4), run.live_graph, None)
    assert out.getvalue().rstrip().endswith(
        "best so far >= 1.92x (node 4, 95% lower bound; measured 2.60x)")

    def panel(status: str) -> str:
        console = Console(file=io.StringIO(), width=200, record=True)
        view = LiveView(run, console)
        view.status = status
        console.print(view.render())
        return console.export_text()

    assert ">= 1.92x (node 4, tune, 95% lower bound; measured 2.60x)" in panel("searching")
    run.outcome = {"speedup": 1.432, "interval": [1.3, 1.55], "node_id": 4}
    assert "1.432x (node 4, re-measured; 95% interval 1.30-1.55)" in panel("finished")


def test_show_labels_the_lower_bound_then_the_remeasured_figure_and_its_timing(tmp_path):
    from conftest import CORPUS
    from kernelevolve.config import RunConfig
    from kernelevolve.report.runs import print_summary
    from kernelevolve.report.summary import run_summary
    from kernelevolve.run import Run

    seed = tmp_path / "seed.py"
    seed.write_text((CORPUS / "good_softmax_cpp.py").read_text())
    run = Run.create(PROBLEMS / "softmax_small.py", RunConfig(operators=["tune"]), seeds=[seed],
                     workspace=tmp_path)
    searched = EvalResult(True, "accepted", "", fitness=2.604, speedup=2.604,
                          speedup_ci=(1.92, 3.3))
    run.store.record_evaluation(run.id, 1, searched, 1.0)

    def shown() -> str:
        console = Console(file=io.StringIO(), width=300, record=True)
        print_summary(run_summary(run), console)
        return console.export_text()

    assert "best: >= 1.92x (node 1, 95% lower bound; measured 2.60x)" in shown()
    final = EvalResult(True, "accepted", "", fitness=1.432, speedup=1.432,
                       speedup_ci=(1.3, 1.55),
                       cases=[CaseResult("64x1024", 2.0, timing_stop="tight",
                                         speedup_ci=(1.35, 1.5))])
    run.store.add_event(run.id, "final_measurement", {"node_id": 1, "result": final.to_dict()})
    run.store.set_run_status(run.id, "completed", {
        "kind": "improved", "message": "improved 1.432x", "speedup": 1.432,
        "interval": [1.3, 1.55], "node_id": 1})
    text = shown()
    assert "best: 1.432x (node 1, re-measured; 95% interval 1.30-1.55)" in text
    assert "re-measurement timing: 1 case stopped with the interval within 1.20" in text
