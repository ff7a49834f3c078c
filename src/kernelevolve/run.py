"""A run: one search on one problem, persisted in a workspace so it survives a crash.

`Run.create` records the problem, the configuration and the seed candidates; `Run.execute`
starts the workers, rebuilds the search graph from the store (so a killed run resumes with no
completed evaluation repeated and no duplicated root), runs the engine, re-measures the
finalists and stores the outcome.
"""
from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from kernelevolve.errors import KernelevolveError, UsageError
from kernelevolve.harness.evaluate import EvalOptions, Evaluator
from kernelevolve.harness.integrity import IntegrityPolicy
from kernelevolve.harness.timing import TimingPolicy
from kernelevolve.operators.base import Draft
from kernelevolve.operators.registry import make_operators
from kernelevolve.problem import load_problem
from kernelevolve.search.acceptance import decide
from kernelevolve.search.engine import EngineConfig, SearchEngine
from kernelevolve.search.graph import ROOT, Node, SearchGraph
from kernelevolve.search.policies import make_policy
from kernelevolve.search.termination import Budgets, Progress
from kernelevolve.store import Store

DEFAULT_WORKSPACE = Path(".kernelevolve")
# What must match for measurements from before a resume to be comparable with those after.
FINGERPRINT_KEYS = ("platform", "device", "devices", "driver", "cuda", "hip", "torch", "triton",
                    "cxx", "cpu_model", "threads")


class RunError(KernelevolveError):
    """A run that cannot start or continue as asked (changed fingerprint, finished run...)."""


@dataclass
class RunConfig:
    platform: str = "cpu"
    operators: list[str] = field(default_factory=lambda: ["tune"])
    policy: str = "ucb"
    workers: int = 1
    max_in_flight: int | None = None        # default: one evaluation per worker
    seed: int = 0
    budgets: Budgets = field(default_factory=Budgets)
    allow_no_kernel: bool = False
    strict: bool = False
    final_top_k: int = 3
    search_timing: TimingPolicy = field(default_factory=TimingPolicy)
    final_timing: TimingPolicy = field(default_factory=lambda: TimingPolicy(
        min_reps=30, min_time_s=1.0, max_time_s=6.0))
    sandbox: str | None = None

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
        if self.workers < 1:
            raise UsageError(f"--workers {self.workers}: at least one worker is needed")
        make_policy(self.policy)
        make_operators(self.operators)
        b = self.budgets
        if b.max_evals is not None and b.max_evals < 1:
            raise UsageError(f"--max-evals {b.max_evals}: must be at least 1")
        if b.max_time_s is not None and b.max_time_s <= 0:
            raise UsageError(f"--max-time {b.max_time_s}: must be positive")


def new_run_id() -> str:
    return time.strftime("r%Y%m%d-%H%M%S-") + secrets.token_hex(3)


class _Hooks:
    """Persists what the engine does; every write is one transaction in the store."""

    def __init__(self, run: "Run"):
        self.run, self.store, self.run_id = run, run.store, run.id
        self._last_elapsed_save = time.monotonic()

    def add_node(self, draft: Draft) -> Node:
        rec = self.store.add_node(self.run_id, parents=list(draft.parents), operator=draft.operator,
                                  rationale=draft.rationale, source=draft.source, meta=draft.meta)
        self.run._write_source(rec.id, draft.source)
        return _node(rec)

    def record(self, node: Node, result: dict[str, Any], wall_s: float) -> None:
        self.store.record_evaluation(self.run_id, node.id, result, wall_s)
        now = time.monotonic()
        self.store.add_elapsed(self.run_id, now - self._last_elapsed_save)
        self._last_elapsed_save = now

    def infra_failure(self, node: Node, reason: str) -> None:
        self.store.mark_infra_failure(self.run_id, node.id, reason)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        self.store.add_event(self.run_id, kind, data)

    def source(self, node_id: int) -> str:
        return self.store.source(self.run_id, node_id)

    def flush_elapsed(self) -> None:
        now = time.monotonic()
        self.store.add_elapsed(self.run_id, now - self._last_elapsed_save)
        self._last_elapsed_save = now


def _node(rec: Any) -> Node:
    status = "root" if rec.id == ROOT else rec.status
    fitness = 1.0 if rec.id == ROOT else rec.fitness
    return Node(id=rec.id, parents=tuple(rec.parents), operator=rec.operator,
                rationale=rec.rationale, source_hash=rec.source_hash, status=status,
                stage=rec.stage, fitness=fitness, speedup=rec.speedup, meta=dict(rec.meta or {}))


class Run:
    def __init__(self, store: Store, run_id: str, workspace: Path):
        self.store, self.workspace = store, Path(workspace)
        self.id = store.get_run(run_id).id
        self.config = RunConfig.from_dict(self.record.config)

    # ---- creation and loading ----------------------------------------------------------------
    @classmethod
    def create(cls, problem_path: str | Path, config: RunConfig,
               seeds: list[str | Path] = (), workspace: str | Path = DEFAULT_WORKSPACE) -> "Run":
        config.validate()
        problem = load_problem(problem_path)
        sources = []
        for seed in seeds:
            path = Path(seed)
            if not path.is_file():
                raise UsageError(f"--seed-candidate {seed}: no such file")
            sources.append((path, path.read_text()))
        store = Store.open(workspace)
        run_id = new_run_id()
        store.create_run(run_id, problem_path=problem.path, problem_hash=problem.source_hash,
                         platform=config.platform, config=config.to_dict(), fingerprint={})
        run = cls(store, run_id, Path(workspace))
        root = store.add_node(run_id, parents=[], operator="reference",
                              rationale="the PyTorch reference (the baseline, fitness 1.0)",
                              source=Path(problem.path).read_text(), meta={}, status="root")
        assert root.id == ROOT
        for path, source in sources:
            meta = _seed_meta(source)
            rec = store.add_node(run_id, parents=[ROOT], operator="seed",
                                 rationale=f"seed candidate {path.name}", source=source, meta=meta)
            run._write_source(rec.id, source)
        return run

    @classmethod
    def load(cls, run_id: str, workspace: str | Path = DEFAULT_WORKSPACE) -> "Run":
        if not Path(workspace, "kernelevolve.db").exists():
            raise UsageError(f"no kernelevolve workspace at {workspace}; pass --workspace DIR")
        return cls(Store.open(workspace), run_id, Path(workspace))

    @property
    def record(self):
        return self.store.get_run(self.id)

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def outcome(self) -> dict[str, Any] | None:
        return self.record.outcome

    def summary(self) -> dict[str, Any]:
        """What `kernelevolve show --json` prints."""
        from kernelevolve.report.summary import run_summary

        return run_summary(self)

    def best_source(self) -> str | None:
        return self.summary()["best_source"]

    def _dir(self) -> Path:
        path = self.workspace / "runs" / self.id
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _write_source(self, node_id: int, source: str) -> Path:
        path = self._dir() / "nodes" / f"node{node_id}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            path.write_text(source)
        return path

    # ---- state ---------------------------------------------------------------------------------
    def graph(self) -> SearchGraph:
        graph = SearchGraph()
        order = {nid: i for i, (nid, _) in enumerate(self.store.evaluations(self.id))}
        for rec in self.store.nodes(self.id):
            node = _node(rec)
            node.order = order.get(rec.id)
            if rec.status == "done":
                result = self.store.evaluation(self.id, rec.id) or {}
                node.meta["reason"] = (result.get("reason") or "")[:2000]
            graph.add(node)
        return graph

    def progress(self, graph: SearchGraph) -> Progress:
        progress = Progress(elapsed_s=self.record.elapsed_s)
        best = 0.0
        for node in graph.evaluated():
            if node.accepted and node.fitness:
                best = max(best, node.fitness)
            progress.note_evaluation(best)
        return progress

    # ---- execution -----------------------------------------------------------------------------
    def execute(self, *, force: bool = False, on_change: Callable[[], None] | None = None,
                on_status: Callable[[str], None] | None = None) -> dict[str, Any]:
        say = on_status or (lambda _msg: None)
        record = self.record
        if record.status == "completed":
            raise RunError(f"run {self.id} already completed: {record.outcome.get('message')}; "
                           "start a new one with `kernelevolve optimize`")
        problem = load_problem(record.problem_path)
        if problem.source_hash != record.problem_hash and not force:
            raise RunError(f"{record.problem_path} changed since run {self.id} started; "
                           "results would not be comparable (use --force to continue anyway)")
        cfg = self.config
        say("starting sandboxed workers")
        options = EvalOptions(timing=cfg.search_timing, integrity=IntegrityPolicy(
            allow_no_kernel=cfg.allow_no_kernel, strict=cfg.strict))
        from kernelevolve.executors.local import LocalExecutor

        executor = LocalExecutor(Evaluator(cfg.platform, workers=cfg.workers, options=options,
                                           sandbox_mode=cfg.sandbox), cfg.workers)
        try:
            self._check_fingerprint(executor.fingerprint(), force)
            self.store.set_run_status(self.id, "running")
            graph = self.graph()
            self.live_graph = graph
            hooks = _Hooks(self)
            engine = SearchEngine(
                graph=graph, operators=make_operators(cfg.operators),
                policy=make_policy(cfg.policy),
                evaluate=lambda node, source: self._evaluate(executor, problem, node),
                hooks=hooks, budgets=cfg.budgets, progress=self.progress(graph),
                problem_path=problem.path, problem_source=Path(problem.path).read_text(),
                platform=cfg.platform, on_change=on_change,
                config=EngineConfig(max_in_flight=cfg.max_in_flight or cfg.workers, seed=cfg.seed))
            self.live_progress = engine.progress
            say("searching")
            try:
                stop_reason = asyncio.run(engine.run())
            except BaseException:
                hooks.flush_elapsed()
                self.store.set_run_status(self.id, "interrupted")
                raise
            hooks.flush_elapsed()
            self.store.add_event(self.id, "stopped", {"reason": stop_reason})
            say("re-measuring the finalists")
            outcome = self._finalize(executor, problem, graph, stop_reason)
        finally:
            executor.close()
        self.store.set_run_status(self.id, "completed", outcome)
        if outcome.get("node_id") is not None:
            (self._dir() / "best.py").write_text(self.store.source(self.id, outcome["node_id"]))
        return outcome

    async def _evaluate(self, executor, problem, node: Node) -> dict[str, Any]:
        path = self._dir() / "nodes" / f"node{node.id}.py"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(self.store.source(self.id, node.id))
        result = await executor.evaluate(problem, path)
        return result.to_dict()

    def _check_fingerprint(self, current: dict[str, Any], force: bool) -> None:
        stored = self.record.fingerprint or {}
        changed = [k for k in FINGERPRINT_KEYS if k in stored and stored.get(k) != current.get(k)]
        if changed and not force:
            detail = "; ".join(f"{k}: {stored.get(k)!r} -> {current.get(k)!r}" for k in changed[:4])
            raise RunError(f"the platform changed since run {self.id} started ({detail}); timings "
                           "would not be comparable. Resume with --force to continue anyway")
        if changed:
            self.store.add_event(self.id, "fingerprint_changed", {"keys": changed})
        self.store.update_fingerprint(self.id, current)

    def _finalize(self, executor, problem, graph: SearchGraph, stop_reason: str) -> dict[str, Any]:
        finalists = graph.ranked()[: self.config.final_top_k]
        options = EvalOptions(timing=self.config.final_timing, integrity=IntegrityPolicy(
            allow_no_kernel=self.config.allow_no_kernel, strict=self.config.strict))
        remeasured = []
        for node in finalists:
            path = self._dir() / "nodes" / f"node{node.id}.py"
            result = asyncio.run(executor.evaluate(problem, path, options)).to_dict()
            self.store.add_event(self.id, "final_measurement", {"node_id": node.id,
                                                                "result": result})
            remeasured.append((node.id, result))
        outcome = decide(remeasured, stop_reason)
        if not graph.candidates():
            outcome["message"] += ("; nothing to search from: pass --seed-candidate FILE "
                                   "(built-in drafting arrives with the synth operator)")
        return outcome


def _seed_meta(source: str) -> dict[str, Any]:
    """A seed's tunable configuration, so tune never proposes the seed itself again."""
    from kernelevolve.operators.tune import tune_meta

    try:
        return tune_meta(source) or {}
    except ValueError:  # malformed TUNABLES: tune will skip this parent and say why
        return {}


def file_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
