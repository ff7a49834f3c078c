"""Node, evaluation and artifact rows of a run: the search graph as the store keeps it.

A mixin of `Store` (which supplies the connection, the lock and the object store), kept in its own
module because it is the half of the store the search engine talks to on every step. The rules
that make resume safe live here:
- a node's id is the next integer in its run, assigned inside the write transaction;
- a node's source goes into the object store before its row is committed, so a committed node
  always has its source;
- an evaluation and the node's verdict (status, stage, fitness, speedup) commit together, and a
  node can have only one evaluation: a second one raises `EvaluationExistsError`;
- an infrastructure failure (worker died, machine trouble) is not a verdict on the candidate: the
  node is marked `infra_failed` with no fitness, never fitness 0, so it can be retried.
"""
from __future__ import annotations

import math
import sqlite3
import time
from typing import TYPE_CHECKING, Any, Iterable

from kernelevolve.store.errors import EvaluationExistsError, StoreError
from kernelevolve.store.funnel import funnel_counts
from kernelevolve.store.records import (
    ArtifactRecord, Node, artifact_from_row, from_json, node_from_row, to_json)
from kernelevolve.types import STAGES, EvalResult

if TYPE_CHECKING:
    from kernelevolve.store.objects import ObjectStore

SOURCE_KIND, SOURCE_NAME = "source", "candidate.py"


class NodesMixin:
    objects: "ObjectStore"

    # -- nodes -------------------------------------------------------------------------------

    def add_node(self, run_id: str, *, parents: Iterable[int], operator: str, rationale: str,
                 source: str, meta: dict[str, Any] | None = None, cost: float = 0.0,
                 status: str = "pending") -> Node:
        """Store a candidate as the run's next node (ids 0, 1, 2, ...), status `pending`.

        `status="root"` marks the baseline node (the reference itself), which the funnel skips.
        """
        if status not in ("pending", "root"):
            raise StoreError(f"a new node is 'pending' or 'root', not {status!r}")
        parents = [int(p) for p in parents]
        meta_json = to_json(meta or {}, "node meta")
        source_hash = self.objects.put(source)
        with self._write() as conn:
            self._require_run(conn, run_id)
            known = {r[0] for r in conn.execute(
                f"SELECT id FROM nodes WHERE run_id = ? AND id IN ({','.join('?' * len(parents))})",
                (run_id, *parents))} if parents else set()
            if missing := [p for p in parents if p not in known]:
                raise StoreError(f"run {run_id} has no node(s) {missing} to be parents")
            node_id = conn.execute("SELECT COALESCE(MAX(id) + 1, 0) FROM nodes WHERE run_id = ?",
                                   (run_id,)).fetchone()[0]
            conn.execute(
                "INSERT INTO nodes(run_id, id, parents, operator, rationale, source_hash, status, "
                "cost, meta, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run_id, node_id, to_json(parents, "parents"), operator, rationale, source_hash,
                 status, float(cost), meta_json, time.time()))
            conn.execute("INSERT INTO artifacts(run_id, node_id, kind, name, object_hash) "
                         "VALUES (?, ?, ?, ?, ?)",
                         (run_id, node_id, SOURCE_KIND, SOURCE_NAME, source_hash))
        return self.node(run_id, node_id)

    def node(self, run_id: str, node_id: int) -> Node:
        rows = self._query("SELECT * FROM nodes WHERE run_id = ? AND id = ?", (run_id, node_id))
        if not rows:
            raise StoreError(f"run {run_id} has no node {node_id}")
        return node_from_row(rows[0])

    def nodes(self, run_id: str) -> list[Node]:
        return [node_from_row(r) for r in
                self._query("SELECT * FROM nodes WHERE run_id = ? ORDER BY id", (run_id,))]

    def node_by_source(self, run_id: str, source_hash: str) -> Node | None:
        """The first node of the run with this source, if any (dedup before evaluating)."""
        rows = self._query("SELECT * FROM nodes WHERE run_id = ? AND source_hash = ? "
                           "ORDER BY id LIMIT 1", (run_id, source_hash))
        return node_from_row(rows[0]) if rows else None

    def source(self, run_id: str, node_id: int) -> str:
        return self.objects.get_text(self.node(run_id, node_id).source_hash)

    # -- evaluations -------------------------------------------------------------------------

    def record_evaluation(self, run_id: str, node_id: int, result: EvalResult,
                          wall_s: float) -> None:
        """Store the node's one evaluation (the EvalResult as JSON) and its verdict, atomically."""
        if not isinstance(result, EvalResult):
            raise StoreError(f"evaluation of node {node_id} is a {type(result).__name__}, "
                             "not an EvalResult")
        stage = result.stage
        if stage not in STAGES:
            raise StoreError(f"evaluation of node {node_id} has stage {stage!r}; "
                             f"expected one of {STAGES}")
        fitness, speedup = _finite(result.fitness), _finite(result.speedup)
        payload = to_json(result.to_dict(), f"evaluation of node {node_id}")
        with self._write() as conn:
            self._require_node(conn, run_id, node_id)
            try:
                conn.execute("INSERT INTO evaluations(run_id, node_id, created, wall_s, result) "
                             "VALUES (?, ?, ?, ?, ?)",
                             (run_id, node_id, time.time(), float(wall_s), payload))
            except sqlite3.IntegrityError:
                raise EvaluationExistsError(
                    f"node {node_id} of run {run_id} already has an evaluation; "
                    "a completed evaluation is never repeated") from None
            conn.execute("UPDATE nodes SET status = 'done', stage = ?, fitness = ?, speedup = ? "
                         "WHERE run_id = ? AND id = ?", (stage, fitness, speedup, run_id, node_id))
            self._touch(conn, run_id)

    def mark_infra_failure(self, run_id: str, node_id: int, reason: str) -> None:
        """The harness, not the candidate, failed: no verdict, no fitness; retryable."""
        with self._write() as conn:
            row = self._require_node(conn, run_id, node_id)
            if row["status"] == "done":
                raise StoreError(f"node {node_id} of run {run_id} already has an evaluation; "
                                 "it cannot become an infrastructure failure")
            meta = from_json(row["meta"]) or {}
            meta["infra_failure"] = reason
            meta["infra_failures"] = int(meta.get("infra_failures", 0)) + 1
            conn.execute("UPDATE nodes SET status = 'infra_failed', fitness = NULL, meta = ? "
                         "WHERE run_id = ? AND id = ?", (to_json(meta, "node meta"), run_id,
                                                         node_id))
            self._touch(conn, run_id)

    def evaluation(self, run_id: str, node_id: int) -> EvalResult | None:
        rows = self._query("SELECT result FROM evaluations WHERE run_id = ? AND node_id = ?",
                           (run_id, node_id))
        return EvalResult.from_dict(from_json(rows[0][0])) if rows else None

    def evaluations(self, run_id: str) -> list[tuple[int, EvalResult]]:
        """(node_id, result) in completion order (the order they were recorded)."""
        return [(r[0], EvalResult.from_dict(from_json(r[1]))) for r in self._query(
            "SELECT node_id, result FROM evaluations WHERE run_id = ? ORDER BY rowid", (run_id,))]

    def eval_count(self, run_id: str) -> int:
        return self._query("SELECT COUNT(*) FROM evaluations WHERE run_id = ?", (run_id,))[0][0]

    def funnel(self, run_id: str) -> dict[str, int]:
        """Where this run's candidates stopped; see `kernelevolve.store.funnel`."""
        groups = self._query("SELECT status, stage, COUNT(*) FROM nodes WHERE run_id = ? "
                             "GROUP BY status, stage", (run_id,))
        def events(kind: str) -> int:
            return self._query("SELECT COUNT(*) FROM events WHERE run_id = ? AND kind = ?",
                               (run_id, kind))[0][0]

        return funnel_counts(((r[0], r[1], r[2]) for r in groups), events("generation_failure"),
                             events("llm_error"))

    # -- artifacts ---------------------------------------------------------------------------

    def add_artifact(self, run_id: str, node_id: int, kind: str, name: str,
                     data: bytes | str) -> str:
        """Store bytes for a node (a library, a log...); the same (kind, name) is replaced."""
        digest = self.objects.put(data)
        with self._write() as conn:
            self._require_node(conn, run_id, node_id)
            conn.execute("INSERT INTO artifacts(run_id, node_id, kind, name, object_hash) "
                         "VALUES (?, ?, ?, ?, ?) ON CONFLICT(run_id, node_id, kind, name) "
                         "DO UPDATE SET object_hash = excluded.object_hash",
                         (run_id, node_id, kind, name, digest))
        return digest

    def artifacts(self, run_id: str, node_id: int) -> list[ArtifactRecord]:
        return [artifact_from_row(r) for r in self._query(
            "SELECT * FROM artifacts WHERE run_id = ? AND node_id = ? ORDER BY kind, name",
            (run_id, node_id))]

    def artifact(self, run_id: str, node_id: int, kind: str, name: str) -> bytes:
        rows = self._query("SELECT object_hash FROM artifacts WHERE run_id = ? AND node_id = ? "
                           "AND kind = ? AND name = ?", (run_id, node_id, kind, name))
        if not rows:
            raise StoreError(f"node {node_id} of run {run_id} has no {kind} artifact {name!r}")
        return self.objects.get(rows[0][0])

    # -- helpers -----------------------------------------------------------------------------

    def _require_node(self, conn: sqlite3.Connection, run_id: str, node_id: int) -> sqlite3.Row:
        row = conn.execute("SELECT * FROM nodes WHERE run_id = ? AND id = ?",
                           (run_id, node_id)).fetchone()
        if row is None:
            self._require_run(conn, run_id)
            raise StoreError(f"run {run_id} has no node {node_id}")
        return row


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None
