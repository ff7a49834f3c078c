"""The tune operator: TUNABLES parsing and rewriting (operators/tunables.py) and the
neighbour search (operators/tune.py). Everything here is pure Python (a rewritten softmax
candidate evaluated for real, and the synthesizer's knobs: test_synth_drafts.py)."""
from __future__ import annotations

import ast
import asyncio
import hashlib
import itertools
import pickle
from collections import Counter

import pytest

from conftest import EXAMPLES
from kernelevolve.harness.gates.static import check_static
from kernelevolve.operators.base import Operator, ParentView, ProposalContext
from kernelevolve.operators.tune import TuneOperator, space_size, tune_meta
from kernelevolve.operators.tunables import (TunablesError, config_key, family_key, parse,
                                             read_config, rewrite, space)

SRC = '''"""A module with tunables."""
import math

# Rows per chunk.
BLOCK_ROWS = 8   # keep the comment
UNROLL: int = 2
SCALE = -1.5
FAST = True
MODE = "static"  # schedule
TUNABLES = {
    "BLOCK_ROWS": [4, 8, 16, 32],
    "UNROLL": (1, 2, 4),
    "SCALE": [-1.5, 0.5],
    "FAST": [True, False],
    "MODE": ["static", "dynamic, 4"],
}


def f():
    return BLOCK_ROWS * UNROLL, SCALE, FAST, MODE
'''

CPP_EXAMPLES = sorted(EXAMPLES.glob("*/candidate_cpp.py"))
ALL_EXAMPLES = sorted(EXAMPLES.glob("*/candidate_*.py"))


def tiny(values_a=(1, 2), values_b=("x", "y"), a=1, b="x", extra="") -> str:
    return (f"A = {a!r}\nB = {b!r}\n{extra}"
            f"TUNABLES = {{'A': {list(values_a)!r}, 'B': {list(values_b)!r}}}\n"
            "\n\ndef use():\n    return A, B\n")


def ctx(*parents: ParentView, want: int = 1, seed: int = 0, seen_meta=(), seen_hashes=()):
    return ProposalContext(problem_path="p.py", problem_source="", platform="cpu",
                           parents=tuple(parents), seen_hashes=frozenset(seen_hashes),
                           seen_meta=tuple(seen_meta), rng_seed=seed, want=want)


def parent(source: str, node_id: int = 3, fitness: float | None = 1.42) -> ParentView:
    return ParentView(node_id=node_id, source=source, fitness=fitness, stage="accepted",
                      reason="")


def propose(op: TuneOperator, context: ProposalContext):
    return asyncio.run(op.propose(context))


def changed(a: dict, b: dict) -> set[str]:
    return {k for k in a if a[k] != b[k] or type(a[k]) is not type(b[k])}


# ---- parsing --------------------------------------------------------------------------------

def test_read_config_and_space():
    assert read_config(SRC) == {"BLOCK_ROWS": 8, "UNROLL": 2, "SCALE": -1.5, "FAST": True,
                                "MODE": "static"}
    assert space(SRC) == {"BLOCK_ROWS": [4, 8, 16, 32], "UNROLL": [1, 2, 4],
                          "SCALE": [-1.5, 0.5], "FAST": [True, False],
                          "MODE": ["static", "dynamic, 4"]}
    assert space_size(SRC) == 4 * 3 * 2 * 2 * 2


def test_no_tunables():
    src = "X = 1\nclass ModelNew: pass\n"
    assert read_config(src) is None and parse(src) is None
    assert space(src) == {} and space_size(src) == 0


@pytest.mark.parametrize("body, line, words", [
    ("TUNABLES = {'A': [1, 2]}\n", 1, "never assigns"),
    ("A = 1\nA = 2\nTUNABLES = {'A': [1, 2]}\n", 2, "more than once"),
    ("A = 1\nTUNABLES = {'A': [1, 2]}\nA += 1\n", 3, "more than once"),
    ("A = 2 * 4\nTUNABLES = {'A': [8]}\n", 1, "not an int, float, bool or str literal"),
    ("A = None\nTUNABLES = {'A': [1]}\n", 1, "not an int, float, bool or str literal"),
    ("if True:\n    A = 1\nTUNABLES = {'A': [1]}\n", 2, "top-level"),
    ("A, B = 1, 2\nTUNABLES = {'A': [1]}\n", 1, "plain"),
    ("A = B = 1\nTUNABLES = {'A': [1]}\n", 1, "plain"),
    ("A = 1\ndef f():\n    global A\n    A = 2\nTUNABLES = {'A': [1]}\n", 3, "more than once"),
    ("A = 1\nTUNABLES = dict(A=[1])\n", 2, "dict literal"),
    ("A = 1\nTUNABLES = {'A': 1}\n", 2, "non-empty list"),
    ("A = 1\nTUNABLES = {'A': []}\n", 2, "non-empty list"),
    ("A = 1\nTUNABLES = {'A': [1, 2 + 3]}\n", 2, "`2 + 3`"),
    ("A = 1\nTUNABLES = {'A': [1, 1]}\n", 2, "twice"),
    ("A = 1\nTUNABLES = {'A': [1], 'A': [1]}\n", 2, "twice"),
    ("A = 1\nTUNABLES = {1: [1]}\n", 2, "string literals"),
    ("A = 1\nTUNABLES = {'A': [1]}\nTUNABLES = {}\n", 3, "TUNABLES is assigned more"),
    ("A = 1\nTUNABLES = {'A': [1, 1e999]}\n", 2, "not an int"),
    ("A = (\nTUNABLES = {}\n", None, "does not parse"),
])
def test_errors_name_the_line(body, line, words):
    with pytest.raises(TunablesError) as info:
        parse(body)
    err = info.value
    assert isinstance(err, ValueError)
    assert words in str(err)
    if line is not None:
        assert err.line == line and str(err).startswith(f"line {line}: ")


def test_error_is_picklable():
    with pytest.raises(TunablesError) as info:
        parse("TUNABLES = {'A': [1]}\n")
    copy = pickle.loads(pickle.dumps(info.value))
    assert isinstance(copy, TunablesError) and str(copy) == str(info.value)
    assert copy.line == info.value.line


def test_current_value_outside_its_list_becomes_an_extra_value():
    # Decision: a parent whose constant was edited (by hand or by another operator) stays
    # tunable; its value joins the space in sorted position. strict=True reports it instead.
    src = "B = 12\nC = 'z'\nTUNABLES = {'B': [4, 8, 16], 'C': ['x', 'y']}\n"
    tun = parse(src)
    assert tun.space == {"B": [4, 8, 12, 16], "C": ["x", "y", "z"]}
    assert len(tun.warnings) == 2 and "line 1" in tun.warnings[0]
    with pytest.raises(TunablesError, match="not in TUNABLES") as info:
        parse(src, strict=True)
    assert info.value.line == 1


def test_values_compare_by_type():
    # 8.0 is not 8 and True is not 1: the JSON keys tell them apart too.
    tun = parse("A = 8.0\nB = True\nTUNABLES = {'A': [8, 16], 'B': [1, 0]}\n")
    assert tun.space == {"A": [8, 8.0, 16], "B": [1, 0, True]}
    assert config_key({"A": 8}) != config_key({"A": 8.0}) != config_key({"A": True})


def test_config_key_is_canonical():
    assert config_key({"B": 1, "A": "x"}) == config_key({"A": "x", "B": 1}) == '{"A":"x","B":1}'


# ---- rewriting ------------------------------------------------------------------------------

def test_rewrite_changes_only_the_literals():
    cfg = {"BLOCK_ROWS": 32, "UNROLL": 4, "SCALE": 0.5, "FAST": False, "MODE": "dynamic, 4"}
    new = rewrite(SRC, cfg)
    old_lines, new_lines = SRC.splitlines(), new.splitlines()
    assert len(old_lines) == len(new_lines)
    diff = [(a, b) for a, b in zip(old_lines, new_lines) if a != b]
    assert diff == [("BLOCK_ROWS = 8   # keep the comment", "BLOCK_ROWS = 32   # keep the comment"),
                    ("UNROLL: int = 2", "UNROLL: int = 4"),
                    ("SCALE = -1.5", "SCALE = 0.5"),
                    ("FAST = True", "FAST = False"),
                    ('MODE = "static"  # schedule', 'MODE = "dynamic, 4"  # schedule')]
    assert read_config(new) == cfg
    assert rewrite(new, read_config(SRC)) == SRC  # the way back is byte-identical


def test_rewrite_partial_config_and_odd_sources():
    # CRLF line endings, non-ASCII text before the literal on its line, a literal split over
    # lines, a parenthesised value: only the literal's characters change.
    src = ("# héllo\r\nC = 'é'; A =  ( 4 )  # é ü\r\nB = (\r\n    8\r\n)\r\n"
           "TUNABLES = {'A': [4, 5], 'B': [8, 9]}\r\n")
    new = rewrite(src, {"A": 5})
    assert new == src.replace("( 4 )", "( 5 )")
    assert rewrite(src, {"B": 9}) == src.replace("    8\r\n", "    9\r\n")
    assert rewrite(src, {}) == src


def test_rewrite_rejects_unknown_names_and_values():
    with pytest.raises(TunablesError, match="not a tunable"):
        rewrite(SRC, {"NOPE": 1})
    with pytest.raises(TunablesError, match="not an allowed value") as info:
        rewrite(SRC, {"BLOCK_ROWS": 7})
    assert info.value.line == 5
    with pytest.raises(TunablesError, match="no TUNABLES"):
        rewrite("X = 1\n", {"X": 2})


def test_family_key_ignores_only_the_tunable_values():
    other = rewrite(SRC, {"BLOCK_ROWS": 16, "MODE": "dynamic, 4"})
    assert family_key(other) == family_key(SRC)
    assert family_key(SRC.replace("keep the comment", "changed")) != family_key(SRC)


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL_EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_candidates_are_tunable(path):
    src = path.read_text()
    tun = parse(src, strict=True)  # every default is one of its listed values
    assert tun is not None and 2 <= len(tun.space) <= 3 and tun.size() >= 4
    language = "triton" if "triton" in path.stem else "cpp"
    names = list(tun.space)
    for combo in itertools.product(*tun.space.values()):
        cfg = dict(zip(names, combo))
        new = rewrite(src, cfg)
        ast.parse(new)
        assert read_config(new) == cfg
        report = check_static(new, path.name, "cpu", (language,))
        assert report.ok, report.reason


# ---- proposing ------------------------------------------------------------------------------

def test_is_an_operator_and_validates_options():
    assert isinstance(TuneOperator(), Operator) and TuneOperator.name == "tune"
    with pytest.raises(ValueError):
        TuneOperator(restart_prob=1.5)
    with pytest.raises(ValueError):
        TuneOperator(max_changes=0)


def test_draft_phase_and_untunable_parents_give_nothing():
    op = TuneOperator()
    assert propose(op, ctx(want=4)) == []
    assert propose(op, ctx(parent("class ModelNew: pass\n"), want=4)) == []
    assert propose(op, ctx(parent("TUNABLES = {'A': [1]}\n"), want=4)) == []  # malformed


def test_neighbours_change_one_or_two_values():
    op = TuneOperator(restart_prob=0.0)
    base = read_config(SRC)
    drafts = propose(op, ctx(parent(SRC), want=20))
    assert len(drafts) == 20
    counts = Counter()
    for d in drafts:
        cfg = d.meta["tune_config"]
        n = len(changed(base, cfg))
        assert 1 <= n <= 2
        counts[n] += 1
        assert d.source == rewrite(SRC, cfg)
        assert d.parents == (3,) and d.operator == "tune" and d.meta["tune_move"] == "neighbour"
        assert d.rationale.startswith("tune: ") and "(neighbour of node 3, fitness 1.42x)" in \
            d.rationale
    assert counts[1] and counts[2]
    assert len({config_key(d.meta["tune_config"]) for d in drafts}) == 20
    one = next(d for d in drafts if changed(base, d.meta["tune_config"]) == {"BLOCK_ROWS"})
    new = one.meta["tune_config"]["BLOCK_ROWS"]
    assert f"BLOCK_ROWS 8 -> {new}" in one.rationale


def test_rationale_for_a_two_value_change():
    op = TuneOperator(restart_prob=0.0, max_changes=2)
    src = tiny(values_a=(1, 2), values_b=("x", "y"))
    p = ParentView(node_id=7, source=src, fitness=None, stage="", reason="")
    drafts = propose(op, ctx(p, want=3))
    two = [d for d in drafts if len(changed(read_config(src), d.meta["tune_config"])) == 2]
    assert two and two[0].rationale == \
        "tune: A 1 -> 2, B 'x' -> 'y' (neighbour of node 7, fitness not measured)"


def test_never_repeats_seen_configs():
    op = TuneOperator(restart_prob=0.5)
    fam = family_key(SRC)
    near = {**read_config(SRC), "BLOCK_ROWS": 16}
    near2 = {**read_config(SRC), "UNROLL": 4}
    near3 = {**read_config(SRC), "FAST": False}
    meta = [{"tune_config": near, "tune_family": fam},   # tried by tune in this family
            {"tune_config": near2},                      # recorded without a family
            {"reason": "unrelated"}]
    hashes = [hashlib.sha256(rewrite(SRC, near3).encode()).hexdigest()]  # already in the graph
    seen = {config_key(c) for c in (near, near2, near3, read_config(SRC))}
    for seed in range(30):
        drafts = propose(op, ctx(parent(SRC), want=10, seed=seed, seen_meta=meta,
                                 seen_hashes=hashes))
        keys = [config_key(d.meta["tune_config"]) for d in drafts]
        assert len(keys) == 10 and len(set(keys)) == 10
        assert not seen & set(keys)


def test_other_families_do_not_count_as_seen():
    src = tiny()
    cfg = {"A": 2, "B": "x"}
    drafts = propose(TuneOperator(), ctx(parent(src), want=5, seen_meta=[
        {"tune_config": cfg, "tune_family": "some-other-kernel"}]))
    assert cfg in [d.meta["tune_config"] for d in drafts]


def test_parents_of_one_family_share_what_they_propose():
    a = parent(SRC, node_id=1)
    b = parent(rewrite(SRC, {"BLOCK_ROWS": 16}), node_id=2)
    drafts = propose(TuneOperator(), ctx(a, b, want=8))
    keys = [config_key(d.meta["tune_config"]) for d in drafts]
    assert len(drafts) == 16 and len(set(keys)) == 16
    assert config_key(read_config(b.source)) not in keys  # b's own config is seen too
    assert {d.parents for d in drafts} == {(1,), (2,)}


def test_deterministic_for_a_seed():
    op = TuneOperator(restart_prob=0.3)
    runs = [propose(op, ctx(parent(SRC), want=6, seed=s)) for s in (5, 5, 6)]
    assert runs[0] == runs[1]
    assert [d.meta for d in runs[0]] != [d.meta for d in runs[2]]


def exhaust(op: TuneOperator, src: str, want: int = 1, limit: int = 100):
    meta: list[dict] = []
    hashes = {hashlib.sha256(src.encode()).hexdigest()}
    for step in range(limit):
        drafts = propose(op, ctx(parent(src), want=want, seed=step, seen_meta=meta,
                                 seen_hashes=hashes))
        if not drafts:
            return meta
        for d in drafts:
            meta.append(d.meta)
            hashes.add(hashlib.sha256(d.source.encode()).hexdigest())
    raise AssertionError("the space was never exhausted")


def test_exhausts_a_tiny_space_then_returns_nothing():
    src = tiny()
    metas = exhaust(TuneOperator(), src)
    configs = [config_key(m["tune_config"]) for m in metas]
    assert len(configs) == 3 == len(set(configs))  # 2x2 space minus the parent's own config
    assert config_key(read_config(src)) not in configs


def test_far_moves_once_the_neighbourhood_is_used_up():
    # Three binary knobs, single-value moves only: 3 neighbours, then the 4 farther configs.
    src = ("A = 0\nB = 0\nC = 0\nTUNABLES = {'A': [0, 1], 'B': [0, 1], 'C': [0, 1]}\n"
           "USED = (A, B, C)\n")
    metas = exhaust(TuneOperator(restart_prob=0.0, max_changes=1), src, want=2)
    moves = [m["tune_move"] for m in metas]
    assert moves == ["neighbour"] * 3 + ["far"] * 4
    assert len({config_key(m["tune_config"]) for m in metas}) == 7


def test_want_is_capped_by_what_is_left():
    drafts = propose(TuneOperator(), ctx(parent(tiny()), want=10))
    assert len(drafts) == 3


@pytest.mark.slow
@pytest.mark.parametrize("rate", [0.0, 0.1, 0.3, 1.0])
def test_restarts_happen_at_the_configured_rate(rate):
    # 6 knobs with 8 values: 262,144 configs, so neither neighbours nor the space run out.
    names = [f"K{i}" for i in range(6)]
    src = "".join(f"{n} = 0\n" for n in names) + "TUNABLES = {" + \
        ", ".join(f"{n!r}: {list(range(8))}" for n in names) + "}\n" + \
        f"USED = ({', '.join(names)})\n"
    op = TuneOperator(restart_prob=rate)
    moves = Counter()
    for seed in range(200):
        for d in propose(op, ctx(parent(src), want=10, seed=seed)):
            moves[d.meta["tune_move"]] += 1
    total = sum(moves.values())
    assert total == 2000 and moves["far"] == 0
    assert abs(moves["restart"] / total - rate) < 0.03


def test_tune_meta_for_seeds():
    meta = tune_meta(SRC)
    assert meta == {"tune_config": read_config(SRC), "tune_family": family_key(SRC)}
    assert tune_meta("X = 1\n") is None
    # A seed recorded this way is seen: tune never proposes its config again.
    other = parent(rewrite(SRC, {"BLOCK_ROWS": 16}), node_id=9)
    drafts = propose(TuneOperator(), ctx(other, want=50, seen_meta=[meta]))
    assert read_config(SRC) not in [d.meta["tune_config"] for d in drafts]


def test_knobs_nothing_reads_are_held_at_their_value():
    """A declared tunable whose name no code loads gives the same program for every value:
    tune proposes no configuration that differs only there, and says so once."""
    from kernelevolve.operators.tunables import unread

    source = ("BLOCK = 64\nDEAD = 1\nTUNABLES = {'BLOCK': [32, 64, 128], 'DEAD': [1, 0]}\n"
              "def kernel(x):\n    return x * BLOCK\n")
    assert unread(source, parse(source)) == {"DEAD"}
    events = []
    context = ProposalContext(problem_path="p.py", problem_source="", platform="cpu",
                              parents=(parent(source, node_id=1),), seen_hashes=frozenset(),
                              seen_meta=(), rng_seed=3, want=8,
                              report=lambda kind, data: events.append((kind, data)))
    op = TuneOperator()
    configs = [read_config(d.source) for d in propose(op, context)]
    assert configs and all(c["DEAD"] == 1 for c in configs)
    assert sorted(c["BLOCK"] for c in configs) == [32, 128]  # the whole live space, once
    propose(op, context)
    assert events == [("tune_unread_knobs", {"parent": 1, "knobs": ["DEAD"]})]
