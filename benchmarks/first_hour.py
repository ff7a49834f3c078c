"""A newcomer's first hour, timed (issue 31's figures): a static rejection, a good `eval`, the
README's first command and the README-style softmax search, each through the real CLI.

Run it on an idle machine; `--src` times another checkout's package (its `src` folder) with the
same steps, so a before/after pair comes from one script:

    python benchmarks/first_hour.py [--src OTHER/src] [--repeats 3] [--json out.json]
    python benchmarks/first_hour.py --only eval      # static rejection and good eval only

For each search: wall time, the search phase's evaluations per minute (the run's own elapsed
search time), the time after the search (the finalists' re-measurement), the answer and the
width of its 95% interval (hi/lo).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
EX = ROOT / "examples"
BROKEN = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x:\n"
SEARCHES = {
    "rmsnorm (README's first command)": ["optimize", str(EX / "rmsnorm/problem.py"),
                                         "--max-evals", "12"],
    "softmax, seeded": ["optimize", str(EX / "softmax/problem.py"), "--seed-candidate",
                        str(EX / "softmax/candidate_cpp.py"), "--max-evals", "12"],
}


def cli(src: Path, args: list[str], cwd: Path) -> tuple[float, int, str]:
    env = dict(os.environ, PYTHONPATH=str(src), COLUMNS="160")
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "kernelevolve.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True)
    return time.monotonic() - t0, proc.returncode, proc.stdout + proc.stderr


def answer_line(text: str) -> str:
    for line in text.splitlines():
        if line.startswith(("ACCEPTED", "REJECTED", "improved", "no safe", "outcome")):
            return line.strip()[:100]
    return text.strip().splitlines()[-1][:100] if text.strip() else ""


def evals(src: Path, work: Path, repeats: int) -> list[dict]:
    bad = work / "broken.py"
    bad.write_text(BROKEN)
    rows = []
    for name, cand in (("static rejection (syntax error)", bad),
                       ("good eval (rmsnorm C++)", EX / "rmsnorm/candidate_cpp.py")):
        out = work / "eval.json"
        runs = [cli(src, ["eval", str(EX / "rmsnorm/problem.py"), str(cand), "--json",
                          str(out)], work) for _ in range(repeats)]
        walls = [r[0] for r in runs]
        row = {"step": name, "wall_s": statistics.median(walls), "walls": walls,
               "rc": runs[-1][1], "answer": answer_line(runs[-1][2])}
        if out.exists() and runs[-1][1] == 0:
            interval = json.loads(out.read_text()).get("speedup_ci") or [None, None]
            row.update(interval=interval,
                       width=interval[1] / interval[0] if interval[0] else None)
        rows.append(row)
    return rows


def search(src: Path, work: Path, name: str, args: list[str]) -> dict:
    ws = work / f"ws_{len(list(work.glob('ws_*')))}"
    wall, rc, out = cli(src, [*args, "--workspace", str(ws)], work)
    _, _, listed = cli(src, ["runs", "--json", "--workspace", str(ws)], work)
    ids = [json.loads(line).get("run_id") for line in listed.splitlines() if line.startswith("{")]
    _, _, shown = cli(src, ["show", str(ids[-1] if ids else "last"), "--json", "--workspace",
                            str(ws)], work)
    try:
        summary = json.loads(shown)
    except json.JSONDecodeError:
        return {"step": name, "wall_s": wall, "rc": rc, "answer": answer_line(out),
                "show_error": shown[:300]}
    outcome = summary.get("outcome") or {}
    interval = outcome.get("interval") or [None, None]
    search_s = summary.get("elapsed_s") or 0.0
    n = summary.get("evaluations") or 0
    return {"step": name, "wall_s": wall, "rc": rc, "answer": answer_line(out),
            "evaluations": n, "search_s": search_s,
            "evals_per_min": 60 * n / search_s if search_s else None,
            "after_search_s": wall - search_s, "speedup": outcome.get("speedup"),
            "interval": interval,
            "width": interval[1] / interval[0] if interval[0] else None}


def table(rows: list[dict], label: str) -> Table:
    t = Table(title=f"first hour: {label}")
    for col in ("step", "wall s", "evals/min", "after search s", "answer", "interval (hi/lo)"):
        t.add_column(col)
    for r in rows:
        iv = r.get("interval") or [None, None]
        t.add_row(r["step"], f"{r['wall_s']:.1f}",
                  f"{r['evals_per_min']:.2f}" if r.get("evals_per_min") else "",
                  f"{r['after_search_s']:.1f}" if r.get("after_search_s") else "",
                  r.get("answer", ""),
                  f"{iv[0]:.3f}-{iv[1]:.3f} ({r['width']:.3f})" if r.get("width") else "")
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("eval", "search"), default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if args.only != "search":
            rows += evals(args.src.resolve(), work, args.repeats)
        if args.only != "eval":
            rows += [search(args.src.resolve(), work, n, a) for n, a in SEARCHES.items()]
    Console(width=200).print(table(rows, str(args.src)))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
