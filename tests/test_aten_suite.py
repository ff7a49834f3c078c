"""`kernelevolve bench --suite aten`: the ATen-operator table, the problems generated from it
(their references and edge cases checked), the CLI's one-line errors, and an end-to-end run of
a few probes with C++ (killed once and resumed) and with Triton under the interpreter, read
back from the operator x platform matrix."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from conftest import run_cli
from kernelevolve.bench.aten_check import check_problem, run_cases
from kernelevolve.bench.aten_suite import Probe, probes, render, select, write_suite
from kernelevolve.errors import UsageError


def test_table_has_enough_probes_and_operators():
    every = probes()
    assert len(every) >= 200
    assert len({p.op for p in every}) >= 160
    names = {p.name for p in every}
    # reductions over each dim of the 3-D input and over everything, keepdim; scans; dtypes
    assert {"sum_d0", "sum_d1", "sum_dlast", "sum_all", "sum_keep"} <= names
    assert {"softmax_d0", "log_softmax_dlast", "cumsum_d1", "int_add_i64", "int_add_i32"} <= names
    assert all(p.edges for p in every)  # every probe has an edge case
    assert [p.name for p in select(["int_add*"])] == ["int_add_i64", "int_add_i32"]
    assert {p.name for p in select(["remainder"])} == {"remainder", "int_remainder_i64",
                                                        "int_remainder_i32",
                                                        "int_remainder_const_i64",
                                                        "int_remainder_const_i32"}
    with pytest.raises(UsageError, match="no probe or operator"):
        select(["exp", "no_such_op*"])


@pytest.mark.slow
def test_every_generated_reference_runs_and_its_edge_case_holds_the_edges(tmp_path):
    every = probes()
    paths = write_suite(tmp_path / "small", "small", every)
    stamps = [p.stat().st_mtime_ns for p in paths]
    issues = [i for p, path in zip(every, paths) for i in check_problem(path, p)]
    assert issues == []
    # deterministic: the same table and profile give the same files, left untouched
    assert write_suite(tmp_path / "small", "small", every) == paths
    assert [p.stat().st_mtime_ns for p in paths] == stamps
    div = next(p for p in every if p.name == "div_floor")
    assert render(div, "small") == paths[every.index(div)].read_text()
    ins, outs = run_cases(paths[every.index(div)])["edge"]
    x, y = ins
    assert x.isnan().any() and x.isinf().any() and y.isnan().any() and y.isinf().any()
    assert (x.view(-1, x.shape[-1])[29] == 1.0).all()  # 1 / 0.1: the fp32 quotient is 10.0,
    assert (outs[0].view(-1, x.shape[-1])[29] == 9.0).all()  # torch floors it to 9


def test_the_check_finds_a_row_that_misses_its_edges_or_its_domain(tmp_path):
    bad = [Probe("hides_nan", "nan_to_num", "torch.nan_to_num(x)", (("normal", "full",
                                                                        "float32"),), "special"),
           Probe("log_normal", "log", "torch.log(x)", (("normal", "full", "float32"),),
                 "special"),
           Probe("fixes_nothing", "neg", "-x", (("int", "full", "int64"),), "intext")]
    found = []
    for probe in bad:
        path = tmp_path / f"{probe.name}.py"
        path.write_text(render(probe, "small"))
        found += check_problem(path, probe)
    assert any("hides_nan: the edge case's output holds no NaN" in i for i in found)
    assert any("log_normal: case normal gives a non-finite output" in i for i in found)
    assert not any(i.startswith("fixes_nothing") for i in found)


@pytest.mark.parametrize("args,message", [
    (["--suite", "kernelbench"], "--suite 'kernelbench': unknown suite; the shipped one is aten"),
    (["--suite", "aten", "--probes", "exp,nosuch*"], "--probes 'nosuch*': no probe or operator"),
    (["--probes", "exp"], "--probes need(s) --suite aten"),
])
@pytest.mark.slow
def test_cli_errors_are_one_line(tmp_path, args, message):
    out = run_cli("bench", *args, "--workspace", str(tmp_path / "ws"))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1


def _state(ws):
    found = list((ws / "benches").glob("aten-*.json"))
    found = [p for p in found if not p.name.startswith("aten-matrix")]
    return json.loads(found[0].read_text()) if found else None


def _cells(matrix):
    return {r["probe"]: r["cells"] for r in matrix["rows"]}


@pytest.mark.slow
def test_suite_end_to_end_cpp_killed_and_resumed_then_triton(tmp_path):
    ws = tmp_path / "ws"
    cmd = [sys.executable, "-m", "kernelevolve.cli", "bench", "--suite", "aten", "--profile",
           "small", "--probes", "relu,exp2,sort", "--workspace", str(ws)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        state = _state(ws)
        if state and state["rows"][0]["status"] == "done":
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    first = _state(ws)["rows"][0]
    assert first["problem"] == "exp2" and first["verdict"] == "correct"
    assert any(r["status"] != "done" for r in _state(ws)["rows"])

    out = subprocess.run(cmd + ["--json", str(tmp_path / "cpp.json")], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "resuming bench aten-small-cpu-cpp-" in out.stderr
    data = json.loads((tmp_path / "cpp.json").read_text())
    assert data["rows"][0]["wall_s"] == first["wall_s"]  # kept, not drafted again
    cells = _cells(data["matrix"])
    for name in ("exp2", "relu"):
        cell = cells[name]["cpu/cpp"]
        assert cell["state"] == "correct" and cell["speedup"] > 0, (name, cell)
    assert cells["sort"]["cpu/cpp"]["state"] == "not_covered"
    assert "sort" in cells["sort"]["cpu/cpp"]["reason"]
    totals = data["matrix"]["totals"]["cpu/cpp"]
    assert (totals["probes"], totals["covered"], totals["correct"]) == (3, 2, 2)
    assert totals["correct_share_of_covered"] == 1.0 and totals["timed"] == 2
    assert "cpu/cpp (small): 3 probes, covered 2 (67%)" in out.stdout

    out = run_cli("bench", "--suite", "aten", "--profile", "small", "--probes", "exp2",
                  "--language", "triton", "--workspace", str(ws),
                  env={"TRITON_INTERPRET": "1"})
    assert out.returncode == 0, out.stderr
    matrix = json.loads((ws / "benches" / "aten-matrix.json").read_text())
    assert [c["label"] for c in matrix["columns"]] == ["cpu/cpp", "cpu/triton-interpreter"]
    cells = _cells(matrix)
    triton = cells["exp2"]["cpu/triton-interpreter"]
    assert triton["state"] == "correct" and triton["speedup"] is None  # the interpreter: untimed
    assert "cpu/triton-interpreter" not in cells["relu"]
    assert cells["exp2"]["cpu/cpp"]["state"] == "correct"  # the C++ column is still there
    assert "cpu/triton-interpreter (small): 1 probes, covered 1 (100%)" in out.stdout
    assert (ws / "benches" / "aten-matrix.html").read_text().count("<tr>") == 4
