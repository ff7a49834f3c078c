"""Rows read back from the store, as small dataclasses with JSON columns already decoded.

Why records instead of sqlite3.Row: callers (search engine, CLI, report) should not know column
order or that `config` is stored as text. Run, event and artifact records are frozen, so they
cannot be mistaken for live state (update the store, then read a fresh record); a `Node` is the
search graph's own type, read fresh from the store on every call.
"""
from __future__ import annotations

import json
import math
import os
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from kernelevolve.store.errors import StoreError

RUN_STATUSES = ("running", "completed", "failed", "interrupted")
NODE_STATUSES = ("pending", "done", "infra_failed", "root")


@dataclass(frozen=True)
class RunRecord:
    id: str
    created: float
    updated: float
    status: str
    problem_path: str | None
    problem_hash: str | None
    platform: str | None
    config: dict[str, Any] = field(default_factory=dict)
    fingerprint: dict[str, Any] = field(default_factory=dict)
    outcome: dict[str, Any] | None = None
    elapsed_s: float = 0.0


@dataclass
class Node:
    """A candidate and its measured state: the one node type of the search graph
    (search/graph.py) and of the store, which hands back a fresh one on every read (changing it
    changes nothing stored). Derived state (evaluated, accepted, buggy) is computed, never kept."""

    id: int
    parents: tuple[int, ...]
    operator: str
    rationale: str
    source_hash: str
    status: str = "pending"             # pending | done | infra_failed | root
    stage: str | None = None            # gate stage reached, "accepted" when it passed
    fitness: float | None = None        # weighted speedup; 0 when rejected; None when unmeasured
    speedup: float | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    order: int | None = None            # completion order among evaluations (0, 1, ...)
    sol_fraction: float | None = None   # weighted fraction of the machine's speed of light
    run_id: str = ""                    # the store's columns; empty for a node never stored
    cost: float = 0.0
    created: float = 0.0

    @property
    def evaluated(self) -> bool:
        return self.status == "done"

    @property
    def accepted(self) -> bool:
        return self.status == "done" and self.stage == "accepted"

    @property
    def buggy(self) -> bool:
        return self.status == "done" and self.stage != "accepted"


@dataclass(frozen=True)
class EventRecord:
    run_id: str
    seq: int
    ts: float
    kind: str
    data: dict[str, Any]


@dataclass(frozen=True)
class ArtifactRecord:
    run_id: str
    node_id: int
    kind: str
    name: str
    object_hash: str


def to_json(value: Any, what: str) -> str:
    """Strict JSON text for a column. Non-finite floats become null (as in EvalResult.to_dict),
    paths become strings; anything else unserialisable is a StoreError naming the column."""
    try:
        return json.dumps(_clean(value), allow_nan=False, default=_default, sort_keys=True)
    except (TypeError, ValueError) as e:
        raise StoreError(f"cannot store {what} as JSON: {e}") from None


def from_json(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def _default(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def run_from_row(row: sqlite3.Row) -> RunRecord:
    return RunRecord(
        id=row["id"], created=row["created"], updated=row["updated"], status=row["status"],
        problem_path=row["problem_path"], problem_hash=row["problem_hash"],
        platform=row["platform"], config=from_json(row["config"]) or {},
        fingerprint=from_json(row["fingerprint"]) or {}, outcome=from_json(row["outcome"]),
        elapsed_s=row["elapsed_s"] or 0.0)


def node_from_row(row: sqlite3.Row) -> Node:
    return Node(
        run_id=row["run_id"], id=row["id"], parents=tuple(from_json(row["parents"]) or ()),
        operator=row["operator"], rationale=row["rationale"], source_hash=row["source_hash"],
        status=row["status"], stage=row["stage"], fitness=row["fitness"], speedup=row["speedup"],
        cost=row["cost"] or 0.0, meta=from_json(row["meta"]) or {}, created=row["created"])


def event_from_row(row: sqlite3.Row) -> EventRecord:
    return EventRecord(run_id=row["run_id"], seq=row["seq"], ts=row["ts"], kind=row["kind"],
                       data=from_json(row["data"]) or {})


def artifact_from_row(row: sqlite3.Row) -> ArtifactRecord:
    return ArtifactRecord(run_id=row["run_id"], node_id=row["node_id"], kind=row["kind"],
                          name=row["name"], object_hash=row["object_hash"])
