"""The tune operator: local search over a candidate's declared `TUNABLES` (no LLM).

For each parent that declares TUNABLES it proposes up to `context.want` configurations the
graph has not seen, each a rewrite of the parent's constants (operators/tunables.py):

- neighbours (Hamming distance 1..max_changes from the parent's configuration), drawn from
  three buckets so that cheap, likely-good moves come first without starving the others:
  one value moved to an adjacent list entry (weight 0.5), one value moved to any other entry
  (0.2), two or more values changed (0.3); empty buckets drop out and the rest renormalise;
- with probability `restart_prob` per draft, a random restart: a uniformly random unseen
  configuration of the whole space (escapes a local optimum; tinygrad's BEAM and FlagGems'
  autotuners enumerate instead, which is fine for them because they time in-process);
- when the parent's neighbourhood is used up, a "far" move: a random unseen configuration;
  when the whole space is used up, nothing (an empty list says "nothing left here").

"Seen" is tracked per *family*: sources that differ only in their tunable literals (see
`tunables.family_key`). A configuration is seen when a node's meta records it for the family
(tune's own drafts record `tune_family`), when a meta records it with no family (how a seed
candidate's config may be noted; such configs count for every family, conservatively), when
it is the parent's own configuration, when a draft of this same call proposed it, or when the
rewritten source's sha256 is already in the graph (`seen_hashes`).

All randomness comes from `random.Random(context.rng_seed)`: the same context gives the
same drafts.
"""
from __future__ import annotations

import hashlib
import itertools
import logging
import math
import random
from typing import Any

from kernelevolve.operators.base import Draft, ParentView, ProposalContext
from kernelevolve.operators.tunables import (Tunables, TunablesError, Value, config_key,
                                             family_key, parse, pinned, rewrite, space_size,
                                             unread)

__all__ = ["TuneOperator", "tune_meta", "space_size"]

log = logging.getLogger(__name__)

# Bucket weights for neighbour moves (see the module docstring).
BUCKET_WEIGHTS = {"adjacent": 0.5, "single": 0.2, "multi": 0.3}
# Enumerate at most this many neighbours of a parent, and enumerate the whole space (to find
# its last unseen points exactly) only up to this size; beyond, random draws are used.
MAX_NEIGHBOURS = 20_000
MAX_ENUMERATE = 200_000
RANDOM_TRIES = 256

Config = tuple[int, ...]  # one index into each tunable's value list, in declaration order


def tune_meta(source: str) -> dict[str, Any] | None:
    """Meta to store for a node made outside tune (e.g. a seed), so tune knows its config."""
    tun = parse(source)
    if tun is None:
        return None
    return {"tune_config": dict(tun.current), "tune_family": family_key(source, tunables=tun)}


class TuneOperator:
    name = "tune"
    repairs = False      # a rejected candidate's knobs are not what broke it
    exhaustible = True   # a parent's neighbourhood is finite: empty means tried

    def __init__(self, restart_prob: float = 0.1, max_changes: int = 2):
        if not 0.0 <= restart_prob <= 1.0:
            raise ValueError(f"restart_prob must be in [0, 1], got {restart_prob}")
        if max_changes < 1:
            raise ValueError(f"max_changes must be >= 1, got {max_changes}")
        self.restart_prob = restart_prob
        self.max_changes = max_changes
        self._reported: set[int] = set()

    async def propose(self, context: ProposalContext) -> list[Draft]:
        if not context.parents or context.want < 1:
            return []  # the draft phase: tune needs a parent to rewrite
        rng = random.Random(context.rng_seed)
        anywhere, by_family = _seen_configs(context.seen_meta)
        drafts: list[Draft] = []
        for parent in context.parents:
            try:
                tun = parse(parent.source)
            except TunablesError as exc:
                log.warning("tune: skipping node %s, its TUNABLES are malformed: %s",
                            parent.node_id, exc)
                continue
            if tun is None:
                continue
            dead = unread(parent.source, tun)
            if dead:
                tun = pinned(tun, dead)
                if parent.node_id not in self._reported:  # once per parent, not per call
                    self._reported.add(parent.node_id)
                    context.report("tune_unread_knobs", {"parent": parent.node_id,
                                                         "knobs": sorted(dead)})
            family = family_key(parent.source, tunables=tun)
            seen = by_family.setdefault(family, set())
            seen.update(anywhere)
            search = _ParentSearch(parent, tun, family, seen, context.seen_hashes, rng,
                                   self.max_changes)
            for _ in range(context.want):
                step = search.next(self.restart_prob)
                if step is None:
                    break
                drafts.append(search.draft(*step))
        return drafts


def _seen_configs(metas: tuple[dict[str, Any], ...]) -> tuple[set[str], dict[str, set[str]]]:
    anywhere: set[str] = set()
    by_family: dict[str, set[str]] = {}
    for meta in metas:
        cfg = meta.get("tune_config") if isinstance(meta, dict) else None
        if not isinstance(cfg, dict):
            continue
        try:
            key = config_key(cfg)
        except (TypeError, ValueError):
            continue
        family = meta.get("tune_family")
        (by_family.setdefault(family, set()) if isinstance(family, str) else anywhere).add(key)
    return anywhere, by_family


class _ParentSearch:
    """Proposals around one parent; `seen` is shared with other parents of its family."""

    def __init__(self, parent: ParentView, tun: Tunables, family: str, seen: set[str],
                 seen_hashes: frozenset[str], rng: random.Random, max_changes: int):
        self.parent, self.tun, self.family = parent, tun, family
        self.seen, self.seen_hashes, self.rng = seen, seen_hashes, rng
        self.names = list(tun.space)
        self.values = [tun.space[n] for n in self.names]
        self.lens = [len(v) for v in self.values]
        self.size = math.prod(self.lens)
        self.origin: Config = tuple(_index(self.values[i], tun.current[n])
                                    for i, n in enumerate(self.names))
        self.seen.add(config_key(self.as_dict(self.origin)))
        self.max_changes = max_changes
        self._buckets: dict[str, list[Config]] | None = None
        self._unseen: list[Config] | None = None

    # ---- choosing -------------------------------------------------------------------------
    def next(self, restart_prob: float) -> tuple[Config, str] | None:
        if self.rng.random() < restart_prob:
            cfg = self._random_unseen()
            return None if cfg is None else (cfg, "restart")
        cfg = self._neighbour()
        if cfg is not None:
            return cfg, "neighbour"
        cfg = self._random_unseen()
        return None if cfg is None else (cfg, "far")

    def _neighbour(self) -> Config | None:
        buckets = self._neighbourhood()
        while True:
            live = [b for b in BUCKET_WEIGHTS if buckets[b]]
            if not live:
                return None
            bucket = self.rng.choices(live, weights=[BUCKET_WEIGHTS[b] for b in live])[0]
            items = buckets[bucket]
            i = self.rng.randrange(len(items))
            cfg = items[i]
            items[i] = items[-1]
            items.pop()
            if self._claim(cfg):
                return cfg

    def _random_unseen(self) -> Config | None:
        if self._unseen is None:
            for _ in range(RANDOM_TRIES):  # cheap while most of the space is unseen
                cfg = tuple(self.rng.randrange(n) for n in self.lens)
                if self._claim(cfg):
                    return cfg
            if self.size > MAX_ENUMERATE:
                return None  # too big to list; practically never reached
            self._unseen = list(itertools.product(*(range(n) for n in self.lens)))
        while self._unseen:
            i = self.rng.randrange(len(self._unseen))
            cfg = self._unseen[i]
            self._unseen[i] = self._unseen[-1]
            self._unseen.pop()
            if self._claim(cfg):
                return cfg
        return None

    def _claim(self, cfg: Config) -> bool:
        """True (and mark it seen) when `cfg` was neither evaluated nor proposed before."""
        key = config_key(self.as_dict(cfg))
        if key in self.seen:
            return False
        self.seen.add(key)
        if self.seen_hashes and _sha256(self.source(cfg)) in self.seen_hashes:
            return False
        return True

    def _neighbourhood(self) -> dict[str, list[Config]]:
        if self._buckets is not None:
            return self._buckets
        buckets: dict[str, list[Config]] = {b: [] for b in BUCKET_WEIGHTS}
        count = 0
        dims = [i for i, n in enumerate(self.lens) if n > 1]
        for k in range(1, min(self.max_changes, len(dims)) + 1):
            for chosen in itertools.combinations(dims, k):
                alternatives = [[j for j in range(self.lens[i]) if j != self.origin[i]]
                                for i in chosen]
                for picks in itertools.product(*alternatives):
                    cfg = list(self.origin)
                    for i, j in zip(chosen, picks):
                        cfg[i] = j
                    if k > 1:
                        bucket = "multi"
                    elif abs(picks[0] - self.origin[chosen[0]]) == 1:
                        bucket = "adjacent"
                    else:
                        bucket = "single"
                    buckets[bucket].append(tuple(cfg))
                    count += 1
                    if count >= MAX_NEIGHBOURS:
                        self._buckets = buckets
                        return buckets
        self._buckets = buckets
        return buckets

    # ---- output ---------------------------------------------------------------------------
    def as_dict(self, cfg: Config) -> dict[str, Value]:
        return {n: self.values[i][j] for i, (n, j) in enumerate(zip(self.names, cfg))}

    def source(self, cfg: Config) -> str:
        return rewrite(self.parent.source, self.as_dict(cfg), tunables=self.tun)

    def draft(self, cfg: Config, move: str) -> Draft:
        config = self.as_dict(cfg)
        changes = ", ".join(f"{n} {self.values[i][self.origin[i]]!r} -> {self.values[i][j]!r}"
                            for i, (n, j) in enumerate(zip(self.names, cfg))
                            if j != self.origin[i])
        p = self.parent
        fitness = "fitness not measured" if p.fitness is None else f"fitness {p.fitness:.2f}x"
        if p.fitness is not None and p.stage and p.stage != "accepted":
            fitness += f", rejected at {p.stage}"
        where = {"neighbour": f"neighbour of node {p.node_id}",
                 "restart": f"random restart from node {p.node_id}",
                 "far": f"node {p.node_id}'s neighbourhood is exhausted"}[move]
        return Draft(source=self.source(cfg), parents=(p.node_id,), operator="tune",
                     rationale=f"tune: {changes} ({where}, {fitness})",
                     meta={"tune_config": config, "tune_family": self.family,
                           "tune_move": move})


def _index(values: list[Value], value: Value) -> int:
    for i, v in enumerate(values):
        if type(v) is type(value) and v == value:
            return i
    raise AssertionError("parse() puts the current value in its space")  # pragma: no cover


def _sha256(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()
