"""The best figure a running or finished search shows, as one it can defend.

During the search the best node is the one with the highest search-time fitness: of many noisy
figures, the maximum is the most likely to be high by luck (a softmax search's best read 2.604x
and re-measured at 1.432x). So the live panel, the plain progress lines and `show` of an
unfinished run lead with the lower end of that node's 95% interval, labelled, and give the
measured figure beside it; once the run completed they give the finalists' re-measured figure.
Selection and fitness are unchanged: the search still steers by the measured figure (the lower
bound would favour whichever node happened to get more samples, not the faster kernel).
"""
from __future__ import annotations

from typing import Any, Sequence


def lower_bound_text(fitness: float, interval: Sequence[float] | None, node_id: int,
                     extra: str = "") -> str:
    """">= 1.92x (node 4, 95% lower bound; measured 2.60x)"; without an interval (not timed
    with one) "2.604x (node 4, search-time)". `extra` goes after the node ("node 4, tune")."""
    who = f"node {node_id}{extra}"
    if interval and interval[0] is not None and interval[0] > 0:
        return f">= {interval[0]:.2f}x ({who}, 95% lower bound; measured {fitness:.2f}x)"
    return f"{fitness:.3f}x ({who}, search-time)"


def remeasured_text(outcome: dict[str, Any]) -> str | None:
    """"1.432x (node 4, re-measured; 95% interval 1.30-1.55)" from a completed run's outcome,
    None when the outcome has no re-measured figure."""
    speedup = outcome.get("speedup")
    if speedup is None or outcome.get("node_id") is None:
        return None
    interval = outcome.get("interval")
    ci = f"; 95% interval {interval[0]:.2f}-{interval[1]:.2f}" if interval else ""
    return f"{speedup:.3f}x (node {outcome['node_id']}, re-measured{ci})"


def node_best_text(node: Any, extra: str = "") -> str:
    """The search-time best node (a graph Node; its interval is meta["fitness_ci"], set when its
    evaluation landed) as `lower_bound_text` says it."""
    return lower_bound_text(node.fitness, node.meta.get("fitness_ci"), node.id, extra)


def run_best_text(run: Any, node: Any, status: str, extra: str = "") -> str:
    """The live panel's "best so far": the re-measured figure once the run finished (its
    stored outcome, read once the status says so), else the node's lower bound."""
    if status == "finished":
        done = remeasured_text(getattr(run, "outcome", None) or {})
        if done:
            return done
    return node_best_text(node, extra)
