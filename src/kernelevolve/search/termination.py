"""Termination rules: each reads the search's progress and either lets it go on or names why it
stops. Budgets are counted across resumes (the progress is rebuilt from the store)."""
from __future__ import annotations

from dataclasses import dataclass, field


DEFAULT_MAX_EVALS = 30   # the one default: RunConfig(), the CLI, kernelevolve.optimize()


@dataclass(frozen=True)
class Budgets:
    max_evals: int | None = DEFAULT_MAX_EVALS
    max_time_s: float | None = None
    max_cost: float | None = None        # dollars, when prices are known (LLM issue)
    max_tokens: int | None = None
    plateau_evals: int | None = 30       # stop after this many evaluations without ...
    plateau_gain: float = 0.02           # ... a relative improvement of the best above this
    target_speedup: float | None = None
    stop_at_sol: float | None = None     # the best node's weighted speed-of-light fraction


@dataclass
class Progress:
    evals: int = 0                       # completed evaluations (infra failures excluded)
    in_flight: int = 0
    elapsed_s: float = 0.0
    cost: float = 0.0
    tokens: int = 0
    best_by_eval: list[float] = field(default_factory=list)  # best fitness after each evaluation
    best_sol: float | None = None        # the best node's sol_fraction (harness/protocol/roofline.py)
    exhausted: bool = False              # no operator has anything left to propose

    def note_evaluation(self, best_fitness: float | None, best_sol: float | None = None) -> None:
        self.evals += 1
        self.best_by_eval.append(best_fitness or 0.0)
        self.best_sol = best_sol


def should_stop(b: Budgets, p: Progress) -> str | None:
    """Why the search must stop now, or None. Evaluations in flight count against max_evals."""
    if b.max_evals is not None and p.evals + p.in_flight >= b.max_evals:
        return f"evaluation budget reached ({b.max_evals} evaluations)"
    if b.max_time_s is not None and p.elapsed_s >= b.max_time_s:
        return f"time budget reached ({b.max_time_s:g} s)"
    if b.max_cost is not None and p.cost >= b.max_cost:
        return f"cost budget reached (${b.max_cost:g})"
    if b.max_tokens is not None and p.tokens >= b.max_tokens:
        return f"token budget reached ({b.max_tokens} tokens)"
    best = p.best_by_eval[-1] if p.best_by_eval else 0.0
    if b.target_speedup is not None and best >= b.target_speedup:
        return f"target speedup reached ({best:.3g}x >= {b.target_speedup:g}x)"
    if b.stop_at_sol is not None and p.best_sol is not None and p.best_sol >= b.stop_at_sol:
        return (f"speed of light reached: the best node runs at {p.best_sol:.0%} of this "
                f"machine's speed of light (>= {b.stop_at_sol:.0%}, --stop-at-sol)")
    if b.plateau_evals and best > 0 and len(p.best_by_eval) > b.plateau_evals:
        then = p.best_by_eval[-1 - b.plateau_evals]
        if then > 0 and best / then - 1 < b.plateau_gain:
            return (f"plateau: no improvement above {b.plateau_gain:.0%} in the last "
                    f"{b.plateau_evals} evaluations")
    if p.exhausted and p.in_flight == 0:
        return ("search space exhausted: no operator has anything left to propose (or the "
                "stochastic ones produced nothing usable several times in a row)")
    return None
