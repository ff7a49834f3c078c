"""How a measurement ended and whether its figure can be trusted, in one wording for `eval`,
`optimize` and `show`.

A figure that swings between runs (33.8, 2.8 and 13.3 ms for one eager reference on a busy
machine) is only useful with a word on how it was timed: each case's loop ends at the policy's
minimums, with its interval within the `tight` width, or at a cap that a busy machine reaches
first (harness/protocol/timing.py StopRule). `timing_line` says which, per case, with the width
the capped cases got; `wide_interval_warning` is the one warning every command gives on a wide
interval.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from kernelevolve.harness.protocol.timing import TimingPolicy

WIDE_INTERVAL = 0.25  # an interval wider than this fraction of its speedup gets a warning


def wide_interval_warning(interval: Any, speedup: float | None) -> str | None:
    """"warning: the 95% interval 0.62-3.01 is wide (about ±...%)...", or None when it is not
    (or there is no interval)."""
    if not interval or not speedup or (interval[1] - interval[0]) / speedup <= WIDE_INTERVAL:
        return None
    half = 50 * (interval[1] - interval[0]) / speedup
    return (f"warning: the 95% interval {interval[0]:.3f}-{interval[1]:.3f} is wide "
            f"(about ±{half:.0f}%): a noisy machine or few repetitions; re-run on a "
            "quieter machine before trusting the figure")


def _get(case: Any, key: str) -> Any:
    return case.get(key) if isinstance(case, Mapping) else getattr(case, key, None)


def _width(case: Any) -> float | None:
    ci = _get(case, "speedup_ci")
    return ci[1] / ci[0] if ci and ci[0] and ci[0] > 0 else None


def _capped(cases: list[Any], what: str) -> str:
    """"1 at the 3 s time cap (case 'large', interval 1.42 wide)": the capped cases are the
    ones whose figure is less sure, so they are named with the width they reached."""
    names = ", ".join(repr(_get(c, "name")) for c in cases[:3]) + (", ..." if len(cases) > 3
                                                                  else "")
    widths = [w for w in map(_width, cases) if w is not None]
    width = ("" if not widths else f", interval {widths[0]:.2f} wide" if len(cases) == 1
             else f"; widest interval {max(widths):.2f}")
    return f"{len(cases)} at the {what} ({'case' if len(cases) == 1 else 'cases'} {names}{width})"


def timing_line(cases: Iterable[Any], policy: TimingPolicy | Mapping[str, Any] | None,
                label: str = "timing") -> str | None:
    """"timing: 3 cases stopped with the interval within 1.20; 1 at the 3 s time cap (case
    'large', interval 1.42 wide)", from the cases' `timing_stop` (CaseResults or their dicts);
    None when no case says how it stopped (not timed, or stored before it was recorded)."""
    timed = [c for c in cases if _get(c, "timing_stop")]
    if not timed:
        return None
    tight, cap = _get(policy or {}, "tight"), _get(policy or {}, "max_time_s")
    by: dict[str, list[Any]] = {}
    for c in timed:
        by.setdefault(_get(c, "timing_stop"), []).append(c)
    parts = []
    if by.get("tight"):
        n = len(by["tight"])
        parts.append(f"{n} case{'s' if n != 1 else ''} stopped with the interval within "
                     + (f"{tight:.2f}" if tight else "the policy's width"))
    if by.get("minimums"):
        n = len(by["minimums"])
        parts.append(f"{n} case{'s' if n != 1 else ''} at the minimum repetitions and time")
    if by.get("time cap"):
        parts.append(_capped(by["time cap"], f"{cap:g} s time cap" if cap else "time cap"))
    if by.get("rep cap"):
        parts.append(_capped(by["rep cap"], "repetition cap"))
    return f"{label}: " + "; ".join(parts)


def judged_interval(result: Any) -> tuple[Any, float | None]:
    """The interval and figure fitness uses: over torch.compile with --baseline compile (when
    it was timed), else over eager."""
    if _get(result, "baseline") == "compile" and _get(result, "compile_speedup") is not None:
        return _get(result, "compile_speedup_ci"), _get(result, "compile_speedup")
    return _get(result, "speedup_ci"), _get(result, "speedup")


def eval_notes(result: Any, policy: TimingPolicy) -> list[str]:
    """What `eval` prints under its verdict: how the timing ended and, on a wide interval of
    the judged figure, the warning `optimize` and `show` give."""
    notes = [timing_line(result.cases, policy)]
    notes.append(wide_interval_warning(*judged_interval(result)))
    return [n for n in notes if n]


def eval_timing(cap_s: float) -> TimingPolicy:
    """`eval`'s policy (harness/protocol/timing.py EVAL_TIMING) with --timing-cap as the cap."""
    import dataclasses

    from kernelevolve.errors import UsageError
    from kernelevolve.harness.protocol.timing import EVAL_TIMING

    if isinstance(cap_s, bool) or not cap_s > 0:
        raise UsageError(f"--timing-cap {cap_s}: must be a positive number of seconds "
                         f"(the default is {EVAL_TIMING.max_time_s:g})")
    return dataclasses.replace(EVAL_TIMING, max_time_s=float(cap_s))


def print_eval_notes(result: Any, policy: TimingPolicy, console: Any) -> None:
    """`eval_notes` under the verdict: a warning in yellow, the timing line plain."""
    for note in eval_notes(result, policy):
        console.print(note, markup=False, highlight=False, soft_wrap=True,
                      style="yellow" if note.startswith("warning") else None)
