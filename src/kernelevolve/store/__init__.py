"""Persistent store: one SQLite database (WAL) plus content-addressed objects per workspace.

    from kernelevolve.store import Store
    with Store.open(".kernelevolve") as store:
        run = store.create_run("r1", problem_path=..., problem_hash=..., platform="cpu",
                               config={}, fingerprint={})

Modules: `db` (Store: opening, runs, events), `nodes` (nodes, evaluations, artifacts, funnel),
`connect` (pragmas and migrations), `schema` (the versioned SQL), `objects` (blobs by sha256),
`records` (frozen row types), `funnel` (rejection counts).
"""
from __future__ import annotations

from kernelevolve.store.db import DB_NAME, DEFAULT_WORKSPACE, Store, default_workspace
from kernelevolve.store.errors import EvaluationExistsError, StoreError
from kernelevolve.store.funnel import FUNNEL_KEYS
from kernelevolve.store.objects import ObjectStore, sha256_hex
from kernelevolve.store.records import ArtifactRecord, EventRecord, Node, RunRecord
from kernelevolve.store.schema import SCHEMA_VERSION

__all__ = [
    "Store", "StoreError", "EvaluationExistsError", "ObjectStore", "SCHEMA_VERSION",
    "RunRecord", "Node", "EventRecord", "ArtifactRecord", "FUNNEL_KEYS", "DB_NAME",
    "DEFAULT_WORKSPACE", "default_workspace", "sha256_hex",
]
