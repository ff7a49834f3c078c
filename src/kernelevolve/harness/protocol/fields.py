"""Field-by-field decoding of job messages (harness/protocol/messages.py, replies.py).

A message crosses the trust boundary as JSON-like data (a request file the worker reads, a
result the driver decodes). `Fields` reads one object's fields, each checked for type, range and
allowed values; the first wrong one raises `MessageError`, naming the message and the field.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping, TypeVar

T = TypeVar("T")
INT32 = 1 << 31
_MISSING = object()


class MessageError(ValueError):
    """A job message with a missing, wrong-typed or out-of-range field."""

    def __init__(self, message: str, field: str, why: str):
        super().__init__(f"{message}.{field}: {why}")
        self.message, self.field, self.why = message, field, why


class Fields:
    """The fields of one decoded object, read with their checks; `name` is the message's."""

    def __init__(self, name: str, data: Any):
        if not isinstance(data, Mapping):
            raise MessageError(name, "*", f"expected an object, got {type(data).__name__}")
        self.name, self.data = name, data

    def fail(self, key: str, why: str) -> MessageError:
        return MessageError(self.name, key, why)

    def _get(self, key: str, default: Any) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING or (value is None and default is not _MISSING):
            if default is _MISSING:
                raise self.fail(key, "missing")
            return default
        return value

    def str(self, key: str, default: Any = _MISSING, choices: tuple[str, ...] = ()) -> Any:
        value = self._get(key, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, str):
            raise self.fail(key, f"expected text, got {type(value).__name__}")
        if choices and value not in choices:
            raise self.fail(key, f"{value[:40]!r} is not one of {', '.join(choices)}")
        return value

    def bool(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {type(value).__name__}")
        return value

    def int(self, key: str, default: Any = _MISSING, lo: int = -INT32, hi: int = INT32) -> Any:
        value = self._get(key, default)
        if value is default and default is not _MISSING:
            return value
        return check_int(self, key, value, lo, hi)

    def float(self, key: str, default: Any = _MISSING, lo: float = -math.inf,
              hi: float = math.inf) -> Any:
        value = self._get(key, default)
        if value is default and default is not _MISSING:
            return value
        return check_float(self, key, value, lo, hi)

    def obj(self, key: str, default: Any = _MISSING) -> Any:
        value = self._get(key, default)
        if value is default and default is not _MISSING:
            return value
        if not isinstance(value, Mapping):
            raise self.fail(key, f"expected an object, got {type(value).__name__}")
        return dict(value)

    def list(self, key: str, item: Callable[[Any, str], T], default: Any = _MISSING) -> Any:
        """A list, each element through `item(value, where)`."""
        value = self._get(key, default)
        if value is default and default is not _MISSING:
            return value
        return self.each(item)(value, key)

    def table(self, key: str, item: Callable[[Any, str], T], default: Any = _MISSING) -> Any:
        """An object with text keys, each value through `item(value, where)`."""
        value = self._get(key, default)
        if value is default and default is not _MISSING:
            return value
        return self.mapping(item)(value, key)

    # element checkers, for list() and table()
    def ints(self, lo: int = -INT32, hi: int = INT32) -> Callable[[Any, str], int]:
        return lambda v, where: check_int(self, where, v, lo, hi)

    def floats(self, lo: float = -math.inf, hi: float = math.inf) -> Callable[[Any, str], float]:
        return lambda v, where: check_float(self, where, v, lo, hi)

    def texts(self) -> Callable[[Any, str], str]:
        def text(v: Any, where: str) -> str:
            if not isinstance(v, str):
                raise self.fail(where, f"expected text, got {type(v).__name__}")
            return v
        return text

    def int_lists(self, lo: int = -INT32, hi: int = INT32) -> Callable[[Any, str], tuple]:
        return self.each(self.ints(lo, hi))

    def each(self, item: Callable[[Any, str], T]) -> Callable[[Any, str], tuple]:
        """Lists whose elements go through `item`."""
        def check(v: Any, where: str) -> tuple[T, ...]:
            if not isinstance(v, (list, tuple)):
                raise self.fail(where, f"expected a list, got {type(v).__name__}")
            return tuple(item(x, f"{where}[{i}]") for i, x in enumerate(v))
        return check

    def mapping(self, item: Callable[[Any, str], T]) -> Callable[[Any, str], dict]:
        """Objects with text keys whose values go through `item`."""
        def check(v: Any, where: str) -> dict[str, T]:
            if not isinstance(v, Mapping):
                raise self.fail(where, f"expected an object, got {type(v).__name__}")
            if not all(isinstance(k, str) for k in v):
                raise self.fail(where, "a key is not text")
            return {k: item(x, f"{where}[{k[:40]!r}]") for k, x in v.items()}
        return check

    def nested(self, cls: Any) -> Callable[[Any, str], Any]:
        """Elements that are messages of their own (`cls.from_wire`), named under this one."""
        def decode(v: Any, where: str) -> Any:
            try:
                return cls.from_wire(v)
            except MessageError as exc:
                raise self.fail(f"{where}.{exc.field}", exc.why) from None
        return decode


def check_int(fields: Fields, key: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fields.fail(key, f"expected an integer, got {type(value).__name__}")
    if not lo <= value < hi:
        raise fields.fail(key, f"{value} is outside [{lo}, {hi})")
    return value


def check_float(fields: Fields, key: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fields.fail(key, f"expected a number, got {type(value).__name__}")
    if not math.isfinite(value) or not lo <= value <= hi:
        raise fields.fail(key, f"{value} is outside [{lo}, {hi}]")
    return float(value)
