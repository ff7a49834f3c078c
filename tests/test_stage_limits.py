"""Stage time limits scale with the machine's load and the work, and a user can set them."""
from __future__ import annotations

import json

import pytest

from conftest import CORPUS, PROBLEMS, run_cli
from kernelevolve.harness.driver.pool import Limits
from kernelevolve.harness.driver.stage_limits import (INTERPRETER_FACTOR, MAX_MACHINE_FACTOR,
                                               PROBE_IDLE_S, machine_factor, stage_timeouts)

BASE = {"start": 60, "problem": 300, "load": 300, "run": 120, "compile": 900, "timing": 600}


def test_candidate_stages_scale_and_harness_stages_do_not():
    got = stage_timeouts(BASE, factor=2.0)
    assert (got["load"], got["run"], got["timing"]) == (600, 240, 1200)
    assert (got["start"], got["problem"], got["compile"]) == (60, 300, 900)
    interp = stage_timeouts(BASE, factor=1.5, interpreted=True)
    assert interp["run"] == 120 * 1.5 * INTERPRETER_FACTOR
    user = stage_timeouts(BASE, factor=3.0, interpreted=True, override_s=7)
    assert (user["load"], user["run"], user["timing"], user["compile"]) == (7, 7, 7, 900)


def test_machine_factor_is_clamped_and_measured():
    assert machine_factor(PROBE_IDLE_S / 2) == 1.0          # a faster machine: no shorter limits
    assert machine_factor(PROBE_IDLE_S * 3) == pytest.approx(3.0)
    assert machine_factor(PROBE_IDLE_S * 100) == MAX_MACHINE_FACTOR
    assert 1.0 <= machine_factor() <= MAX_MACHINE_FACTOR    # the real probe, on this machine
    limits = Limits(machine_factor=2.0)
    assert limits.for_job()["run"] == 240 and limits.for_job(interpreted=True)["run"] == 960


@pytest.mark.slow
def test_stage_timeout_flag_limits_a_hung_candidate(tmp_path):
    """The default run limit here is 120 s or more; --stage-timeout 3 ends the hang in 3."""
    out = tmp_path / "r.json"
    proc = run_cli("eval", str(PROBLEMS / "softmax_small.py"), str(CORPUS / "bad_hang.py"),
                   "--stage-timeout", "3", "--json", str(out), timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(out.read_text())
    assert result["stage"] == "run" and "time limit" in result["reason"]
    wall = float(result["reason"].split("time limit (")[1].split(" s)")[0])
    assert 3.0 <= wall < 30.0, result["reason"]
    proc = run_cli("eval", str(PROBLEMS / "softmax_small.py"), str(CORPUS / "bad_hang.py"),
                   "--stage-timeout", "0", timeout=120)
    assert proc.returncode == 2 and "--stage-timeout 0" in proc.stderr


def test_config_file_sets_the_stage_timeout(tmp_path):
    from kernelevolve.config import build_config
    from kernelevolve.errors import UsageError

    cfg = tmp_path / "run.toml"
    cfg.write_text("stage-timeout = 45\n")
    assert build_config(cfg, {}).stage_timeout == 45
    with pytest.raises(UsageError, match="--stage-timeout -1"):
        build_config(None, {"stage_timeout": -1})
