"""A run: one search on one problem, persisted in a workspace so it survives a crash.

`Run.create` records the problem, the configuration and the seed candidates; `Run.execute`
starts the workers, rebuilds the search graph from the store (so a killed run resumes with no
completed evaluation repeated and no duplicated root), runs the engine, re-measures the
finalists and stores the outcome.
"""
from __future__ import annotations

import asyncio
import hashlib
import secrets
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from kernelevolve import preflight, upfront
from kernelevolve.candidate_file import Candidate, read_candidate
from kernelevolve.config import RunConfig, api_key_var
from kernelevolve.errors import KernelevolveError, UsageError
from kernelevolve.harness.driver.evaluate import EvalOptions
from kernelevolve.harness.gates.integrity import IntegrityPolicy
from kernelevolve.operators.registry import OperatorDeps, make_operators
from kernelevolve.problem import load_problem
from kernelevolve.run_agent import agent_settings
from kernelevolve.run_hooks import CostMeter, StoreHooks, node_from_record
from kernelevolve.search.acceptance import decide
from kernelevolve.search.baselines import compile_known, figures, fitness_for
from kernelevolve.search.engine import STOPPED_BY_FAILURES, EngineConfig, SearchEngine
from kernelevolve.search.graph import ROOT, Node, SearchGraph
from kernelevolve.search.memory import fitness_interval
from kernelevolve.search.policies import make_policy
from kernelevolve.search.termination import Progress
from kernelevolve.store import Store
from kernelevolve.types import EvalResult

if TYPE_CHECKING:  # pragma: no cover - the summary is built on demand
    from kernelevolve.report.summary import RunSummary

DEFAULT_WORKSPACE = Path(".kernelevolve")
# What must match for measurements from before a resume to be comparable with those after.
# The registered platforms' toolkit keys and languages' library keys are added (fingerprint_keys).
FINGERPRINT_KEYS = ("platform", "device", "devices", "driver", "torch", "cxx", "cpu_model",
                    "threads")


def fingerprint_keys() -> tuple[str, ...]:
    from kernelevolve.plugins import library_keys, toolkit_labels

    return (*FINGERPRINT_KEYS, *toolkit_labels(), *library_keys())


class RunError(KernelevolveError):
    """A run that cannot start or continue as asked (changed fingerprint, finished run...)."""


def new_run_id() -> str:
    return time.strftime("r%Y%m%d-%H%M%S-") + secrets.token_hex(3)


class Run:
    def __init__(self, store: Store, run_id: str, workspace: Path):
        self.store, self.workspace = store, Path(workspace)
        self.id = store.get_run(run_id).id
        self.config = RunConfig.from_dict(self.record.config)
        # the run's one torch.compile timing (search/baselines.py): set when the search starts
        self._compile_done, self._compile_pending = True, False

    # ---- creation and loading ----------------------------------------------------------------
    @classmethod
    def create(cls, problem_path: str | Path, config: RunConfig,
               seeds: list[str | Path] = (), workspace: str | Path = DEFAULT_WORKSPACE) -> "Run":
        config.validate()
        problem = load_problem(problem_path)
        sources = []
        for seed in seeds:
            cand = read_candidate(seed, "--seed-candidate")
            sources.append((Path(cand.name), cand.source))
        preflight.check_run(config)  # a run is created only when its search can start
        upfront.check_seeds([(str(path), src) for path, src in sources], config.platform)
        upfront.check_memory(problem.path)
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

    def summary(self) -> "RunSummary":
        """What `kernelevolve show` prints (`.to_json()`: what `show --json` prints)."""
        from kernelevolve.report.summary import run_summary

        return run_summary(self)

    def best_source(self) -> str | None:
        return self.summary().best_source

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
            node = node_from_record(rec)
            node.order = order.get(rec.id)
            if rec.status == "done":
                result = self.store.evaluation(self.id, rec.id)
                if result is not None:
                    node.meta["reason"] = (result.reason or "")[:2000]
                    fitness = fitness_for(result, self.config.baseline)
                    if fitness is not None:  # one baseline, also for runs stored before that
                        node.fitness = fitness
                    node.sol_fraction = result.sol_fraction
                    node.meta["fitness_ci"] = fitness_interval(node, result)
            graph.add(node)
        return graph

    def progress(self, graph: SearchGraph) -> Progress:
        progress = Progress(elapsed_s=self.record.elapsed_s)
        best, best_sol = 0.0, None
        for node in graph.evaluated():
            if node.accepted and node.fitness and node.fitness > best:
                best, best_sol = node.fitness, node.sol_fraction
            progress.note_evaluation(best, best_sol)
        return progress

    # ---- execution -----------------------------------------------------------------------------
    def execute(self, *, force: bool = False, on_change: Callable[[], None] | None = None,
                on_status: Callable[[str], None] | None = None,
                ray_address: str | None = None) -> dict[str, Any]:
        """Run (or continue) the search; `ray_address` overrides the configured cluster."""
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
        preflight.check_run(cfg)
        say("starting sandboxed workers" if cfg.executor == "local" else
            "starting evaluation actors on the Ray cluster")
        options = self._options(cfg.search_timing)
        self._search_options = options  # the agent's tool evaluations restrict these
        from kernelevolve.executors import make_executor

        llm_config = self._llm_config()
        secret_vars = (api_key_var(llm_config),) if llm_config else ()
        try:
            executor = make_executor(cfg, options, secret_vars=secret_vars,
                                     ray_address=ray_address, on_event=lambda kind, data:
                                     self.store.add_event(self.id, kind, data))
        except BaseException:  # no cluster, no sandbox: nothing ran; resume once it is fixed
            self.store.set_run_status(self.id, "interrupted")
            raise
        try:
            engine, hooks, graph, fingerprint = self._start_search(executor, problem, llm_config,
                                                                   force, on_change)
        except BaseException:  # the search never started: nothing lost, resumable once fixed
            executor.close()
            self.store.set_run_status(self.id, "interrupted")
            raise
        try:
            say("searching")
            try:
                stop_reason = asyncio.run(engine.run())
            except BaseException:
                hooks.flush_elapsed()
                self.store.set_run_status(self.id, "interrupted")
                raise
            hooks.flush_elapsed()
            self.store.add_event(self.id, "stopped", {"reason": stop_reason})
            outcome = self._finalize(executor, problem, graph, stop_reason, say,
                                     on_change or (lambda: None))
            if cfg.learn:
                self._learn(graph, outcome, fingerprint)
        finally:
            executor.close()
        self.store.set_run_status(self.id, "completed", outcome)
        if outcome.get("safe") and outcome.get("node_id") is not None:
            (self._dir() / "best.py").write_text(self.store.source(self.id, outcome["node_id"]))
        return outcome

    def best_path(self) -> Path | None:
        """runs/ID/best.py, written only for a safe improvement."""
        outcome = self.outcome or {}
        if not outcome.get("safe") or outcome.get("node_id") is None:
            return None
        return self.workspace / "runs" / self.id / "best.py"

    def _start_search(self, executor, problem, llm_config, force: bool, on_change):
        """Fingerprint check, operators and the engine: everything before the first proposal."""
        cfg = self.config
        fingerprint = executor.fingerprint()
        self._check_fingerprint(fingerprint, force)
        self.store.add_event(self.id, "executor_started", executor.describe())
        meter = CostMeter(self.store, self.id)
        deps = self._operator_deps(problem.path, llm_config, meter)
        if cfg.agent and llm_config is not None:
            deps.agent = agent_settings(self, executor, problem, meter)
        self.store.set_run_status(self.id, "running")
        graph = self.graph()
        self.live_graph = graph
        hooks = StoreHooks(self)
        self._compile_pending = False
        self._compile_done = compile_known(
            figures(hooks.result(n.id) for n in graph.evaluated()))

        def facts() -> dict[str, Any]:
            return {"baseline": cfg.baseline,
                    "baselines": figures(hooks.result(n.id) for n in graph.evaluated())}

        engine = SearchEngine(
            graph=graph, operators=make_operators(cfg.operators, deps),
            memory=hooks.memory, meter=meter, fingerprint=fingerprint, facts=facts,
            policy=make_policy(cfg.policy),
            evaluate=lambda node, source: self._evaluate(executor, problem, node, source),
            hooks=hooks, budgets=cfg.budgets, progress=self.progress(graph),
            problem_path=problem.path, problem_source=Path(problem.path).read_text(),
            platform=cfg.platform, on_change=on_change,
            # the engine's in-flight bound; the executor itself never runs more than its slots
            config=EngineConfig(max_in_flight=cfg.max_in_flight or executor.slots,
                                seed=cfg.seed))
        self.live_progress = engine.progress
        return engine, hooks, graph, fingerprint

    def _llm_config(self):
        if not self.config.llm:
            return None
        from kernelevolve.llm import LLMConfig

        return LLMConfig.from_dict(self.config.llm)

    def knowledge_folders(self) -> tuple[list[Path], Path]:
        return [Path(p) for p in self.config.notes], self.workspace / "knowledge" / "learned"

    def _operator_deps(self, problem_path: str, llm_config, meter) -> OperatorDeps:
        client = index = None
        if llm_config is not None:
            from kernelevolve.knowledge import workspace_index
            from kernelevolve.llm import LLMClient

            client = LLMClient(llm_config, on_call=meter.record)
            # curated notes, `kb add`-ed notes, --notes folders, then what earlier runs learned
            index = workspace_index(self.workspace, [Path(p) for p in self.config.notes])
        from kernelevolve.target import resolve

        return OperatorDeps(problem_path=problem_path, platform=resolve(self.config.platform),
                            language=self.config.language, llm_client=client, knowledge=index)

    def _learn(self, graph: SearchGraph, outcome: dict[str, Any], fp: dict[str, Any]) -> None:
        from kernelevolve.learning import learn_from_run

        _, learned = self.knowledge_folders()
        paths = learn_from_run(self, graph, outcome, fp, learned)
        for path in paths:
            self.store.add_event(self.id, "learned_note", {"path": str(path)})

    def _candidate(self, node_id: int, source: str) -> Candidate:
        """A node's source, from the store, as the executor takes it; its nodes/ file (kept for
        users) only names it."""
        return Candidate(source, str(self._dir() / "nodes" / f"node{node_id}.py"))

    async def _evaluate(self, executor, problem, node: Node, source: str) -> EvalResult:
        candidate = self._candidate(node.id, source)
        options = None
        if self._wants_compile_figures():
            # The run's one torch.compile measurement (search/baselines.py), for the prompts.
            self._compile_pending = True
            options = self._options(self.config.search_timing, time_compile=True)
        try:
            result = await executor.evaluate(problem, candidate, options)
        finally:
            if options is not None:
                self._compile_pending = False
        if options is not None and compile_known(figures([result])):
            self._compile_done = True
        return result

    def _options(self, timing, time_compile: bool = False) -> EvalOptions:
        cfg = self.config
        return EvalOptions(timing=timing, baseline=cfg.baseline, time_compile=time_compile,
                           integrity=IntegrityPolicy(allow_no_kernel=cfg.allow_no_kernel,
                                                     strict=cfg.strict))

    def _wants_compile_figures(self) -> bool:
        cfg = self.config
        return (cfg.baseline == "eager" and cfg.compile_figures
                and ("llm" in cfg.operators or cfg.time_compile)
                and not self._compile_done and not self._compile_pending)

    def _check_fingerprint(self, current: dict[str, Any], force: bool) -> None:
        stored = self.record.fingerprint or {}
        changed = [k for k in fingerprint_keys() if k in stored and stored.get(k) != current.get(k)]
        if changed and not force:
            detail = "; ".join(f"{k}: {stored.get(k)!r} -> {current.get(k)!r}" for k in changed[:4])
            raise RunError(f"the platform changed since run {self.id} started ({detail}); timings "
                           "would not be comparable. Resume with --force to continue anyway")
        if changed:
            self.store.add_event(self.id, "fingerprint_changed", {"keys": changed})
        self.store.update_fingerprint(self.id, current)

    def _finalize(self, executor, problem, graph: SearchGraph, stop_reason: str, say,
                  notify) -> dict[str, Any]:
        from kernelevolve.run_final import FinalProgress, finalists_of, remeasure

        finalists = finalists_of(self, graph.ranked()[: self.config.final_top_k])
        remeasured = []
        if finalists:  # nothing accepted: no phase to announce
            say("re-measuring the finalists")
            remeasured = remeasure(self, executor, problem, FinalProgress(finalists),
                                   self._options(self.config.final_timing),
                                   lambda nid: self._candidate(nid, self.store.source(self.id,
                                                                                      nid)),
                                   notify)
        outcome = decide(remeasured, stop_reason, self.config.baseline)
        outcome["safe"] = outcome["kind"] == "improved"  # best.py is written only then
        if stop_reason.startswith(STOPPED_BY_FAILURES):
            outcome["kind"] = "stopped_by_failures"
            outcome["message"] = f"{stop_reason}. Until then: {outcome['message']}"
        elif not graph.candidates():
            outcome["kind"] = "nothing_to_search"
            outcome["message"] = self._nothing_to_search()
        return outcome

    def _nothing_to_search(self) -> str:
        """The one outcome line of a search that had no candidate: why, and what to do."""
        events = self.store.events(self.id, "synth_not_covered")
        why = events[0].data.get("reason", "") if events else ""
        drafted = (f"the built-in synthesizer cannot draft this problem yet (it stops at: "
                   f"{why})" if why else "no seed candidate and nothing drafted one")
        return (f"nothing to search from: {drafted}; pass --seed-candidate FILE or configure "
                "an LLM (--llm)")


def _seed_meta(source: str) -> dict[str, Any]:
    """A seed's tunable configuration, so tune never proposes the seed itself again."""
    from kernelevolve.operators.tune import tune_meta

    try:
        return tune_meta(source) or {}
    except ValueError:  # malformed TUNABLES: tune will skip this parent and say why
        return {}


def file_hash(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
