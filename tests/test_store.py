"""The persistent store: real SQLite files under tmp_path, real threads, a real second process."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from kernelevolve.store import (
    SCHEMA_VERSION, EvaluationExistsError, ObjectStore, Store, StoreError, schema)
from kernelevolve.store.funnel import FUNNEL_KEYS, funnel_counts
from kernelevolve.store.objects import sha256_hex
from kernelevolve.types import CaseResult, EvalResult, SandboxFacts, TimingStats

RUN_KW = dict(problem_path="examples/relu/problem.py", problem_hash="p" * 64, platform="cpu",
              config={"max_evals": 10, "policy": "ucb"}, fingerprint={"device": "cpu", "gcc": "12"})


def result(stage: str, fitness: float = 0.0, speedup: float | None = None) -> EvalResult:
    return EvalResult(accepted=stage == "accepted", stage=stage, reason=f"stopped at {stage}",
                      fitness=fitness, speedup=speedup, cases=[CaseResult("small", 1.0)])


@pytest.fixture
def ws(tmp_path) -> Path:
    return tmp_path / "ws"


@pytest.fixture
def store(ws):
    with Store.open(ws) as s:
        yield s


@pytest.fixture
def run(store):
    return store.create_run("run-0001", **RUN_KW)


# -- creation --------------------------------------------------------------------------------

def test_open_creates_workspace_db_and_wal(ws):
    with Store.open(ws) as s:
        assert (ws / "kernelevolve.db").is_file()
        assert s.schema_version == SCHEMA_VERSION
        assert s.meta()["created_by"].startswith("kernelevolve ")
        assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert s._conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert s._conn.execute("PRAGMA busy_timeout").fetchone()[0] > 0
    assert (ws / ".gitignore").read_text() == "*\n"
    # The journal mode is persistent: a plain sqlite3 connection sees WAL too.
    conn = sqlite3.connect(ws / "kernelevolve.db")
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_reopen_keeps_data_and_closed_store_refuses(ws):
    with Store.open(ws) as s:
        s.create_run("r1", **RUN_KW)
    s = Store.open(ws)
    assert s.get_run("r1").config == RUN_KW["config"]
    s.close()
    s.close()  # idempotent
    with pytest.raises(StoreError, match="closed"):
        s.list_runs()


def test_workspace_that_is_a_file(tmp_path):
    (tmp_path / "ws").write_text("x")
    with pytest.raises(StoreError, match="directory"):
        Store.open(tmp_path / "ws")


# -- objects ---------------------------------------------------------------------------------

def test_objects_dedup_and_layout(tmp_path):
    objs = ObjectStore(tmp_path / "objects")
    h = objs.put("hello")
    assert h == sha256_hex(b"hello") == objs.put(b"hello")
    path = objs.path(h)
    assert path == tmp_path / "objects" / h[:2] / h[2:] and len(path.name) == 62
    assert objs.exists(h) and objs.get(h) == b"hello"
    assert [p.name for p in path.parent.iterdir()] == [h[2:]]  # once, and no temp files left
    mtime = path.stat().st_mtime_ns
    objs.put("hello")
    assert path.stat().st_mtime_ns == mtime  # not rewritten


def test_objects_errors(tmp_path):
    objs = ObjectStore(tmp_path / "objects")
    missing = sha256_hex("nope")
    assert not objs.exists(missing)
    with pytest.raises(StoreError, match="missing"):
        objs.get(missing)
    with pytest.raises(StoreError, match="not an object hash"):
        objs.path("../../etc/passwd")
    h = objs.put("data")
    objs.path(h).write_bytes(b"tampered")
    with pytest.raises(StoreError, match="corrupted"):
        objs.get(h)


# -- runs ------------------------------------------------------------------------------------

def test_run_create_get_prefix_list(store):
    a = store.create_run("a1b2c3", **RUN_KW)
    assert a.status == "running" and a.outcome is None and a.elapsed_s == 0
    assert a.fingerprint == RUN_KW["fingerprint"] and a.platform == "cpu"
    store.create_run("a1ffff", **RUN_KW)
    store.create_run("b00000", **RUN_KW)
    assert store.get_run("a1b2c3") == a
    assert store.get_run("a1b").id == "a1b2c3"
    assert store.get_run("b").id == "b00000"
    with pytest.raises(StoreError, match="ambiguous"):
        store.get_run("a1")
    with pytest.raises(StoreError, match=r"no run zz in .*`kernelevolve runs` lists them"):
        store.get_run("zz")
    assert [r.id for r in store.list_runs()] == ["b00000", "a1ffff", "a1b2c3"]
    with pytest.raises(StoreError, match="already exists"):
        store.create_run("a1b2c3", **RUN_KW)


def test_run_status_outcome_elapsed_fingerprint(store, run):
    store.set_run_status(run.id, "interrupted")
    assert store.get_run(run.id).status == "interrupted"
    store.set_run_status(run.id, "completed", {"verdict": "improved", "speedup": 1.7})
    store.set_run_status(run.id, "completed")  # outcome kept when not given
    got = store.get_run(run.id)
    assert got.outcome == {"verdict": "improved", "speedup": 1.7}
    assert got.updated >= got.created
    assert store.add_elapsed(run.id, 1.5) == 1.5
    assert store.add_elapsed(run.id, 2.0) == 3.5
    assert store.get_run(run.id).elapsed_s == 3.5
    store.update_fingerprint(run.id, {"device": "cpu", "gcc": "13"})
    assert store.get_run(run.id).fingerprint["gcc"] == "13"
    with pytest.raises(StoreError, match="unknown run status"):
        store.set_run_status(run.id, "done")
    with pytest.raises(StoreError, match="no run"):
        store.set_run_status("nope", "failed")
    with pytest.raises(StoreError, match="no run"):
        store.add_elapsed("nope", 1.0)


# -- nodes and evaluations -------------------------------------------------------------------

def test_node_ids_sequential_per_run_and_source_round_trip(store, run):
    other = store.create_run("run-0002", **RUN_KW)
    n0 = store.add_node(run.id, parents=[], operator="seed", rationale="root",
                        source="class ModelNew: pass\n", meta={"k": 1}, status="root")
    n1 = store.add_node(run.id, parents=[0], operator="tune", rationale="BLOCK 64->128",
                        source="BLOCK = 128\n", meta={"tunables": {"BLOCK": 128}}, cost=0.25)
    m0 = store.add_node(other.id, parents=[], operator="seed", rationale="", source="x = 1\n")
    assert (n0.id, n1.id, m0.id) == (0, 1, 0)
    assert n1.parents == (0,) and n1.status == "pending" and n1.cost == 0.25
    assert n1.meta == {"tunables": {"BLOCK": 128}} and n1.fitness is None
    assert store.source(run.id, 1) == "BLOCK = 128\n"
    assert store.node(run.id, 1) == n1
    assert [n.id for n in store.nodes(run.id)] == [0, 1]
    assert store.node_by_source(run.id, sha256_hex("BLOCK = 128\n")) == n1
    assert store.node_by_source(run.id, sha256_hex("x = 1\n")) is None
    assert store.node_by_source(other.id, sha256_hex("x = 1\n")).id == 0
    [art] = store.artifacts(run.id, 1)
    assert (art.kind, art.name, art.object_hash) == ("source", "candidate.py", n1.source_hash)
    with pytest.raises(StoreError, match="no node"):
        store.node(run.id, 7)
    with pytest.raises(StoreError, match=r"no node\(s\) \[5\]"):
        store.add_node(run.id, parents=[5], operator="x", rationale="", source="y")
    with pytest.raises(StoreError, match="no run"):
        store.add_node("nope", parents=[], operator="x", rationale="", source="y")


def test_record_evaluation_sets_verdict_once(store, run):
    store.add_node(run.id, parents=[], operator="seed", rationale="", source="a")
    store.add_node(run.id, parents=[0], operator="tune", rationale="", source="b")
    assert store.evaluation(run.id, 0) is None and store.eval_count(run.id) == 0
    store.record_evaluation(run.id, 1, result("accepted", 1.8, 1.8), wall_s=3.0)
    store.record_evaluation(run.id, 0, result("correctness"), wall_s=1.0)
    n1 = store.node(run.id, 1)
    assert (n1.status, n1.stage, n1.fitness, n1.speedup) == ("done", "accepted", 1.8, 1.8)
    assert n1.accepted and store.node(run.id, 0).stage == "correctness"
    assert store.evaluation(run.id, 1) == result("accepted", 1.8, 1.8)
    assert [nid for nid, _ in store.evaluations(run.id)] == [1, 0]  # completion order
    assert store.eval_count(run.id) == 2
    with pytest.raises(EvaluationExistsError, match="never repeated"):
        store.record_evaluation(run.id, 1, result("accepted", 9.0, 9.0), wall_s=1.0)
    assert store.node(run.id, 1).fitness == 1.8 and store.eval_count(run.id) == 2
    bogus = result("timing")
    bogus.stage = "bogus"  # a result changed after it was made: the store still refuses it
    with pytest.raises(StoreError, match="stage"):
        store.record_evaluation(run.id, 0, bogus, wall_s=0)
    with pytest.raises(StoreError, match="not an EvalResult"):
        store.record_evaluation(run.id, 0, {"stage": "timing"}, wall_s=0)
    with pytest.raises(StoreError, match="no node"):
        store.record_evaluation(run.id, 9, result("static"), wall_s=0)


def test_a_result_read_back_is_the_evalresult_that_was_stored(store, run, ws):
    """Every field survives SQLite: cases with their timings and intervals, the sandbox facts,
    nested dicts; read back (in this process and in a fresh store) it is an equal EvalResult."""
    timing = TimingStats(median_ms=2.0, q1_ms=1.9, q3_ms=2.2, min_ms=1.8, n=30)
    case = CaseResult("big", 2.0, correct=True, max_abs_err=1e-6, ref_ms=4.0, cand_ms=2.0,
                      speedup=2.0, speedup_ci=(1.8, 2.2), ref_timing=timing, cand_timing=timing,
                      held_out=False, bytes_moved=1 << 20, sol_bound="memory",
                      profile={"cpu_s": 0.5})
    stored = EvalResult(
        accepted=True, stage="accepted", reason="2.000x", speedup=2.0, speedup_ci=(1.8, 2.2),
        fitness=2.0, measured=True, sol_fraction=0.4, cases=[case, CaseResult("held", 1.0,
                                                                              held_out=True)],
        fingerprint={"device": "cpu"}, sandbox=SandboxFacts(method="bwrap", warnings=["w"]),
        language="cpp", problem="relu", source_hash="ab" * 32, wall_s=1.5,
        integrity={"reference_ops": {"big": ["aten::relu"]}}, libraries=["/x/lib.so"],
        builds=[{"name": "lib.so", "flags": ["-O3"]}], logs={"stdout": "hi"},
        measured_on={"executor": "local"}, partial={})
    store.add_node(run.id, parents=[], operator="seed", rationale="", source="a")
    store.record_evaluation(run.id, 0, stored, wall_s=1.0)
    back = store.evaluation(run.id, 0)
    assert isinstance(back, EvalResult) and back == stored
    assert isinstance(back.cases[0], CaseResult) and back.cases[0].speedup_ci == (1.8, 2.2)
    assert isinstance(back.cases[0].cand_timing, TimingStats)
    with Store.open(ws) as again:
        assert dict(again.evaluations(run.id)) == {0: stored}


def test_a_row_stored_by_an_older_version_still_reads(store, run):
    """Rows written before fields existed (no intervals, no sandbox, no measured_on), with keys
    since dropped and a stage this version does not know: read back typed, nothing lost that
    the row held, the unknown stage kept in the reason as a rejection."""
    store.add_node(run.id, parents=[], operator="seed", rationale="", source="a")
    store.add_node(run.id, parents=[0], operator="tune", rationale="", source="b")
    old = {"accepted": True, "stage": "accepted", "reason": "ok", "fitness": 1.4,
           "speedup": 1.4, "gone_field": 3, "cases": [{"name": "c", "weight": 1.0,
                                                       "ref_ms": 2.0, "old_case_key": 1}]}
    retired = {"stage": "compile", "reason": "g++ failed", "fitness": 0.0}
    with store._write() as conn:  # what an older kernelevolve wrote, bypassing this version
        for node_id, row in ((0, old), (1, retired)):
            conn.execute("INSERT INTO evaluations(run_id, node_id, created, wall_s, result) "
                         "VALUES (?, ?, 0, 0, ?)", (run.id, node_id, json.dumps(row)))
    first, second = store.evaluation(run.id, 0), store.evaluation(run.id, 1)
    assert (first.accepted, first.stage, first.speedup, first.speedup_ci) == (
        True, "accepted", 1.4, None)
    assert first.cases == [CaseResult("c", 1.0, ref_ms=2.0)] and first.sandbox == SandboxFacts()
    assert (second.accepted, second.stage) == (False, "run")
    assert "'compile'" in second.reason and "g++ failed" in second.reason


def test_infra_failure_is_not_a_verdict(store, run):
    store.add_node(run.id, parents=[], operator="seed", rationale="", source="a")
    store.mark_infra_failure(run.id, 0, "worker killed by OOM killer")
    store.mark_infra_failure(run.id, 0, "worker killed again")
    n = store.node(run.id, 0)
    assert n.status == "infra_failed" and n.fitness is None and n.stage is None
    assert n.meta["infra_failure"] == "worker killed again" and n.meta["infra_failures"] == 2
    assert store.eval_count(run.id) == 0
    store.record_evaluation(run.id, 0, result("timing"), wall_s=2.0)  # a retry may succeed
    assert store.node(run.id, 0).status == "done"
    with pytest.raises(StoreError, match="already has an evaluation"):
        store.mark_infra_failure(run.id, 0, "late")


def test_funnel_counts(store, run):
    store.add_node(run.id, parents=[], operator="ref", rationale="", source="ref", status="root")
    stages = ["static", "static", "load", "correctness", "integrity", "timing", "accepted",
              "accepted", "accepted"]
    for i, stage in enumerate(stages):
        store.add_node(run.id, parents=[0], operator="tune", rationale="", source=f"c{i}")
        store.record_evaluation(run.id, i + 1, result(stage, 1.0 if stage == "accepted" else 0),
                                wall_s=0.1)
    store.add_node(run.id, parents=[0], operator="tune", rationale="", source="pending")
    n = store.add_node(run.id, parents=[0], operator="tune", rationale="", source="infra")
    store.mark_infra_failure(run.id, n.id, "boom")
    store.add_event(run.id, "generation_failure", {"reason": "no code block"})
    store.add_event(run.id, "llm_error", {"error": "connection refused"})
    store.add_event(run.id, "llm_error", {"error": "connection refused"})
    f = store.funnel(run.id)
    assert set(f) == set(FUNNEL_KEYS)
    assert f == {"llm": 2, "generation": 1, "proposed": 11, "static": 2, "load": 1, "run": 0,
                 "correctness": 1, "integrity": 1, "timing": 1, "accepted": 3, "pending": 1,
                 "infra_failed": 1}
    assert funnel_counts([])["proposed"] == 0 and funnel_counts([])["generation"] == 0


# -- events and artifacts --------------------------------------------------------------------

def test_events_seq_per_run(store, run):
    other = store.create_run("run-0002", **RUN_KW)
    assert store.add_event(run.id, "start", {"resume": False}) == 0
    assert store.add_event(run.id, "best", {"node": 3, "fitness": float("inf")}) == 1
    assert store.add_event(other.id, "start") == 0
    assert store.add_event(run.id, "stop", {"why": "budget"}) == 2
    evs = store.events(run.id)
    assert [(e.seq, e.kind) for e in evs] == [(0, "start"), (1, "best"), (2, "stop")]
    assert evs[1].data == {"node": 3, "fitness": None}  # non-finite floats stored as null
    assert [e.seq for e in store.events(run.id, "stop")] == [2]
    with pytest.raises(StoreError, match="JSON"):
        store.add_event(run.id, "bad", {"x": object()})


def test_artifacts(store, run):
    store.add_node(run.id, parents=[], operator="seed", rationale="", source="src")
    h = store.add_artifact(run.id, 0, "log", "compile.txt", "g++ ok\n")
    store.add_artifact(run.id, 0, "library", "kernel.so", b"\x7fELF\x00")
    assert store.artifact(run.id, 0, "log", "compile.txt") == b"g++ ok\n"
    h2 = store.add_artifact(run.id, 0, "log", "compile.txt", "g++ ok, again\n")  # replaces
    assert h2 != h and store.artifact(run.id, 0, "log", "compile.txt") == b"g++ ok, again\n"
    assert [(a.kind, a.name) for a in store.artifacts(run.id, 0)] == [
        ("library", "kernel.so"), ("log", "compile.txt"), ("source", "candidate.py")]
    with pytest.raises(StoreError, match="no node"):
        store.add_artifact(run.id, 4, "log", "x", "y")
    with pytest.raises(StoreError, match="no log artifact"):
        store.artifact(run.id, 0, "log", "missing.txt")


# -- concurrency -----------------------------------------------------------------------------

def test_threads_get_unique_ids_and_lose_no_writes(store, run):
    per_thread, errors = 40, []

    def work(t: int) -> None:
        try:
            for i in range(per_thread):
                n = store.add_node(run.id, parents=[], operator=f"t{t}", rationale="",
                                   source=f"# thread {t} candidate {i}\n")
                store.record_evaluation(run.id, n.id, result("accepted", 1.0 + i, 1.0 + i), 0.01)
                store.add_event(run.id, "evaluated", {"node": n.id})
        except Exception as e:  # surfaced below; a thread's exception is otherwise lost
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    nodes = store.nodes(run.id)
    assert [n.id for n in nodes] == list(range(4 * per_thread))
    assert all(n.status == "done" for n in nodes)
    assert store.eval_count(run.id) == 4 * per_thread
    assert [e.seq for e in store.events(run.id)] == list(range(4 * per_thread))


def test_second_process_reads_while_first_is_open(store, run, ws):
    store.add_node(run.id, parents=[], operator="seed", rationale="", source="print('hi')\n")
    store.record_evaluation(run.id, 0, result("accepted", 2.0, 2.0), wall_s=1.0)
    code = ("import json, sys\nfrom kernelevolve.store import Store\n"
            "with Store.open(sys.argv[1]) as s:\n"
            "    r = s.get_run('run-0')\n"
            "    print(json.dumps({'id': r.id, 'n': s.eval_count(r.id),"
            " 'src': s.source(r.id, 0), 'fitness': s.node(r.id, 0).fitness}))\n")
    out = subprocess.run([sys.executable, "-c", code, str(ws)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {"id": run.id, "n": 1, "src": "print('hi')\n",
                                      "fitness": 2.0}
    # ...and the first process still writes afterwards.
    store.add_event(run.id, "after")
    assert store.events(run.id)[-1].kind == "after"


# -- migrations ------------------------------------------------------------------------------

def test_older_store_is_upgraded_in_place(ws, monkeypatch):
    with Store.open(ws) as s:
        s.create_run("old-run", **RUN_KW)
        s.add_node("old-run", parents=[], operator="seed", rationale="", source="old source")
        s.record_evaluation("old-run", 0, result("accepted", 1.5, 1.5), wall_s=1.0)
        assert s.schema_version == 1
    v2 = (2, ["ALTER TABLE nodes ADD COLUMN tokens INTEGER NOT NULL DEFAULT 0",
              "CREATE TABLE llm_calls (run_id TEXT, seq INTEGER, PRIMARY KEY(run_id, seq))"])
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, v2])
    with Store.open(ws) as s:
        assert s.schema_version == 2 and s.meta()["migrated_by"].startswith("kernelevolve")
        cols = {r[1] for r in s._conn.execute("PRAGMA table_info(nodes)")}
        assert "tokens" in cols
        s._conn.execute("INSERT INTO llm_calls VALUES ('old-run', 0)")
        assert s.get_run("old-run").config == RUN_KW["config"]
        assert s.source("old-run", 0) == "old source" and s.node("old-run", 0).fitness == 1.5
        s.add_node("old-run", parents=[0], operator="tune", rationale="", source="new")
        assert s.eval_count("old-run") == 1
    with Store.open(ws) as s:  # already at v2: nothing to apply
        assert s.schema_version == 2 and [n.id for n in s.nodes("old-run")] == [0, 1]


def test_failed_migration_leaves_store_at_old_version(ws, monkeypatch):
    with Store.open(ws) as s:
        s.create_run("r", **RUN_KW)
    bad = (2, ["CREATE TABLE half_done (x INTEGER)", "ALTER TABLE no_such_table ADD COLUMN y"])
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, bad])
    with pytest.raises(StoreError, match="from v1 to v2 failed.*left at v1"):
        Store.open(ws)
    monkeypatch.undo()
    with Store.open(ws) as s:
        assert s.schema_version == 1 and s.get_run("r").id == "r"
        tables = {r[0] for r in s._conn.execute("SELECT name FROM sqlite_master")}
        assert "half_done" not in tables


def test_newer_store_is_refused_untouched(ws):
    with Store.open(ws) as s:
        s.create_run("future", **RUN_KW)
    db = ws / "kernelevolve.db"
    conn = sqlite3.connect(db)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = (db.read_bytes(), db.stat().st_mtime_ns, sorted(os.listdir(ws)))
    with pytest.raises(StoreError) as info:
        Store.open(ws)
    msg = str(info.value)
    assert "newer" in msg and str(db) in msg and "v99" in msg
    assert f"reads up to v{SCHEMA_VERSION}" in msg and "--workspace" in msg
    assert (db.read_bytes(), db.stat().st_mtime_ns, sorted(os.listdir(ws))) == before


def test_non_sqlite_file_is_refused(ws):
    ws.mkdir()
    db = ws / "kernelevolve.db"
    db.write_text("these are my notes, not a database\n" * 10)
    with pytest.raises(StoreError, match=r"kernelevolve\.db: not a SQLite database"):
        Store.open(ws)
    assert db.read_text().startswith("these are my notes")


def test_foreign_sqlite_database_is_refused(ws):
    ws.mkdir()
    conn = sqlite3.connect(ws / "kernelevolve.db")
    conn.execute("CREATE TABLE photos (id INTEGER)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match="not a kernelevolve store"):
        Store.open(ws)


def test_migration_list_is_well_formed():
    assert [v for v, _ in schema.MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))
    with pytest.raises(ValueError, match="numbered"):
        schema.pending(0, [(1, []), (3, [])])


# -- two processes, one of them holding connections while it opens another ----------------------

_HOLDER = r"""
import sys, time
from kernelevolve.store import Store, StoreError
ws, stop_after = sys.argv[1], float(sys.argv[2])
held = Store.open(ws)                      # a connection this process keeps open
deadline = time.monotonic() + stop_after
i = 0
try:
    while time.monotonic() < deadline:
        held.create_run(f"run-{i:05d}", problem_path=None, problem_hash=None, platform="cpu",
                        config={}, fingerprint={})
        with Store.open(ws) as other:      # a second open in the same process (the header check)
            other.list_runs()
        i += 1
except StoreError as exc:
    print(f"FAILED after {i}: {exc}")
    sys.exit(1)
print(f"ok {i}")
"""

_POLLER = r"""
import sys, time
from kernelevolve.store import Store
ws, stop_after = sys.argv[1], float(sys.argv[2])
deadline = time.monotonic() + stop_after
while time.monotonic() < deadline:
    try:
        with Store.open(ws) as s:
            s.list_runs()
    except Exception:
        pass
    time.sleep(0.01)
"""


@pytest.mark.slow
def test_a_second_open_in_a_writing_process_keeps_its_locks(ws):
    """Closing any descriptor of a file drops every POSIX lock the process holds on it, the
    SQLite connections' too: a header check that opened and closed the database file with
    Python let another process, closing its last connection, checkpoint and delete the WAL
    under the writer ("disk I/O error" at its next open; seen under tune-model while a poller
    read the store)."""
    with Store.open(ws):
        pass
    seconds = "12"
    poller = subprocess.Popen([sys.executable, "-c", _POLLER, str(ws), seconds])
    try:
        holder = subprocess.run([sys.executable, "-c", _HOLDER, str(ws), seconds],
                                capture_output=True, text=True, timeout=300)
    finally:
        poller.wait(timeout=300)
    assert holder.returncode == 0, holder.stdout + holder.stderr
    assert holder.stdout.startswith("ok ")
