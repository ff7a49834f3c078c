"""What an LLM call cost, from a price table kept as data (prices.toml), not code.

Why "unknown" (None) and never 0 for a model not in the table: a $0 would let `--max-cost`
budgets pass silently for a paid model we simply had no price for; None makes the report say
"unknown" and lets the budget logic decide what an unpriced call means.

Users override or extend the table with their own TOML file named by KERNELEVOLVE_PRICES
(knobs.prices_file); it is looked up on every call, so a test that sets it sees the change.
"""
from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

from kernelevolve import knobs
from kernelevolve.errors import UsageError

try:  # Python 3.11+ has tomllib; on 3.10 the `llm` extra installs tomli.
    import tomllib as _toml
except ImportError:  # pragma: no cover - exercised only on 3.10
    try:
        import tomli as _toml  # type: ignore[no-redef]
    except ImportError:
        _toml = None

PRICES_ENV = knobs.PRICES_ENV

# "-2024-08-06" (OpenAI) or "-20250929" (Anthropic): dated snapshots cost what the alias costs.
_DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8})$")

Table = dict[str, dict[str, tuple[float, float]]]
_cache: dict[str, Table] = {}


def _parse(text: str, origin: str) -> Table:
    """{provider: {model: (usd_per_mtok_in, usd_per_mtok_out)}}, checked, from TOML text."""
    if _toml is None:  # pragma: no cover
        return {}
    try:
        raw = _toml.loads(text)
    except Exception as exc:  # tomllib.TOMLDecodeError, tomli's twin
        raise UsageError(f"{origin}: not a valid price file: {exc}") from None
    table: Table = {}
    for provider, models in raw.items():
        if not isinstance(models, dict):
            raise UsageError(f"{origin}: [{provider}] must be a table of models")
        for model, entry in models.items():
            try:
                price_in, price_out = float(entry["input"]), float(entry["output"])
            except (TypeError, KeyError, ValueError):
                raise UsageError(f"{origin}: {provider}.{model} needs numeric input and output "
                                 "(USD per million tokens)") from None
            if price_in < 0 or price_out < 0:
                raise UsageError(f"{origin}: {provider}.{model} has a negative price")
            table.setdefault(provider.lower(), {})[model] = (price_in, price_out)
    return table


def price_table() -> Table:
    """The packaged table, overlaid model by model with the user's KERNELEVOLVE_PRICES file."""
    user = knobs.prices_file()
    if user in _cache:
        return _cache[user]
    text = resources.files("kernelevolve.llm").joinpath("prices.toml").read_text()
    table = _parse(text, "kernelevolve/llm/prices.toml")
    if user:
        path = Path(user).expanduser()
        try:
            user_text = path.read_text()
        except OSError as exc:
            raise UsageError(f"{PRICES_ENV}={user}: cannot read price file ({exc.strerror})") \
                from None
        for provider, models in _parse(user_text, str(path)).items():
            table.setdefault(provider, {}).update(models)
    _cache[user] = table
    return table


def price(provider: str, model: str) -> tuple[float, float] | None:
    """(USD per million input tokens, per million output tokens), or None when unknown."""
    models = price_table().get(provider.lower(), {})
    for name in (model, model.lower(), _DATE_SUFFIX.sub("", model.lower())):
        if name in models:
            return models[name]
    return None


def cost_usd(provider: str, model: str, tokens_in: int | None,
             tokens_out: int | None) -> float | None:
    """Dollars for one call; None when the model's price or the token counts are unknown."""
    rates = price(provider, model)
    if rates is None or tokens_in is None or tokens_out is None:
        return None
    return (tokens_in * rates[0] + tokens_out * rates[1]) / 1e6
