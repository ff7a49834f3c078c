"""The HTML run report: content, escaping, well-formedness, a real render in headless Chromium."""
from __future__ import annotations

import os
import random
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from kernelevolve.report.html import render_html, write_html
from kernelevolve.report.summary import RunSummary
from kernelevolve.report.svg import funnel_rows

EVIL_SOURCE = '''import torch
# </code></pre><script>alert(1)</script> & "quotes" <b>bold</b>
class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x if 1 < 2 and 3 > 2 else x
'''
REJECT_STAGES = ["static", "load", "run", "correctness", "integrity", "timing"]


def full_summary(n_nodes: int = 30, seed: int = 0) -> dict:
    """A realistic 30-node run: a draft phase of seeds off the root, then branches expanded from
    good nodes, mixed rejections, two pending nodes, one crossover, and a best node."""
    rng = random.Random(seed)
    nodes = [{"id": 0, "parents": [], "operator": "reference", "rationale": "the PyTorch reference",
              "stage": None, "status": "root", "fitness": 1.0, "speedup": 1.0, "order": None}]
    accepted = [0]
    funnel = {k: 0 for k in ["proposed", "generation", *REJECT_STAGES, "accepted", "pending",
                             "infra_failed"]}
    order = 0
    for i in range(1, n_nodes):
        if i <= 5:
            parents, op = [0], "seed"
        elif i == 17:
            parents, op = [accepted[-1], accepted[-2]], "crossover"
        else:
            parents, op = [rng.choice(accepted[-4:])], rng.choice(["tune", "llm"])
        funnel["proposed"] += 1
        node = {"id": i, "parents": parents, "operator": op,
                "rationale": f"try tile {2 ** (i % 7 + 3)} <with> & 'unroll' x{i % 4 + 1}",
                "order": None}
        if i >= n_nodes - 2:
            node.update(stage=None, status="pending", fitness=None, speedup=None)
            funnel["pending"] += 1
        elif i % 3 == 1 and i != 13:
            stage = REJECT_STAGES[sum(funnel[g] for g in REJECT_STAGES) % len(REJECT_STAGES)]
            node.update(stage=stage, status="done", fitness=0.0, speedup=None, order=order)
            funnel[stage] += 1
            order += 1
        else:
            speed = round(0.8 + i * 0.03 + rng.random() * 0.1, 3)
            if i == 13:
                speed = 1.52
            node.update(stage="accepted", status="done", fitness=speed, speedup=speed, order=order)
            funnel["accepted"] += 1
            accepted.append(i)
            order += 1
        nodes.append(node)
    best = max((n for n in nodes if n.get("stage") == "accepted"), key=lambda n: n["fitness"])
    return {
        "run_id": "r-20261129-ab12cd", "status": "completed", "problem": "/path/to/problem.py",
        "platform": "cpu", "created": 1764460000.0, "elapsed_s": 123.4,
        "stop_reason": "evaluation budget reached (27 evaluations)",
        "outcome": {"kind": "improved",
                    "message": f"improved {best['speedup']:.2f}x (95% interval "
                               f"{best['speedup'] - 0.04:.2f}-{best['speedup'] + 0.05:.2f}) "
                               f"by node {best['id']}",
                    "speedup": best["speedup"], "node_id": best["id"],
                    "interval": [best["speedup"] - 0.04, best["speedup"] + 0.05]},
        "best": {"node_id": best["id"], "speedup": best["speedup"], "fitness": best["fitness"]},
        "funnel": funnel, "evaluations": order, "nodes": nodes,
        "cost": {"tokens": 12345, "dollars": 0.42, "by_model": {"gpt-x": {"tokens": 12345}}},
        "fingerprint": {"device": "cpu", "cpu": "AMD EPYC <9654>", "torch": "2.13.0",
                        "compiler": "g++ 12.2", "threads": 16},
        "best_source": EVIL_SOURCE,
        "best_cases": [{"name": "512x2048", "weight": 2.0, "ref_ms": 0.5, "cand_ms": 0.3,
                        "speedup": 1.667},
                       {"name": "tail<7x33>", "weight": 1.0, "ref_ms": 0.02, "cand_ms": 0.015,
                        "speedup": 1.333}],
    }


def empty_summary() -> dict:
    return {"run_id": "r-empty", "status": "running", "problem": "p.py", "platform": "cpu",
            "created": None, "elapsed_s": 0.0, "stop_reason": None,
            "outcome": {"kind": "no_safe_improvement", "message": "no safe improvement",
                        "speedup": None, "interval": None, "node_id": None},
            "best": None, "funnel": {}, "evaluations": 0, "nodes": [],
            "cost": {}, "fingerprint": {}, "best_source": None, "best_cases": []}


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class TagBalance(HTMLParser):
    """Checks every non-void element is closed in order; records what it saw."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.counts: dict[str, int] = {}
        self.classes: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        self.classes += [v for k, v in attrs if k == "class" and v]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        self.classes += [v for k, v in attrs if k == "class" and v]

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> TagBalance:
    p = TagBalance()
    p.feed(page)
    p.close()
    assert not p.errors, p.errors[:5]
    assert not p.stack, f"unclosed: {p.stack}"
    return p


def test_full_report_content_and_escaping():
    s = full_summary()
    page = render_html(RunSummary.from_dict(s))
    assert page.startswith("<!doctype html>")
    assert "<title>kernelevolve run r-20261129-ab12cd</title>" in page
    assert s["outcome"]["message"] in page
    assert 'class="outcome improved"' in page
    p = parse(page)
    assert p.classes.count("node") == len(s["nodes"]) == 30
    assert "tree" in p.classes and p.counts["svg"] >= 3
    # LLM- and candidate-written text is escaped everywhere, never live markup.
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;/code&gt;&lt;/pre&gt;" in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "<with>" not in page and "&lt;with&gt;" in page
    assert "tail&lt;7x33&gt;" in page and "AMD EPYC &lt;9654&gt;" in page
    # The decoded text of the page holds the source verbatim.
    assert EVIL_SOURCE.strip() in "".join(p.text)
    # Self-contained: nothing fetched from elsewhere.
    assert not re.search(r'(src|href)\s*=\s*"(https?:)?//', page)
    assert "@import" not in page
    # Best node highlighted in tree and trajectory.
    best = s["best"]["node_id"]
    assert f'data-id="{best}"' in page and "★" in page


def test_funnel_rows_narrow_to_accepted():
    s = full_summary()
    rows = funnel_rows(s["funnel"])
    lost = s["funnel"]["generation"] + s["funnel"].get("llm", 0)
    assert rows[0] == ("attempts", s["funnel"]["proposed"] + lost, 0) if lost else \
        rows[0] == ("candidates", s["funnel"]["proposed"], 0)
    assert rows[-1][0] == "accepted" and rows[-1][1] == s["funnel"]["accepted"]
    counts = [r[1] for r in rows]
    assert counts == sorted(counts, reverse=True)
    assert funnel_rows({}) == [("candidates", 0, 0), *[(f"passed {g}", 0, 0) for g in
                               REJECT_STAGES[:-1]], ("accepted", 0, 0)]


def test_empty_run_renders():
    page = render_html(RunSummary.from_dict(empty_summary()))
    p = parse(page)
    assert "r-empty" in page and "no safe improvement" in page
    assert 'class="outcome none"' in page
    assert p.classes.count("node") == 0
    assert "No evaluations yet" in page and "No candidate was accepted" in page
    # A summary with almost nothing in it still renders.
    parse(render_html(RunSummary(run_id="bare")))


def test_large_deep_tree_renders():
    """Hundreds of nodes and a long chain: layout is iterative and every node gets an element."""
    nodes = [{"id": 0, "parents": [], "operator": "reference", "status": "root", "stage": None,
              "fitness": 1.0, "speedup": 1.0, "order": None}]
    for i in range(1, 400):
        parent = i - 1 if i % 5 else max(0, i - 7)  # a long chain with side branches
        nodes.append({"id": i, "parents": [parent], "operator": "tune", "stage": "accepted",
                      "status": "done", "fitness": 1 + i / 1000, "speedup": 1 + i / 1000,
                      "order": i - 1})
    page = render_html(RunSummary(run_id="big", nodes=nodes, best={"node_id": 399}))
    assert parse(page).classes.count("node") == 400


def _png_pixels_distinct(path: Path, limit: int = 2) -> int:
    """Number of distinct pixel rows' contents seen (capped), with a minimal PNG decoder:
    concatenate IDAT, inflate, and compare scanlines without undoing filters (a flat image has
    identical filtered scanlines too)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, bpp = 8, b"", 0, 4
    while pos < len(data):
        length, ctype = struct.unpack(">I4s", data[pos:pos + 8])
        chunk = data[pos + 8:pos + 8 + length]
        if ctype == b"IHDR":
            width, _h, depth, color = struct.unpack(">IIBB", chunk[:10])
            bpp = {2: 3, 6: 4, 0: 1, 4: 2}.get(color, 4) * depth // 8
        elif ctype == b"IDAT":
            idat += chunk
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp + 1
    seen = set()
    for y in range(len(raw) // stride):
        line = raw[y * stride + 1:(y + 1) * stride]
        seen.update(line[x:x + bpp] for x in range(0, len(line), bpp * 37))
        if len(seen) > limit:
            break
    return len(seen)


def _chromium() -> str | None:
    found = shutil.which("chromium")
    if found:
        return found
    return "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None


@pytest.mark.slow
def test_renders_in_headless_chromium(tmp_path):
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (scripts/install.sh --test installs it; only "
                    "this test needs it)")
    s = full_summary()
    page = write_html(RunSummary.from_dict(s), tmp_path / "report.html")
    shot = tmp_path / "shot.png"
    base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}"]
    proc = subprocess.run(base + [f"--screenshot={shot}", "--window-size=1280,2000",
                                  page.resolve().as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert shot.exists(), proc.stderr[-2000:]
    assert shot.stat().st_size > 10_000
    assert _png_pixels_distinct(shot, limit=20) > 20, "screenshot is a flat colour"
    if os.environ.get("KERNELEVOLVE_REPORT_SHOT"):
        shutil.copy(shot, os.environ["KERNELEVOLVE_REPORT_SHOT"])
    # The browser's own DOM holds every SVG node and the escaped source as text, not script.
    dom = subprocess.run(base + ["--dump-dom", page.resolve().as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    assert len(re.findall(r'<g class="node"', dom)) == len(s["nodes"])
    assert "<script" not in dom.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom


def test_report_shows_the_reference_and_the_best_kernels_changes():
    s = full_summary()
    s["reference_source"] = "class Model:  # <the reference>\n    pass\n"
    s["best_diff"] = {"parent": 3, "diff": "--- node 3\n+++ node 9\n@@ -1,2 +1,2 @@\n"
                                           "-BLOCK = 64\n+BLOCK = 128 # <b>\n ROWS = 1\n"}
    page = render_html(RunSummary.from_dict(s))
    assert 'id="reference"' in page and "# &lt;the reference&gt;" in page
    assert 'id="best-diff"' in page and "Changes from node #3" in page
    assert '<span class="dadd">+BLOCK = 128 # &lt;b&gt;</span>' in page
    assert '<span class="ddel">-BLOCK = 64</span>' in page
    assert "<b>" not in page.split('id="best-diff"')[1].split("</pre>")[0]
    parse(page)  # still well-formed
