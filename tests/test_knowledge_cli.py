"""The `kernelevolve kb` commands: list, search (with staleness against a fingerprint), show, add,
validate; the sub-app registration and the workspace's layered index.
"""
from __future__ import annotations

import pytest

import json

import typer
from typer.testing import CliRunner

from kernelevolve.knowledge import CURATED_DIR, parse_note, workspace_index
from kernelevolve.knowledge.cli import kb_app
from test_knowledge import FP, GOOD, _learn, note_text


# ---- the `kb` CLI ---------------------------------------------------------------------------
runner = CliRunner()


def kb(*args: str):
    return runner.invoke(kb_app, list(args))


@pytest.mark.slow
def test_cli_list(tmp_path):
    ws = str(tmp_path / "ws")
    res = kb("list", "--workspace", ws)
    assert res.exit_code == 0, res.output
    assert "triton-nvidia-hopper" in res.stdout and "curated" in res.stdout
    res = kb("list", "--platform", "cpu", "--json", "--workspace", ws)
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert {r["id"] for r in rows} >= {"cpu-cpp-openmp-simd", "pitfall-tails-masks"}
    assert all("cpu" in r["platforms"] or "any" in r["platforms"] for r in rows)
    assert all(set(r) >= {"id", "title", "platforms", "languages", "source", "confidence",
                          "expires"} for r in rows)
    res = kb("list", "--language", "hip", "--workspace", ws)
    assert "cuda-cpp-kernels" not in res.stdout and "pitfall-tails-masks" in res.stdout
    res = kb("list", "--platform", "gpu", "--workspace", ws)
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "unknown platform 'gpu'" in res.stderr


def test_cli_search(tmp_path):
    ws = str(tmp_path / "ws")
    res = kb("search", "MI300 wavefront LDS", "--platform", "rocm", "--language", "triton",
             "-k", "2", "--workspace", ws)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0].split()[:3][::2] == ["1.", "triton-amd-cdna3"]
    res = kb("search", 'wgmma (TMA" AND *', "--json", "--workspace", ws)
    data = json.loads(res.stdout)
    assert data[0]["id"] == "triton-nvidia-hopper" and data[0]["rank"] == 1
    assert {"score", "stale", "why", "title"} <= set(data[0])
    assert kb("search", "zzzzqqq", "--workspace", ws).stdout.strip() == "no matching notes"


def test_cli_search_marks_stale_against_a_fingerprint(tmp_path):
    notes = tmp_path / "notes"
    _learn(notes)
    fp = tmp_path / "result.json"
    fp.write_text(json.dumps({"accepted": True, "fingerprint": {**FP, "torch": "2.7.0"}}))
    res = kb("search", "rows per program softmax", "--notes", str(notes), "--fingerprint",
             str(fp), "--workspace", str(tmp_path / "ws"), "-k", "10")
    assert res.exit_code == 0, res.output
    assert "[stale]" in res.stdout
    assert "measured on torch 2.5, this is 2.7: revalidate" in res.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    res = kb("search", "x", "--fingerprint", str(bad), "--workspace", str(tmp_path / "ws"))
    assert res.exit_code == 2 and "not JSON" in res.stderr and res.stderr.count("\n") == 1


def test_cli_show(tmp_path):
    ws = str(tmp_path / "ws")
    res = kb("show", "pitfall-tails-masks", "--workspace", ws)
    assert res.exit_code == 0
    assert parse_note(res.stdout).id == "pitfall-tails-masks"
    res = kb("show", "no-such-note", "--workspace", ws)
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "no note with id 'no-such-note'" in res.stderr


def test_cli_add_then_list_search_show(tmp_path):
    ws = tmp_path / "ws"
    src = tmp_path / "mine.md"
    src.write_text(GOOD)
    res = kb("add", str(src), "--workspace", str(ws))
    assert res.exit_code == 0, res.output
    dest = ws / "knowledge" / "notes" / "my-note.md"
    assert dest.read_text() == GOOD
    assert "my-note" in kb("list", "--workspace", str(ws)).stdout
    assert kb("show", "my-note", "--workspace", str(ws)).exit_code == 0
    hits = json.loads(kb("search", "warp shuffles registers", "--json", "--workspace",
                         str(ws)).stdout)
    assert "my-note" in [h["id"] for h in hits]
    assert kb("add", str(src), "--workspace", str(ws)).exit_code == 0  # same content: fine
    # a different note with the same id is refused unless --force
    src.write_text(GOOD.replace("reduce with shuffles", "reduce with atomics"))
    res = kb("add", str(src), "--workspace", str(ws))
    assert res.exit_code == 2 and "already holds a different note" in res.stderr
    assert res.stderr.count("\n") == 1 and dest.read_text() == GOOD
    assert kb("add", str(src), "--workspace", str(ws), "--force").exit_code == 0
    assert "atomics" in dest.read_text()


def test_cli_add_rejects_bad_files(tmp_path):
    bad = tmp_path / "bad.md"
    bad.write_text(note_text(source="scraped"))
    res = kb("add", str(bad), "--workspace", str(tmp_path / "ws"))
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "bad.md: unknown source 'scraped'" in res.stderr
    res = kb("add", str(tmp_path / "absent.md"), "--workspace", str(tmp_path / "ws"))
    assert res.exit_code == 2 and "cannot read note" in res.stderr
    assert not (tmp_path / "ws").exists()


def test_cli_validate(tmp_path):
    res = kb("validate")
    assert res.exit_code == 0 and res.stdout.startswith("ok: ")
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "good.md").write_text(GOOD)
    (folder / "bad1.md").write_text(note_text(confidence="2"))
    (folder / "bad2.md").write_text(note_text(created="yesterday"))
    res = kb("validate", str(folder), str(CURATED_DIR / "cuda-cpp-kernels.md"))
    assert res.exit_code == 1
    lines = res.stdout.splitlines()
    assert len(lines) == 3
    assert lines[0].endswith("bad1.md: confidence 2 is out of range; expected 0..1")
    assert "bad2.md: created must be an ISO date" in lines[1]
    assert lines[2] == "2 of 4 notes valid"
    res = kb("validate", str(tmp_path / "nowhere"))
    assert res.exit_code == 2 and "no such file or folder" in res.stderr


def test_kb_registers_as_a_sub_app(tmp_path):
    app = typer.Typer()

    @app.command("version")
    def _version() -> None:
        print("v")

    app.add_typer(kb_app, name="kb")
    res = runner.invoke(app, ["kb", "search", "tail mask odd size", "--json", "--workspace",
                              str(tmp_path / "ws")])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)[0]["id"] == "pitfall-tails-masks"
    res = runner.invoke(app, ["kb", "show", "nope", "--workspace", str(tmp_path / "ws")])
    assert res.exit_code == 2 and "no note with id" in res.stderr
    assert "search" in runner.invoke(app, ["kb", "--help"]).stdout


def test_workspace_index_reads_user_and_learned_folders(tmp_path):
    ws = tmp_path / "ws"
    _learn(ws / "knowledge" / "learned")
    index = workspace_index(ws)
    assert any(n.source == "learned" for n in index.all())


def test_cli_warns_about_bad_user_notes_but_keeps_going(tmp_path):
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "broken.md").write_text(note_text(expires="never"))
    res = kb("list", "--notes", str(folder), "--workspace", str(tmp_path / "ws"))
    assert res.exit_code == 0 and "triton-nvidia-hopper" in res.stdout
    assert "warning: skipped" in res.stderr
    assert "broken.md: expires must be an ISO date" in res.stderr
    res = kb("list", "--notes", str(tmp_path / "typo"), "--workspace", str(tmp_path / "ws"))
    assert res.exit_code == 2 and "no such notes folder" in res.stderr
