"""Typed run configuration: what `kernelevolve optimize` was asked to do, stored with the run
(so `resume` continues with the same settings) and validated before anything starts."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from kernelevolve import knobs
from kernelevolve.errors import UsageError
from kernelevolve.harness.protocol.timing import TIGHT, TimingPolicy
from kernelevolve.operators.registry import check_names
from kernelevolve.search.policies import make_policy
from kernelevolve.search.termination import Budgets


def api_key_var(llm_config: Any) -> str:
    """The environment variable holding the model's API key (its value is never stored): the
    one the LLM settings name, else the provider's default (llm/spec.py DEFAULT_KEY_ENV)."""
    return llm_config.key_env


@dataclass
class RunConfig:
    platform: str = "cpu"
    # Without an LLM: the built-in synthesizer drafts fused kernels, tune explores their knobs.
    operators: list[str] = field(default_factory=lambda: ["synth", "tune"])
    policy: str = "ucb"
    workers: int | None = None              # evaluation slots: 1 local, the cluster's on Ray
    max_in_flight: int | None = None        # default: one evaluation per slot
    executor: str = "local"                 # local | ray
    ray_address: str | None = None          # a Ray cluster; default: a private one on loopback
    seed: int = 0
    budgets: Budgets = field(default_factory=Budgets)
    allow_no_kernel: bool = False
    strict: bool = False
    final_top_k: int = 3
    search_timing: TimingPolicy = field(default_factory=TimingPolicy)
    # The finalists' figures are the answer: timed on under load until the interval is TIGHT,
    # up to 6 s a case (harness/protocol/timing.py's docstring); the search's only steer.
    final_timing: TimingPolicy = field(default_factory=lambda: TimingPolicy(
        min_reps=30, min_time_s=1.0, max_time_s=6.0, tight=TIGHT))
    sandbox: str | None = None
    stage_timeout: float | None = None       # seconds for load/run/timing; None: scaled defaults
    agent: bool = False                      # the LLM may call tools before it submits
    agent_turns: int = 6                     # model calls per proposal in agent mode
    llm: dict[str, Any] | None = None        # LLMConfig.to_dict(): provider, model, base_url...
    language: str | None = None              # what the LLM writes; default per platform
    notes: list[str] = field(default_factory=list)  # extra knowledge-note folders
    learn: bool = True                       # write learned notes at the end of the run
    # What fitness is relative to: eager PyTorch, or torch.compile of the reference (then every
    # evaluation times torch.compile too). With eager and an LLM operator, torch.compile is still
    # timed once (in the run's first evaluation) for the prompt, unless compile_figures is off.
    baseline: str = "eager"
    compile_figures: bool = True
    # Time torch.compile once per run without an LLM too (kernelevolve bench: fast_p over it).
    time_compile: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunConfig":
        data = dict(data)
        data["budgets"] = Budgets(**data.get("budgets", {}))
        for key in ("search_timing", "final_timing"):
            if key in data:
                data[key] = TimingPolicy(**data[key])
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def validate(self) -> None:
        if self.workers is not None and self.workers < 1:
            raise UsageError(f"--workers {self.workers}: at least one worker is needed")
        from kernelevolve.executors import check_executor

        check_executor(self.executor, self.ray_address)
        make_policy(self.policy)
        check_names(self.operators)
        if "llm" in self.operators and not self.llm:
            raise UsageError("--operator llm needs a model: pass --llm PROVIDER:MODEL "
                             "(e.g. openai:gpt-5 or anthropic:claude-sonnet-4-5)")
        b = self.budgets
        if b.max_evals is not None and b.max_evals < 1:
            raise UsageError(f"--max-evals {b.max_evals}: must be at least 1")
        if b.max_time_s is not None and b.max_time_s <= 0:
            raise UsageError(f"--max-time {b.max_time_s}: must be positive")
        if b.stop_at_sol is not None and (isinstance(b.stop_at_sol, bool) or not (
                isinstance(b.stop_at_sol, (int, float)) and 0 < b.stop_at_sol <= 1)):
            raise UsageError(f"--stop-at-sol {b.stop_at_sol}: a fraction of the speed of light, "
                             "above 0 and at most 1 (e.g. 0.6)")
        if self.baseline not in ("eager", "compile"):
            raise UsageError(f"--baseline {self.baseline!r}: choose eager or compile")
        if self.agent_turns < 1:
            raise UsageError(f"--agent-turns {self.agent_turns}: at least 1 turn is needed")
        if self.agent and "llm" not in self.operators:
            raise UsageError("--agent needs the llm operator: pass --llm PROVIDER:MODEL")
        if self.stage_timeout is not None and not self.stage_timeout > 0:
            raise UsageError(f"--stage-timeout {self.stage_timeout}: must be a positive number "
                             "of seconds")




_FLAT_KEYS = {"final_top_k", "platform", "operators", "policy", "workers", "seed", "language", "notes",
              "allow_no_kernel", "strict", "max_in_flight", "sandbox", "executor", "ray_address",
              "stage_timeout", "baseline", "compile_figures", "time_compile",
              "agent", "agent_turns"}  # the LLM's tool loop (operators/agent.py)
_BUDGET_KEYS = {"max_evals": "max_evals", "max_time": "max_time_s", "max_cost": "max_cost",
                "max_tokens": "max_tokens", "target": "target_speedup",
                "stop_at_sol": "stop_at_sol"}
# [search_timing] and [final_timing] tables: the timing policy of the search's evaluations and
# of the final re-measurement (harness/protocol/timing.py TimingPolicy's fields).
_TIMING_KEYS = ("search_timing", "final_timing")
_LLM_KEYS = ("llm", "llm_base_url", "llm_api_key_env", "llm_timeout", "llm_max_concurrency",
             "llm_temperature", "llm_max_failures")


def build_config(path: Any, flags: dict[str, Any]) -> RunConfig:
    """A RunConfig from an optional TOML file plus command-line flags (flags win; None = unset)."""
    values: dict[str, Any] = {}
    label = "--config"
    if path is None:
        path, label = knobs.default_config(), "KERNELEVOLVE_CONFIG"
    if path is not None:
        values.update(_read_toml(path, label))
    values.update({k: v for k, v in flags.items() if v is not None})
    known = _FLAT_KEYS | set(_BUDGET_KEYS) | set(_LLM_KEYS) | set(_TIMING_KEYS)
    unknown = set(values) - known
    if unknown:
        raise UsageError(f"{path}: unknown setting(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join(sorted(known))}")
    budgets = {_BUDGET_KEYS[k]: values[k] for k in _BUDGET_KEYS if k in values}
    config = RunConfig(**{k: values[k] for k in _FLAT_KEYS if k in values},
                       budgets=Budgets(**budgets),
                       **{k: _timing(path, k, values[k]) for k in _TIMING_KEYS if k in values})
    if isinstance(config.operators, str):
        config.operators = [config.operators]
    if values.get("llm"):
        from kernelevolve.llm import LLMConfig, parse_llm_spec

        provider, model = parse_llm_spec(values["llm"])
        extra = {field: values[key] for key, field in (("llm_timeout", "timeout_s"),
                                                       ("llm_max_concurrency", "max_concurrency"),
                                                       ("llm_temperature", "temperature"),
                                                       ("llm_max_failures", "max_failed_calls"))
                 if key in values}
        config.llm = LLMConfig(provider=provider, model=model,
                               base_url=values.get("llm_base_url"),
                               api_key_env=values.get("llm_api_key_env"), **extra).to_dict()
        if "operators" not in values:  # the LLM writes kernels, tune explores their knobs
            config.operators = ["llm", "tune"]
    elif any(values.get(k) is not None for k in _LLM_KEYS[1:]):
        given = ["--" + k.replace("_", "-") for k in _LLM_KEYS[1:] if values.get(k) is not None]
        raise UsageError(" and ".join(given) + (" need" if len(given) > 1 else " needs")
                         + " --llm PROVIDER:MODEL")
    config.validate()
    return config


def _timing(path: Any, key: str, table: Any) -> TimingPolicy:
    """A TimingPolicy from a config table, each field checked (a whole or real number above 0)."""
    fields = {f.name: f.type for f in dataclasses.fields(TimingPolicy)}
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [{key}] must be a table of {', '.join(fields)}")
    for name, value in table.items():
        if name not in fields:
            raise UsageError(f"{path}: [{key}] has no setting {name!r}; known: "
                             f"{', '.join(fields)}")
        if name == "tight":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 1:
                raise UsageError(f"{path}: [{key}] tight = {value!r}: must be the widest "
                                 "speedup interval (hi/lo) that ends timing, above 1 (e.g. 1.2)")
            continue
        whole = fields[name] in ("int", int)
        low = -1 if name == "warmup" else 0
        if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)) \
                or not value > low:
            raise UsageError(f"{path}: [{key}] {name} = {value!r}: must be a "
                             + ("whole number" if whole else "number of seconds")
                             + (" (0 or more)" if low < 0 else " above 0"))
    return TimingPolicy(**table)


def _read_toml(path: Any, label: str = "--config") -> dict[str, Any]:
    from pathlib import Path

    try:
        import tomllib
    except ImportError:  # pragma: no cover - Python 3.10
        raise UsageError(f"{label} needs Python 3.11+ (tomllib)") from None
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{label} {p}: no such file")
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{label} {p}: not valid TOML: {exc}") from None
    return {k.replace("-", "_"): v for k, v in data.items()}
