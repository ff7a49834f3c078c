"""Knowledge base: notes, curated notes, FTS5 retrieval, staleness, learned notes (the `kb` CLI:
test_knowledge_cli.py)."""
from __future__ import annotations

from datetime import date, timedelta

import pytest

from kernelevolve.errors import KernelevolveError
from kernelevolve.knowledge import (CURATED_DIR, KnowledgeError, KnowledgeIndex, Note, NoteError,
                                    default_index, parse_note, provenance_from_fingerprint,
                                    render_note, staleness, write_learned_note)

TODAY = date.today()
GOOD = """---
id: my-note
title: "Row softmax: one warp per row"
platforms: [cuda]
languages: [cuda-cpp]
tags: [softmax, reduction]
source: learned
confidence: 0.7
created: 2026-01-05
expires: 2027-01-05
provenance:
  device: NVIDIA H100 80GB HBM3
  driver: "550.54"
  compiler: g++ 12.2.0
  libraries: {torch: "2.5.1", triton: "3.1.0"}
  shapes: [[4096, 1024]]
---

Keep the row in registers and reduce with shuffles.
"""


def note_text(**changes) -> str:
    """GOOD with front-matter lines replaced (value None drops the line)."""
    lines = GOOD.splitlines()
    for key, value in changes.items():
        idx = next(i for i, ln in enumerate(lines) if ln.startswith(f"{key}:"))
        if value is None:
            del lines[idx]
        else:
            lines[idx] = f"{key}: {value}"
    return "\n".join(lines) + "\n"


def make_note(note_id: str, body: str, **kw) -> Note:
    base = dict(title=note_id.replace("-", " "), platforms=["any"], languages=["any"],
                tags=["misc"], source="learned", confidence=0.8, created=TODAY)
    base.update(kw)
    return Note(id=note_id, body=body, **base)


@pytest.fixture(scope="module")
def curated() -> KnowledgeIndex:
    return default_index()


# ---- parsing and validation -----------------------------------------------------------------
@pytest.mark.parametrize("changes, fault", [
    ({"title": None}, "missing field 'title'"),
    ({"platforms": "3"}, "platforms must be a non-empty list of strings"),
    ({"platforms": "[gpu]"}, "unknown platform 'gpu'"),
    ({"languages": "[rust]"}, "unknown language 'rust'"),
    ({"created": "2026-13-45"}, "created must be an ISO date"),
    ({"expires": "soon"}, "expires must be an ISO date"),
    ({"expires": "2025-01-01"}, "expires 2025-01-01 is before created 2026-01-05"),
    ({"source": "scraped"}, "unknown source 'scraped'"),
    ({"confidence": "1.5"}, "confidence 1.5 is out of range"),
    ({"confidence": "high"}, "confidence must be a number"),
    ({"id": "My Note!"}, "id must be a lowercase slug"),
    ({"tags": "[]"}, "tags must be a non-empty list"),
    ({"source": "learned\ntag: [x]"}, "unknown field 'tag'"),
])
@pytest.mark.slow
def test_invalid_notes_give_one_line_naming_file_and_fault(tmp_path, changes, fault):
    text = note_text(**changes)
    path = tmp_path / "bad.md"
    path.write_text(text)
    with pytest.raises(NoteError) as exc:
        parse_note(path)
    msg = str(exc.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: "), msg
    assert fault in msg, msg
    assert isinstance(exc.value, KernelevolveError)


@pytest.mark.parametrize("text, fault", [
    ("no front matter here\nat all\n", "no front matter"),
    ("---\nid: x\ntitle: y\n", "not closed"),
    ("---\nid: [unclosed\n---\nbody\n", "bad YAML front matter at line"),
    ("---\n- a\n- b\n---\nbody\n", "front matter must be a mapping"),
    (GOOD.replace("Keep the row in registers and reduce with shuffles.", ""), "no body"),
    (GOOD.replace('torch: "2.5.1"', "torch: 2.10"), "provenance.libraries.torch must be a quoted"),
    (GOOD.replace('driver: "550.54"', "driver: 550.54"), "provenance.driver must be a quoted"),
    (GOOD.replace("provenance:\n", "provenance: 3\nx:\n"), "unknown field 'x'"),
])
def test_structural_faults(text, fault):
    with pytest.raises(NoteError) as exc:
        parse_note(text, name="inline.md")
    assert str(exc.value).startswith("inline.md: ") and fault in str(exc.value)
    assert "\n" not in str(exc.value)


def test_unreadable_file_is_a_note_error(tmp_path):
    with pytest.raises(NoteError, match="cannot read note"):
        parse_note(tmp_path / "missing.md")


def test_parse_fields_and_round_trip(tmp_path):
    note = parse_note(GOOD)
    assert note.title == "Row softmax: one warp per row"
    assert note.created == date(2026, 1, 5) and note.expires == date(2027, 1, 5)
    assert note.provenance["libraries"] == {"torch": "2.5.1", "triton": "3.1.0"}
    assert note.source == "learned" and note.confidence == 0.7
    again = parse_note(render_note(note))
    assert again == note
    assert render_note(again) == render_note(note)
    path = tmp_path / "n.md"
    path.write_text(render_note(note))
    from_file = parse_note(path)
    assert from_file == note and from_file.path == path


def test_round_trip_without_provenance_or_expiry():
    note = make_note("plain", "Body with: colons, 'quotes' and --- dashes.", expires=None,
                     tags=["pointwise"], title="A title: with colon")
    assert parse_note(render_note(note)) == note


# ---- curated notes --------------------------------------------------------------------------
def test_all_curated_notes_validate_and_are_substantial():
    files = sorted(CURATED_DIR.glob("*.md"))
    assert len(files) >= 8
    for path in files:
        note = parse_note(path)
        assert path.stem == note.id
        assert note.source == "curated" and note.expires is None
        words = len(note.body.split())
        assert 150 <= words <= 400, (note.id, words)


def test_curated_index_has_no_errors(curated):
    assert curated.errors == []
    assert len(curated) == len(list(CURATED_DIR.glob("*.md")))


@pytest.mark.parametrize("query, platform, language, expected", [
    ("softmax row reduction warp shuffle", "cuda", "cuda-cpp", "cuda-cpp-kernels"),
    ("tail mask odd size", None, None, "pitfall-tails-masks"),
    ("AVX-512 OpenMP vectorize exp", "cpu", "cpp", "cpu-cpp-openmp-simd"),
    ("vectorise the exp loop with omp simd", "cpu", "cpp", "cpu-cpp-openmp-simd"),
    ("MI300 wavefront LDS", "rocm", "triton", "triton-amd-cdna3"),
    ("wgmma TMA Hopper", "cuda", "triton", "triton-nvidia-hopper"),
    ("A100 num_stages cp.async tf32", "cuda", "triton", "triton-nvidia-ampere"),
    ("fp32 accumulator for bf16 long sums Kahan", None, None, "pitfall-accumulation-precision"),
    ("fast-math NaN inf", "cpu", "cpp", "pitfall-fast-math"),
    ("launch overhead small shapes fuse", "cuda", "triton", "pitfall-launch-overhead"),
])
def test_typical_queries_find_the_relevant_note(curated, query, platform, language, expected):
    hits = curated.search(query, platform=platform, language=language, k=3)
    assert expected in [h.note.id for h in hits], [(h.note.id, h.score) for h in hits]
    top = next(h for h in hits if h.note.id == expected)
    assert top.why.startswith("matched") and not top.stale


def test_platform_and_language_filters(curated):
    hits = curated.search("matmul shared memory softmax reduction", platform="cpu", k=20)
    assert hits and all(h.note.matches("cpu", None) for h in hits)
    assert not {"triton-nvidia-hopper", "triton-amd-cdna3", "cuda-cpp-kernels"} & {
        h.note.id for h in hits}
    hits = curated.search("wavefront matmul shared memory", platform="rocm", language="triton",
                          k=20)
    ids = {h.note.id for h in hits}
    assert "triton-amd-cdna3" in ids and "triton-nvidia-hopper" not in ids
    assert "cuda-cpp-kernels" not in ids and "cpu-cpp-openmp-simd" not in ids
    # notes for "any" target match every filter
    assert "pitfall-tails-masks" in {h.note.id for h in curated.search(
        "mask", platform="rocm", language="hip", k=20)}


def test_any_as_a_filter_means_no_filter(curated):
    assert ([h.note.id for h in curated.search("matmul", platform="any", language="any", k=20)]
            == [h.note.id for h in curated.search("matmul", k=20)])


def test_unknown_filter_value_is_a_user_error(curated):
    with pytest.raises(KnowledgeError, match="unknown platform 'gpu'"):
        curated.search("x", platform="gpu")
    with pytest.raises(KnowledgeError, match="unknown language 'rust'"):
        curated.search("x", language="rust")


def test_expired_notes_are_excluded():
    index = KnowledgeIndex()
    index.add(make_note("old-trick", "zebra tiling trick", expires=TODAY))
    index.add(make_note("new-trick", "zebra tiling trick, still valid",
                        expires=TODAY + timedelta(days=1)))
    assert [h.note.id for h in index.search("zebra tiling")] == ["new-trick"]
    earlier = index.search("zebra tiling", today=TODAY - timedelta(days=1))
    assert {h.note.id for h in earlier} == {"old-trick", "new-trick"}
    assert index.get("old-trick").expired() and not index.get("new-trick").expired()


def test_provenance_mismatch_ranks_lower_and_marks_stale():
    index = KnowledgeIndex()
    prov = {"device": "NVIDIA H100", "libraries": {"torch": "2.11.0", "triton": "3.5.0"}}
    index.add(make_note("measured-old", "quokka blocking pays off", provenance=prov,
                        confidence=0.9, title="Quokka"))
    index.add(make_note("unmeasured", "quokka blocking pays off", confidence=0.9, title="Quokka"))
    for i in range(3):  # unrelated notes give the query terms a real IDF
        index.add(make_note(f"filler-{i}", "nothing relevant here"))
    same = {"device": "NVIDIA H100 80GB HBM3", "torch": "2.11.1+cu128", "triton": "3.5.1"}
    hits = index.search("quokka blocking", fingerprint=same)
    assert not any(h.stale for h in hits)
    assert hits[0].score == pytest.approx(hits[1].score)

    other = {"device": "NVIDIA H100 80GB HBM3", "torch": "2.13.0", "triton": "3.5.0"}
    hits = index.search("quokka blocking", fingerprint=other)
    assert [h.note.id for h in hits] == ["unmeasured", "measured-old"]
    stale = hits[1]
    assert stale.stale and stale.why == "measured on torch 2.11, this is 2.13: revalidate"
    assert stale.score == pytest.approx(hits[0].score * 0.5)
    # no fingerprint: nothing is judged stale
    assert not any(h.stale for h in index.search("quokka blocking"))


def test_staleness_fields():
    prov = {"device": "AMD Instinct MI300X", "driver": "6.8.5", "compiler": "g++ 12.2.0",
            "cuda": "12.4", "libraries": {"torch": "2.5.1"}}
    fp = {"device": "NVIDIA H200", "driver": "560.35.03", "cxx": "g++ (Debian 13.1.0-1) 13.1.0",
          "cuda": "12.4.1", "torch": "2.5.0", "triton": None, "hip": None}
    reasons = staleness(prov, fp)
    assert "compiled with gcc 12, this is gcc 13" in reasons
    assert "measured on AMD Instinct MI300X, this is NVIDIA H200" in reasons
    assert any(r.startswith("measured with driver 6.8.5") for r in reasons)
    assert not any("torch" in r or "CUDA" in r for r in reasons)  # same major.minor
    assert staleness({}, fp) == [] and staleness(prov, None) == []


@pytest.mark.parametrize("query", [
    '"unbalanced quote', "(wgmma OR", "AND", "softmax AND", "NOT mask", "exp*", "*", "col:x",
    "title:softmax", "a:b:c", "NEAR(x y)", "^start", "-minus +plus", "{}[]", "''", "", "   ",
    "x" * 5000, "ü ß 中文", "\x00\n\t",
])
def test_fts_syntax_in_queries_does_not_raise(curated, query):
    hits = curated.search(query, k=3)
    assert isinstance(hits, list)


def test_later_add_replaces_same_id_and_get_all():
    index = KnowledgeIndex()
    index.add(make_note("dup", "first version walrus"))
    index.add(make_note("dup", "second version narwhal"))
    assert len(index) == 1 and index.get("dup").body == "second version narwhal"
    assert index.search("walrus") == [] and index.search("narwhal")[0].note.id == "dup"
    assert [n.id for n in index.all()] == ["dup"]
    with pytest.raises(KnowledgeError, match="no note with id 'nope'"):
        index.get("nope")


def test_add_folder_reports_bad_notes_without_failing(tmp_path):
    (tmp_path / "good.md").write_text(GOOD)
    (tmp_path / "bad.md").write_text(note_text(confidence="7"))
    (tmp_path / "dup.md").write_text(GOOD)
    (tmp_path / "ignored.txt").write_text("not a note")
    index = KnowledgeIndex()
    errors = index.add_folder(tmp_path)
    assert len(errors) == 2
    assert any("bad.md: confidence 7 is out of range" in e for e in errors)
    assert any("duplicate id 'my-note'" in e for e in errors)
    assert [n.id for n in index.all()] == ["my-note"]
    with pytest.raises(KnowledgeError, match="no such notes folder"):
        index.add_folder(tmp_path / "absent")


def test_index_persists_in_a_database_file(tmp_path):
    db = tmp_path / "kb.sqlite"
    index = KnowledgeIndex(db)
    index.build([CURATED_DIR])
    index.close()
    reopened = KnowledgeIndex(db)
    assert len(reopened) >= 8
    assert reopened.search("wgmma TMA", platform="cuda")[0].note.id == "triton-nvidia-hopper"


def test_default_index_layers_user_and_learned_folders(tmp_path):
    user, learned = tmp_path / "user", tmp_path / "learned"
    user.mkdir()
    override = make_note("pitfall-tails-masks", "my own version about tails", source="curated",
                         tags=["tail"])
    (user / "pitfall-tails-masks.md").write_text(render_note(override))
    write_learned_note(learned, title="Pelican tiling", body="pelican tiling won 1.3x",
                       platforms=["cpu"], languages=["cpp"], tags=["pointwise"], provenance={},
                       confidence=0.6)
    index = default_index([user], learned_folder=learned)
    assert index.get("pitfall-tails-masks").body == "my own version about tails"
    assert index.search("pelican")[0].note.source == "learned"
    assert len(default_index(learned_folder=tmp_path / "never-created")) >= 8
    with pytest.raises(KnowledgeError):
        default_index([tmp_path / "typo"])


# ---- learned notes --------------------------------------------------------------------------
FP = {"platform": "cpu", "device": "AMD EPYC 9654", "driver": None, "cxx": "g++ (Debian) 12.2.0",
      "torch": "2.5.1+cpu", "triton": None, "cuda": None, "hip": None, "hostname": "box1"}


def test_provenance_from_fingerprint():
    prov = provenance_from_fingerprint(FP, shapes=[[512, 2048]], gain="1.4x")
    assert prov == {"platform": "cpu", "device": "AMD EPYC 9654",
                    "compiler": "g++ (Debian) 12.2.0", "libraries": {"torch": "2.5.1+cpu"},
                    "shapes": [[512, 2048]], "gain": "1.4x"}


def _learn(folder, body="Rows of 16 per program with a fused exp won 1.6x on 4096x64.",
           title="Winning: rows per program for softmax"):
    return write_learned_note(folder, title=title, body=body, platforms=["cpu"],
                              languages=["cpp"], tags=["softmax", "launch"],
                              provenance=provenance_from_fingerprint(FP, shapes=[[4096, 64]]),
                              confidence=0.7)


def test_learned_note_is_valid_searchable_and_idempotent(tmp_path):
    path = _learn(tmp_path)
    note = parse_note(path)
    assert note.source == "learned" and note.created == TODAY
    assert note.expires == TODAY + timedelta(days=180)
    assert note.id.startswith("winning-rows-per-program-for-softmax-") and path.stem == note.id
    assert _learn(tmp_path) == path  # the same lesson again (a resumed run): no duplicate
    assert len(list(tmp_path.glob("*.md"))) == 1
    other = _learn(tmp_path, body="Different lesson entirely.")
    assert other != path and len(list(tmp_path.glob("*.md"))) == 2
    index = default_index(learned_folder=tmp_path)
    hits = index.search("rows per program softmax fused", platform="cpu", language="cpp")
    assert note.id in [h.note.id for h in hits[:3]]
    stale = index.search("rows per program softmax", fingerprint={**FP, "torch": "2.7.0"}, k=20)
    learned_hit = next(h for h in stale if h.note.id == note.id)
    assert learned_hit.stale and "measured on torch 2.5, this is 2.7" in learned_hit.why
    assert not list(tmp_path.glob(".learn-*"))  # no temporary files left behind


def test_learned_note_never_overwrites_a_different_note(tmp_path):
    first = _learn(tmp_path / "a")
    clash = tmp_path / "b" / first.name
    clash.parent.mkdir()
    clash.write_text("someone else's file with the same name")
    written = _learn(tmp_path / "b")
    assert written.name == f"{first.stem}-2.md"
    assert clash.read_text() == "someone else's file with the same name"
    assert parse_note(written).id == f"{first.stem}-2"


def test_learned_note_without_expiry_and_bad_input(tmp_path):
    path = write_learned_note(tmp_path, title="Forever", body="b", platforms="cpu",
                              languages="cpp", tags="memory", provenance={}, confidence=1,
                              expires_days=None)
    assert parse_note(path).expires is None
    with pytest.raises(NoteError, match="confidence 1.5 is out of range"):
        write_learned_note(tmp_path, title="x", body="b", platforms=["cpu"], languages=["cpp"],
                           tags=["memory"], provenance={}, confidence=1.5)
    with pytest.raises(NoteError, match="unknown platform 'tpu'"):
        write_learned_note(tmp_path, title="x", body="b", platforms=["tpu"], languages=["cpp"],
                           tags=["memory"], provenance={}, confidence=0.5)
    assert len(list(tmp_path.glob("*.md"))) == 1
