"""Selection policies: which nodes become parents next round (pluggable by name).

A policy sees the graph and returns up to ``k`` parents. Scores are deliberately not pure
greed: a node's score is its measured quality plus an exploration bonus that shrinks with the
children it already has and grows with how different its parameters are from the others chosen,
so a locally worse node can still be expanded.

Quality of an accepted node is ``log(speedup)`` when it has a fitness (a device platform);
on ``interpret`` there is no fitness and all accepted nodes score 0: exploration alone decides.
Correct nodes rejected only for speed (performance/fitness gate) keep their measured quality
and can be parents; nodes rejected earlier never are (the engine sends them to ``repair``).

- ``best_first``: quality + ``c * sqrt(log(1 + total) / (1 + children))`` + diversity bonus.
- ``islands``: nodes belong to ``n_islands`` sub-populations (seeds round-robin, children
  inherit); each island picks its own best-first parent, and every ``migration_interval`` rounds
  each island's best is also offered to the next island (recorded in the node's ``migrated_to``).
"""

from __future__ import annotations

import math

from workers.search.graph import STATUS_ACCEPTED, Graph, Node

VIABLE_GATES = ("performance", "fitness")  # correct, but not (significantly) faster


def quality(node: Node) -> float:
    """log(speedup) for any node with a measured fitness; 0 for accepted nodes without one.

    A correct candidate rejected only for speed keeps its measured quality: it is a legitimate
    parent (a locally worse node), which matters most before anything has been accepted.
    """
    s = node.speedup
    if node.status == STATUS_ACCEPTED:
        return math.log(s) if s and s > 0 else 0.0
    if node.failed_gate in VIABLE_GATES and s and s > 0:
        return math.log(s)
    return -math.inf


def parent_pool(graph: Graph) -> list[Node]:
    return [n for n in graph.nodes.values() if quality(n) > -math.inf]


def per_case_winners(pool: list[Node]) -> dict[str, Node]:
    """For each case, the node of ``pool`` measured fastest on it (relative to the campaign's
    baseline); only nodes whose fitness has per-case speedups take part."""
    best: dict[str, Node] = {}
    for node in sorted(pool, key=lambda n: n.id):
        for case, speedup in ((node.fitness or {}).get("per_case") or {}).items():
            if not isinstance(speedup, (int, float)):
                continue
            held = best.get(case)
            if held is None or speedup > held.fitness["per_case"][case]:
                best[case] = node
    return best


def _param_distance(a: dict, b: dict) -> float:
    keys = set(a) | set(b)
    if not keys:
        return 0.0
    return sum(1 for k in keys if a.get(k) != b.get(k)) / len(keys)


class BestFirst:
    """Best-first with an exploration (children count) and a diversity bonus."""

    name = "best_first"

    def __init__(self, exploration: float = 0.3, diversity: float = 0.2) -> None:
        self.exploration = exploration
        self.diversity = diversity

    def score(self, graph: Graph, node: Node, chosen: list[Node]) -> float:
        total = len(graph.nodes)
        children = len(graph.children(node.id))
        bonus = self.exploration * math.sqrt(math.log(1 + total) / (1 + children))
        if chosen:
            bonus += self.diversity * min(_param_distance(node.params, c.params) for c in chosen)
        else:
            bonus += self.diversity
        return quality(node) + bonus

    def select(self, graph: Graph, k: int, state: dict | None = None) -> list[Node]:
        pool = parent_pool(graph)
        chosen: list[Node] = []
        while pool and len(chosen) < k:
            best = max(pool, key=lambda n: (self.score(graph, n, chosen), n.id))
            chosen.append(best)
            pool = [n for n in pool if n.id != best.id]
        return chosen


class Islands:
    """Several sub-populations, each expanded best-first, with periodic migration."""

    name = "islands"

    def __init__(self, n_islands: int = 3, migration_interval: int = 3) -> None:
        self.n_islands = n_islands
        self.migration_interval = migration_interval
        self.inner = BestFirst()

    def island_of(self, node: Node) -> set[int]:
        return {node.island, *node.migrated_to}

    def select(self, graph: Graph, k: int, state: dict | None = None) -> list[Node]:
        rnd = (state or {}).get("round", 0)
        if self.migration_interval and rnd and rnd % self.migration_interval == 0:
            self.migrate(graph)
        chosen: list[Node] = []
        per_island = max(1, k // self.n_islands)
        for isl in range(self.n_islands):
            members = [n for n in parent_pool(graph) if isl in self.island_of(n)]
            sub = Graph(nodes={n.id: n for n in members}, edges=graph.edges)
            for n in self.inner.select(sub, per_island):
                if n not in chosen:
                    chosen.append(n)
        return chosen[:k]

    def migrate(self, graph: Graph) -> None:
        for isl in range(self.n_islands):
            members = [n for n in parent_pool(graph) if isl in self.island_of(n)]
            if not members:
                continue
            best = max(members, key=lambda n: (quality(n), n.id))
            target = (isl + 1) % self.n_islands
            if target not in best.migrated_to and target != best.island:
                best.migrated_to.append(target)

    def assign_island(self, index: int) -> int:
        return index % self.n_islands


POLICIES = {"best_first": BestFirst, "islands": Islands}


def make_policy(name: str, **kwargs):
    if name not in POLICIES:
        raise ValueError(f"unknown policy {name!r} (one of {', '.join(POLICIES)})")
    return POLICIES[name](**kwargs)
