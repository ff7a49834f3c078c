"""Whole runs over hostile candidates: `optimize` (with an LLM whose replies are the attacks, and
with the attacks as seeds), killed with SIGKILL and resumed. The run goes on, every attack gets a
verdict, and no secret reaches a prompt, the store, the report or the terminal."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CORPUS, PROBLEMS, run_cli
from llm_servers import ScriptedServer, prompt_of
from outcomes import assert_measured_exit
from one_finalist import one_finalist_config
from test_containment import SECRETS

pytestmark = pytest.mark.slow

ATTACKS = ["bad_secret_names", "bad_log_symlink", "bad_log_fifo", "bad_protocol_garbage",
           "bad_capi_cpp", "bad_daemon", "bad_cache_plant", "bad_jobdir_squat"]
GOOD = CORPUS / "good_softmax_cpp.py"
# examples/softmax's model at 8-16x fewer elements: the subject is containment, not the sizes.
SMALL = PROBLEMS / "softmax_small.py"
KEY_VAR = "KE_CONTAIN_LLM_KEY"
KEY = "sk-hunter2-llm-key"


def _leaks(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [name for name, value in {**SECRETS, KEY_VAR: KEY}.items() if value.encode() in data]


def _files_leaking(root: Path) -> dict[str, list[str]]:
    return {str(p): found for p in root.rglob("*") if p.is_file() for found in [_leaks(p.read_bytes())]
            if found}


def test_llm_run_whose_replies_are_attacks_leaks_nothing(tmp_path):
    replies = iter([(CORPUS / f"{name}.py").read_text() for name in ATTACKS])

    def answer(request: dict) -> str:
        prompt_of(request)
        source = next(replies, GOOD.read_text())
        return "Here is a kernel.\n```python\n" + source + "```"

    ws = tmp_path / "ws"
    with ScriptedServer(handler=answer) as server:
        proc = run_cli("optimize", str(SMALL), "--operator", "llm",
                       "--llm", "openai:test-model", "--llm-base-url", server.openai_base_url,
                       "--llm-api-key-env", KEY_VAR, "--max-evals", str(len(ATTACKS) + 2),
                       # the run's one torch.compile timing (3 inductor builds) is for the
                       # prompts' figures, covered by tests/test_prompt_context.py; not an attack
                       "--no-compile-figures",
                       "--config", str(one_finalist_config(tmp_path)),  # no verdict asserted
                       "--workspace", str(ws), "--json", str(ws / "s.json"),
                       env={**SECRETS, KEY_VAR: KEY}, timeout=900)
        bodies = [json.dumps(r.json) for r in server.requests]
    summary = json.loads((ws / "s.json").read_text())
    assert_measured_exit(proc.returncode, summary, proc.stdout[-2000:] + proc.stderr[-2000:])
    stages = [n.get("stage") for n in summary["nodes"] if n.get("operator") == "llm"]
    assert stages.count("load") >= len(ATTACKS) - 1, stages   # the attacks, refused at load
    assert "accepted" in stages
    assert len(bodies) >= len(ATTACKS)
    for body in bodies:  # every prompt the model saw, including the attacks' rejection reasons
        assert not _leaks(body), _leaks(body)
    assert not _leaks(proc.stdout + proc.stderr)
    assert not _files_leaking(ws), _files_leaking(ws)


def _query(db: Path, sql: str, default):
    import sqlite3

    if not db.exists():
        return default
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute(sql).fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return default


def _evaluations(db: Path) -> int:
    return _query(db, "SELECT COUNT(*) FROM evaluations", 0)


def test_optimize_killed_then_resumed_over_attack_seeds(tmp_path):
    ws = tmp_path / "ws"
    seeds = [arg for name in ATTACKS for arg in ("--seed-candidate", str(CORPUS / f"{name}.py"))]
    env = {**os.environ, **SECRETS}
    log = tmp_path / "optimize.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kernelevolve.cli", "optimize",
                                 str(SMALL), *seeds, "--seed-candidate", str(GOOD),
                                 "--operator", "tune", "--max-evals", str(len(ATTACKS) + 3),
                                 # no verdict asserted: one finalist re-measured
                                 "--config", str(one_finalist_config(tmp_path)),
                                 "--workspace", str(ws)],
                                stdout=out, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    deadline = time.monotonic() + 600
    try:
        while _evaluations(ws / "kernelevolve.db") < 3:
            assert proc.poll() is None, "optimize ended before it was killed:\n" + log.read_text()
            assert time.monotonic() < deadline, "optimize made no progress"
            time.sleep(0.1)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    # the killed run's id, from its store (the `runs` command is tested in tests/test_optimize.py)
    run_id = _query(ws / "kernelevolve.db", "SELECT id FROM runs", None)
    assert run_id, "the killed run left no run in its store"
    resumed = run_cli("resume", run_id, "--workspace", str(ws), "--json", str(ws / "s.json"),
                      env=SECRETS, timeout=900)
    summary = json.loads((ws / "s.json").read_text())
    assert_measured_exit(resumed.returncode, summary,
                         resumed.stdout[-2000:] + resumed.stderr[-2000:])
    assert summary["status"] == "completed"
    by_stage = {}
    for node in summary["nodes"]:
        by_stage.setdefault(node.get("stage"), []).append(node["id"])
    assert len(by_stage.get("load", [])) >= len(ATTACKS) - 1, by_stage  # each refused, by name
    assert by_stage.get("accepted"), by_stage
    assert not _leaks(resumed.stdout + resumed.stderr + log.read_text())
    assert not _files_leaking(ws)
