"""The `kernelevolve` command line, run as a real subprocess (`python -m kernelevolve.cli`)."""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import CORPUS, EXAMPLES, PROBLEMS, run_cli
from kernelevolve import __version__

# examples/softmax's model and cases' shape (weights 2, 1, 1; an odd tail) at 16x fewer
# elements: these runs are about the command line, not the example's sizes (an evaluation of
# the example's 4 MB inputs cost ~3x this one's), and its candidate runs on it unchanged.
SOFTMAX = PROBLEMS / "softmax_small.py"
GOOD = EXAMPLES / "softmax" / "candidate_cpp.py"
CASE_NAMES = ("64x1024", "16x4096", "tail_33x999")


@pytest.fixture(scope="module")
def full_runs(tmp_path_factory):
    """The two end-to-end evaluations, run side by side (each starts its own worker)."""
    out = tmp_path_factory.mktemp("cli") / "out.json"
    jobs = {
        "accepted": (("eval", str(SOFTMAX), str(GOOD), "--seed", "1", "--json", str(out),
                      "--timing-cap", "0.3"), None),  # no figure checked: no longer timed
        "rejected": (("eval", str(SOFTMAX), str(CORPUS / "bad_wrong_shape.py"), "--seed", "1"),
                     None),
    }
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {k: pool.submit(run_cli, *args, env=env) for k, (args, env) in jobs.items()}
        runs = {k: f.result() for k, f in futures.items()}
    runs["json_path"] = out
    return runs


@pytest.mark.slow
def test_eval_accepted_exits_0_with_table_and_json(full_runs):
    proc = full_runs["accepted"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    for name in CASE_NAMES:
        assert name in proc.stdout, proc.stdout
    assert "ACCEPTED" in proc.stdout
    timing = [line for line in proc.stdout.splitlines() if line.startswith("timing: ")]
    assert len(timing) == 1 and ("within 1.20" in timing[0] or "0.3 s time cap" in timing[0])
    data = json.loads(full_runs["json_path"].read_text())
    for key in ("accepted", "stage", "reason", "speedup", "fitness", "cases", "fingerprint",
                "sandbox"):
        assert key in data, key
    assert data["accepted"] is True and data["stage"] == "accepted"
    assert data["language"] == "cpp" and data["platform"] == "cpu"
    assert data["speedup"] > 0 and data["fitness"] == data["speedup"]
    assert data["reason"].startswith("accepted:")
    assert [c["name"] for c in data["cases"]] == list(CASE_NAMES)
    for case in data["cases"]:
        for key in ("name", "weight", "correct", "max_abs_err", "max_rel_err", "ref_ms",
                    "cand_ms", "speedup"):
            assert key in case, key
        assert case["correct"] is True
        assert case["ref_ms"] > 0 and case["cand_ms"] > 0
        assert case["speedup"] == pytest.approx(case["ref_ms"] / case["cand_ms"])
        assert 0 <= case["max_abs_err"] < 1e-4
    assert [c["weight"] for c in data["cases"]] == [2.0, 1.0, 1.0]
    fp = data["fingerprint"]
    for key in ("torch", "cpu_model", "threads", "network_isolated"):
        assert key in fp, key
    assert isinstance(fp["threads"], int) and fp["threads"] >= 1
    sandbox = data["sandbox"]
    assert sandbox["method"] in ("bwrap", "unshare", "none")
    assert sandbox["network_isolated"] == fp["network_isolated"]
    assert sandbox["env_scrubbed"] is True


def test_eval_rejected_exits_1(full_runs):
    proc = full_runs["rejected"]
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert "REJECTED at correctness" in proc.stdout
    assert "shape" in proc.stdout


def test_table_keeps_case_names_when_piped(full_runs):
    """Neither run sets COLUMNS and stdout is a pipe: whole case names still appear."""
    for proc in (full_runs["accepted"], full_runs["rejected"]):
        for name in CASE_NAMES:
            assert name in proc.stdout, proc.stdout


BAD_PROBLEM = "import torch\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n"


def _usage_cases(tmp_path):
    bad = tmp_path / "no_model.py"
    bad.write_text(BAD_PROBLEM)
    cpp = tmp_path / "kernel.cpp"
    cpp.write_text("extern \"C\" void k(float* x) { x[0] = 1; }\n")
    good, prob = str(GOOD), str(SOFTMAX)
    return {
        "missing-problem": (("eval", str(tmp_path / "missing.py"), good), "missing.py: no such file"),
        "missing-candidate": (("eval", prob, str(tmp_path / "nope.py")),
                              "nope.py: no such file"),
        "cpp-candidate": (("eval", prob, str(cpp)), "build it with kernelevolve.runtime"
                                                           ".load_cpp"),
        "trials-2": (("eval", prob, good, "--trials", "2"), "at least 3 correctness trials"),
        "platform-tpu": (("eval", prob, good, "--platform", "tpu"), "unknown platform 'tpu'"),
        "platform-cuda": (("eval", prob, good, "--platform", "cuda"), "no CUDA device"),
        "baseline-bogus": (("eval", prob, good, "--baseline", "bogus"), "--baseline 'bogus'"),
        "problem-no-model": (("eval", str(bad), good), "defines no `Model`"),
    }


USAGE_IDS = ("missing-problem", "missing-candidate", "cpp-candidate", "trials-2", "platform-tpu",
             "platform-cuda", "baseline-bogus", "problem-no-model")


@pytest.fixture(scope="module")
def usage_runs(tmp_path_factory):
    cases = _usage_cases(tmp_path_factory.mktemp("usage"))
    with ThreadPoolExecutor(2) as pool:
        futures = {k: pool.submit(run_cli, *args) for k, (args, _) in cases.items()}
        futures["unknown-option"] = pool.submit(run_cli, "eval", str(SOFTMAX), str(GOOD),
                                                "--bogus-option")
        return {k: (f.result(), cases.get(k, (None, None))[1]) for k, f in futures.items()}


@pytest.mark.slow
@pytest.mark.parametrize("kind", USAGE_IDS)
def test_bad_usage_exits_2_with_one_line(usage_runs, kind):
    if kind == "platform-cuda":
        import torch

        if torch.cuda.is_available():
            pytest.skip("a CUDA device is visible here")
    proc, fragment = usage_runs[kind]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert fragment in lines[0], lines[0]
    assert proc.stdout == ""


def test_unknown_option_exits_2(usage_runs):
    proc, _ = usage_runs["unknown-option"]
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "--bogus-option" in proc.stderr


def test_unknown_option_is_one_line(usage_runs):
    proc, _ = usage_runs["unknown-option"]
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


@pytest.mark.slow
def test_version():
    proc = run_cli("version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == __version__
    proc = run_cli("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == __version__, proc.stderr


COMMANDS = ("", "eval", "optimize", "resume", "runs", "runs rm", "show", "best", "report",
            "synth", "targets", "version", "kb", "kb list", "kb search", "kb show", "kb add", "kb validate")


@pytest.mark.slow
def test_help_reads_as_values_not_python_types():
    """-h everywhere; metavars are values (PATH, N), flags have none, every option has help,
    defaults are shown one way: "(value)" in the help text."""
    import re

    from typer.testing import CliRunner

    from kernelevolve.cli import app

    runner = CliRunner()
    for command in COMMANDS:
        args = command.split()
        short, long = runner.invoke(app, [*args, "-h"]), runner.invoke(app, [*args, "--help"])
        assert short.exit_code == 0 and short.stdout == long.stdout, (command, short.stdout)
        text = short.stdout
        assert not re.search(r"<(str|int|float|bool|path|list\[)", text, re.I), (command, text)
        assert "[default:" not in text and "{" not in text, (command, text)
        options = re.findall(r"^  (--?[\w-]+(?:, --[\w-]+)?)(?: ([A-Z][A-Z:.]*))?(  +\S.*)?$",
                             text, re.M)
        for flag, _metavar, help_text in options:
            assert help_text.strip(), f"{command}: {flag} has no help"
    optimize = runner.invoke(app, ["optimize", "-h"]).stdout
    for expected in ("--max-evals N", "--seed-candidate FILE", "--workspace DIR",
                     "--llm PROVIDER:MODEL", "--allow-no-kernel  ", "--strict  "):
        assert expected in optimize, expected
