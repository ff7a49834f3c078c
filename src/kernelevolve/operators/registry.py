"""Operator registry: names to factories; an unknown name lists what is registered."""
from __future__ import annotations

from typing import Callable

from kernelevolve.errors import UsageError
from kernelevolve.operators.base import Operator


def _tune() -> Operator:
    from kernelevolve.operators.tune import TuneOperator

    return TuneOperator()


FACTORIES: dict[str, Callable[[], Operator]] = {"tune": _tune}


def make_operators(names: list[str]) -> list[Operator]:
    unknown = [n for n in names if n not in FACTORIES]
    if unknown:
        raise UsageError(f"unknown operator {unknown[0]!r}; registered operators: "
                         f"{', '.join(sorted(FACTORIES))}")
    return [FACTORIES[n]() for n in dict.fromkeys(names)]
