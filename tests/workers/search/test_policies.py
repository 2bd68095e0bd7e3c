"""Selection policies: a worse node can be a parent; islands keep sub-populations and migrate."""

from __future__ import annotations

from workers.search.graph import Graph, Node
from workers.search.policies import BestFirst, Islands, make_policy


def _node(i, speedup, params=None, parents=(), island=0, status="accepted"):
    fit = {"speedup": speedup, "ci95": [speedup * 0.99, speedup * 1.01]} if speedup else None
    return Node(
        id=f"n{i}",
        source=f"src{i}",
        generator="template",
        edge="mutation" if parents else "seed",
        parent_ids=list(parents),
        params=params or {"a": i},
        status=status,
        fitness=fit,
        island=island,
    )


def test_best_first_prefers_the_best_unexpanded_node():
    g = Graph()
    g.add(_node(1, 1.5))
    g.add(_node(2, 1.2))
    assert [n.id for n in BestFirst().select(g, 1)] == ["n1"]


def test_worse_node_is_chosen_once_the_best_is_crowded():
    g = Graph()
    g.add(_node(1, 1.10))
    g.add(_node(2, 1.05))
    for i in range(3, 12):  # the best already has nine (rejected) children
        g.add(_node(i, None, parents=["n1"], status="rejected"))
    assert BestFirst().select(g, 1)[0].id == "n2"


def test_diversity_bonus_picks_a_different_second_parent():
    g = Graph()
    g.add(_node(1, 1.30, {"a": 1, "b": 1}))
    g.add(_node(2, 1.29, {"a": 1, "b": 1, "c": 0}))
    g.add(_node(3, 1.27, {"a": 9, "b": 9, "c": 9}))
    ids = [n.id for n in BestFirst(exploration=0.0, diversity=0.2).select(g, 2)]
    assert ids == ["n1", "n3"]


def test_incorrect_nodes_are_never_parents_but_correct_slower_ones_are():
    g = Graph()
    broken = _node(1, None, status="rejected")
    broken.failed_gate = "correctness"
    g.add(broken)
    assert BestFirst().select(g, 3) == []
    slower = _node(2, 0.8, status="rejected")
    slower.failed_gate = "fitness"
    g.add(slower)
    assert [n.id for n in BestFirst().select(g, 3)] == ["n2"]


def test_islands_select_per_island_and_migrate_the_best():
    g = Graph()
    g.add(_node(1, 1.5, island=0))
    g.add(_node(2, 1.1, island=0))
    g.add(_node(3, 1.2, island=1))
    pol = Islands(n_islands=2, migration_interval=2)
    picked = pol.select(g, 2, {"round": 1})
    assert {n.id for n in picked} == {"n1", "n3"}
    pol.select(g, 2, {"round": 2})  # migration round: island 0's best joins island 1
    assert 1 in g.nodes["n1"].migrated_to
    assert make_policy("islands").name == "islands"
