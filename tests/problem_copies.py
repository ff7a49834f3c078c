"""Copies of the examples at fewer rows, for tests whose subject is a candidate's correctness
on the examples' shapes of row, not the examples' row counts (the Triton interpreter runs one
program per block of rows; a full example's 4 MB inputs cost seconds of CPU per evaluation)."""
from __future__ import annotations

import ast


def fewer_rows(problem, rows, tmp_path):
    """A copy of an example whose cases bind BATCH to `rows` (the columns unchanged)."""
    text = problem.read_text()
    tree = ast.parse(text)
    node = next(n for n in tree.body if isinstance(n, ast.Assign)
                and [t.id for t in n.targets if isinstance(t, ast.Name)] == ["CASES"])
    cases = ast.literal_eval(node.value)
    assert len(cases) == len(rows) and all("BATCH" in c for c in cases)
    for case, n in zip(cases, rows):
        old = case["name"].split("_")[-1]
        case["name"] = case["name"].replace(old, f"{n}x{old.split('x', 1)[1]}")
        case["BATCH"] = n
    lines = text.splitlines(keepends=True)
    start, end = node.lineno - 1, node.end_lineno
    body = "".join(lines[:start]) + f"CASES = {cases!r}\n" + "".join(lines[end:])
    path = tmp_path / f"fewer_rows_{problem.parent.name}.py"
    path.write_text(body.replace("\nBATCH = ", f"\nBATCH = {rows[0]}  # was ", 1))
    return path
