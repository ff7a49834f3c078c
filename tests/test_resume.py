"""`kernelevolve resume` after a SIGKILL: mid-search, while re-measuring the finalists, and
with a changed machine fingerprint. Real processes, real SQLite, real sandboxed workers.
"""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelevolve.operators.tunables import read_config
from outcomes import assert_measured_exit
from test_optimize import (CANDIDATE, CLI_TIMEOUT, PROBLEM, cli, fast_timing, one_line,
                           show)

pytestmark = pytest.mark.slow


# ---- SIGKILL mid-run, then resume -------------------------------------------------------------

def _query(db: Path, sql: str) -> tuple | None:
    """One row of `sql` through a read-only connection; None while the store is not there yet."""
    if not db.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:  # created but not yet migrated
        return None


def _optimize_args(ws: Path, max_evals: int) -> list[str]:
    return ["optimize", str(PROBLEM), "--seed-candidate", str(CANDIDATE), "--operator", "tune",
            "--max-evals", str(max_evals), "--workspace", str(ws)]


def _killed(tmp_path: Path, ws: Path, args: list[str], ready_sql: str,
            ) -> tuple[str, set[tuple[int, str]]]:
    """Start the command `args` (optimize or resume) in its own process group, SIGKILL the
    group as soon as `ready_sql` (a one-value query on the store) returns true, wait until its
    sandboxed workers are gone too; returns the run id and the worker processes seen."""
    db = ws / "kernelevolve.db"
    log_path = tmp_path / f"{args[0]}.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "kernelevolve.cli", *args],
                                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    workers: set[tuple[int, str]] = set()
    deadline = time.monotonic() + CLI_TIMEOUT
    try:
        while not (_query(db, ready_sql) or (0,))[0]:
            workers |= _descendants(proc.pid)
            assert proc.poll() is None, (f"{args[0]} ended before it could be killed:\n"
                                         + log_path.read_text())
            assert time.monotonic() < deadline, f"{args[0]} never reached: {ready_sql}"
            time.sleep(0.05)
        workers |= _descendants(proc.pid)
        os.killpg(proc.pid, signal.SIGKILL)  # start_new_session: its pgid is its pid
    finally:
        if proc.poll() is None:  # a failed assertion above: do not leave it running
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert workers, f"{args[0]} had no worker processes while it evaluated"
    # The sandboxed workers (their own sessions, so killpg does not reach them) die with it.
    deadline = time.monotonic() + 15
    while _alive(workers) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(workers), f"worker processes outlived the killed run: {_alive(workers)}"
    return _query(db, "SELECT id FROM runs")[0], workers


def _process_table() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, start time) for every process visible in /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        table[int(entry)] = (int(fields[1]), fields[19])
    return table


def _descendants(pid: int) -> set[tuple[int, str]]:
    table = _process_table()
    found, frontier = set(), [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, start) in table.items():
            if ppid == parent and (child, start) not in found:
                found.add((child, start))
                frontier.append(child)
    return found


def _alive(procs: set[tuple[int, str]]) -> set[tuple[int, str]]:
    alive = set()
    for pid, start in procs:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[19] == start and fields[0] != "Z":  # same process, not a zombie
            alive.add((pid, start))
    return alive


def _snapshot(ws: Path, run_id: str) -> dict:
    from kernelevolve.store import Store

    with Store.open(ws) as store:
        run = store.get_run(run_id)
        return {"status": run.status, "fingerprint": run.fingerprint, "elapsed_s": run.elapsed_s,
                "nodes": {n.id: (n.parents, n.operator, n.source_hash)
                          for n in store.nodes(run_id)},
                "evaluations": dict(store.evaluations(run_id)),
                "stopped": [e.kind for e in store.events(run_id)].count("stopped")}


def test_sigkill_mid_search_and_while_remeasuring_then_resume(tmp_path):
    """One run killed twice: mid-search (after two evaluations), then its resume between two
    finalists' re-measurements (after the search stopped); the second resume finishes it.
    Nothing is evaluated twice, the budget and the clock count every session, and the outcome
    reports the last session's measurements."""
    # 6 of the space's 8 points: the seed and 5 of the 7 others hold at least two REPEAT 1 or 8
    # points, so the best is one of them (_nothing_repeated) whichever the search tried
    ws, max_evals = tmp_path / "ws", 6
    run_id, _ = _killed(tmp_path, ws, _optimize_args(ws, max_evals),
                        "SELECT COUNT(*) >= 2 FROM evaluations")
    before = _snapshot(ws, run_id)
    assert before["status"] != "completed"
    assert 2 <= len(before["evaluations"]) < max_evals
    _refused_on_a_changed_fingerprint(ws, run_id, before)
    # Nothing changed but the status: the killed run said "running"; now it says the truth.
    assert _snapshot(ws, run_id) == {**before, "status": "interrupted"}

    _killed(tmp_path, ws, ["resume", run_id, "--workspace", str(ws)],
            "SELECT COUNT(*) FROM events WHERE kind = 'final_measurement'")
    finals = _snapshot(ws, run_id)
    assert finals["status"] != "completed" and len(finals["evaluations"]) == max_evals
    assert finals["stopped"] == 1  # the first killed session never reached its search's end

    r = cli("resume", run_id, "--workspace", ws, "--json", ws.parent / "resumed.json")
    assert_measured_exit(r.returncode, json.loads((ws.parent / "resumed.json").read_text()),
                         f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    after = _snapshot(ws, run_id)
    assert after["status"] == "completed"
    # the last session measured no new candidate: it re-measured the finalists
    assert after["nodes"] == finals["nodes"] and after["evaluations"] == finals["evaluations"]
    assert after["stopped"] == 2
    summary = show(ws, run_id)
    _nothing_repeated(ws, run_id, before, after, summary, max_evals)
    _reports_the_deciding_session(ws, run_id, summary)

    r = cli("resume", run_id, "--workspace", ws)  # a finished run is not run again
    assert r.returncode == 2 and "already completed" in one_line(r.stderr)


def _refused_on_a_changed_fingerprint(ws: Path, run_id: str, before: dict) -> None:
    """A changed platform fingerprint refuses the resume, names what changed, changes nothing."""
    from kernelevolve.store import Store

    with Store.open(ws) as store:
        store.update_fingerprint(run_id, {**before["fingerprint"], "torch": "0.0-test"})
    r = cli("resume", run_id, "--workspace", ws)
    assert r.returncode == 2, r.stdout + r.stderr
    msg = one_line(r.stderr)
    assert "torch" in msg and "0.0-test" in msg and "--force" in msg
    with Store.open(ws) as store:
        store.update_fingerprint(run_id, before["fingerprint"])  # put the real machine back


def _nothing_repeated(ws: Path, run_id: str, before: dict, after: dict, summary: dict,
                      max_evals: int) -> None:
    from kernelevolve.store import Store

    assert len(after["evaluations"]) == max_evals  # the budget counted the pre-kill evaluations
    assert after["elapsed_s"] > before["elapsed_s"] > 0  # so did the wall-time clock
    # No duplicated root or seed, no source twice, nothing evaluated twice or rewritten.
    nodes = after["nodes"]
    assert [nid for nid, (parents, _, _) in nodes.items() if parents == ()] == [0]
    assert sum(op == "seed" for _, op, _ in nodes.values()) == 1
    hashes = [h for _, _, h in nodes.values()]
    assert len(hashes) == len(set(hashes))
    assert set(after["evaluations"]) <= set(nodes) - {0}
    for nid, spec in before["nodes"].items():
        assert nodes[nid] == spec
    for nid, result in before["evaluations"].items():
        assert after["evaluations"][nid] == result, f"node {nid} was evaluated again"
    # A node in flight at the kill (stored, not yet measured) is measured under its own id.
    assert set(before["nodes"]) - {0} <= set(after["evaluations"])
    with Store.open(ws) as store:
        assert store.eval_count(run_id) == max_evals
    assert summary["status"] == "completed" and summary["evaluations"] == max_evals
    # The search still ends far from its REPEAT = 64 seed. Which of the two cheapest points
    # wins is a comparison of timings taken in two sessions, before and after the kill, on a
    # machine whose load changes in between (in CI the other test worker): REPEAT = 8 won it
    # once in two loaded two-worker runs. The known-best check stays in test_optimize.
    assert read_config(summary["best_source"])["REPEAT"] in (1, 8)


def _reports_the_deciding_session(ws: Path, run_id: str, summary: dict) -> None:
    outcome, best = summary["outcome"], summary["best"]
    assert outcome["message"] and "evaluation budget" in outcome["stop_reason"]
    if best is not None:  # the best node's case timings come from the session that decided
        from kernelevolve.store import Store

        with Store.open(ws) as store:
            finals = [e.data["result"] for e in store.events(run_id, "final_measurement")
                      if e.data["node_id"] == best["node_id"]]
        assert [c["cand_ms"] for c in summary["best_cases"]] == \
            [c["cand_ms"] for c in finals[-1]["cases"] if not c.get("held_out")]


def test_changed_fingerprint_needs_force(tmp_path):
    """A run that never got going (created, not executed) with a stored fingerprint from
    'another machine': resume refuses, --force proceeds, notes it, and records the new one."""
    from kernelevolve.config import RunConfig
    from kernelevolve.run import Run
    from kernelevolve.search.termination import Budgets

    ws = tmp_path / "ws"
    config = RunConfig(budgets=Budgets(max_evals=1), final_top_k=1,
                       search_timing=fast_timing(), final_timing=fast_timing())
    run = Run.create(PROBLEM, config, seeds=[CANDIDATE], workspace=ws)
    run.store.update_fingerprint(run.id, {"platform": "cpu", "torch": "0.0-test"})
    run.store.set_run_status(run.id, "interrupted")
    run.store.close()

    r = cli("resume", run.id, "--workspace", ws)
    assert r.returncode == 2
    msg = one_line(r.stderr)
    assert "torch" in msg and "0.0-test" in msg and "--force" in msg
    assert _snapshot(ws, run.id)["evaluations"] == {}

    r = cli("resume", run.id, "--workspace", ws, "--force", "--json", ws.parent / "resumed.json")
    assert_measured_exit(r.returncode, json.loads((ws.parent / "resumed.json").read_text()),
                         f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    loaded = Run.load(run.id, ws)
    assert loaded.status == "completed"
    assert loaded.store.eval_count(run.id) == 1
    assert loaded.record.fingerprint.get("torch") not in (None, "0.0-test")
    changed = loaded.store.events(run.id, "fingerprint_changed")
    assert [e.data["keys"] for e in changed] == [["torch"]]
