"""What a patched model is doing, in words: which version answers each patched module's calls,
and what a forward's time means in that state.

A version enters the registry in `shadow` (`kernelevolve promote`'s default). In shadow every
call runs the original module, whose output is served, AND the kernel on the same inputs, and
compares the two: a shadowed forward is slower than eager by design. A user who times it and
reads "0.06x" without that word thinks the kernel is slow; these lines say it where the figure
is printed (examples/rmsnorm/serve.py, `PatchSession.explain()`).
"""
from __future__ import annotations

from typing import Any

SHADOW_COST = ("shadow runs the original (served) and the kernel on every call and compares "
               "them, so this is the cost of checking, not the kernel's speed")


def _label(bound: Any) -> str:
    return f"{bound.record.name} v{bound.record.version}"


def _default_words(d: Any) -> str:
    b = d.default
    if b is None:
        return "no default version: the original module answers"
    if b.refusal is not None:
        return f"{_label(b)} (default) refused ({b.refusal[1]}): the original module answers"
    return (f"{_label(b)} (default) serves the calls inside its validated region; the "
            "original module answers the others")


def _trial_words(d: Any, options: Any) -> str | None:
    t = d.trial
    if t is None:
        return None
    if t.refusal is not None:
        return f"{_label(t)} ({t.state}) refused ({t.refusal[1]})"
    if t.state == "shadow":
        share = "every call" if options.shadow_share >= 1 else \
            f"{options.shadow_share:.0%} of calls"
        return (f"{_label(t)} in shadow: on {share} the original module runs and is served, the "
                "kernel runs too on the same inputs and the two are compared (a forward is "
                "slower than eager by design); `kernelevolve registry set-state "
                f"{t.record.name} default --version {t.record.version}` serves it once trusted")
    return f"{_label(t)} in canary: serves {options.canary_share:.0%} of its in-region calls"


def serving_lines(session: Any) -> list[str]:
    """One line per patched module: "path: what answers its calls"."""
    lines = []
    for d in session.dispatchers:
        trial = _trial_words(d, session.options)
        if trial is None:
            lines.append(f"{d.path}: {_default_words(d)}")
        elif _shadows_every_call(d, session.options):  # the default waits (dispatch.py)
            lines.append(f"{d.path}: {trial}" + (f"; {_label(d.default)} (default) serves no "
                                                 "call meanwhile" if d.default else ""))
        else:
            lines.append(f"{d.path}: {trial}; otherwise {_default_words(d)}")
    return lines


def _shadows_every_call(d: Any, options: Any) -> bool:
    t = d.trial
    return (t is not None and t.refusal is None and t.state == "shadow"
            and options.shadow_share >= 1)


def in_shadow(session: Any) -> bool:
    """Whether some patched module runs a shadow version (its forward runs both)."""
    return any(d.trial is not None and d.trial.refusal is None and d.trial.state == "shadow"
               and session.options.shadow_share > 0 for d in session.dispatchers)


def forward_line(session: Any, eager_ms: float, patched_ms: float) -> str:
    """"forward: eager A ms, patched B ms (S x)", with what the patched time means in shadow."""
    ratio = f"{eager_ms / patched_ms:.2f}x" if patched_ms > 0 else "-"
    if in_shadow(session):
        return (f"forward: eager {eager_ms:.3f} ms, patched in shadow {patched_ms:.3f} ms "
                f"({ratio}): {SHADOW_COST}")
    return f"forward: eager {eager_ms:.3f} ms, patched {patched_ms:.3f} ms ({ratio})"
