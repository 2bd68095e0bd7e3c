"""Migration 0009: a database whose campaigns keep the graph in `engine_state` keeps working:
the rows take what only the state had, a node the rows lacked gets its row, the state keeps
only the scalars; and back."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("campaigns", "0007_campaign_revision")]
AFTER = [("campaigns", "0009_graph_from_engine_state_to_rows")]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.fixture(autouse=True)
def _latest_schema_after():
    """Leave the database at every app's latest migration (later migrations than this test's
    AFTER exist), so the tests after this one see the schema the code expects."""
    yield
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())


def _node(key, **kw):
    return {
        "id": key, "source": f"# {key}", "generator": "template", "edge": "seed",
        "parent_ids": [], "params": {"BLOCK": 64}, "note": "", "round": 1, "island": 0,
        "migrated_to": [], "knowledge_ids": [], "status": "pending", "failed_gate": None,
        "reason": "", "gates": [], "fitness": None, "device_s": 0.0, "wall_s": 0.0,
        "report": None, "feedback": "", "source_hash": "", **kw,
    }  # fmt: skip


def test_the_graph_moves_from_the_state_to_the_rows_and_back():
    old = _migrate(BEFORE)
    Problem, Campaign = (
        old.get_model("campaigns", "Problem"),
        old.get_model("campaigns", "Campaign"),
    )
    Node, Edge = old.get_model("campaigns", "Node"), old.get_model("campaigns", "Edge")
    problem = Problem.objects.create(name="p", title="p", source="class Model: pass")
    fitness = {"speedup": 1.5, "ci95": [1.4, 1.6], "per_case": {"a": 1.5}}
    report = {"gates": [{"name": "compile", "status": "failed", "evidence": "ptxas died"}]}
    graph = {
        "nodes": [
            _node("n1", status="accepted", fitness=fitness, island=1, migrated_to=[2]),
            _node("n2", status="rejected", failed_gate="compile", report=report),
            _node("n3", edge="repair", parent_ids=["n2"], note="repair of n2"),
        ],
        "edges": [{"src": "n2", "dst": "n3", "type": "repair"}],
    }
    state = {"config": {"platform": "interpret"}, "round": 1, "next_id": 4, "graph": graph}
    campaign = Campaign.objects.create(name="c", problem=problem, engine_state=state)
    for key, status in (("n1", "accepted"), ("n2", "rejected")):  # n3's step died before rows
        row = Node.objects.create(campaign=campaign, key=key, generator="template",
                                  source=f"# {key}", status=status)  # fmt: skip
        Edge.objects.create(campaign=campaign, parent=None, child=row, kind="seed")

    new = _migrate(AFTER)
    Campaign, Node = new.get_model("campaigns", "Campaign"), new.get_model("campaigns", "Node")
    campaign = Campaign.objects.get(pk=campaign.pk)
    assert "graph" not in campaign.engine_state and campaign.engine_state["next_id"] == 4
    rows = {n.key: n for n in Node.objects.filter(campaign=campaign)}
    assert set(rows) == {"n1", "n2", "n3"}
    assert rows["n1"].fitness_detail == fitness and rows["n1"].migrated_to == [2]
    assert rows["n1"].island == 1
    assert rows["n2"].feedback == "ptxas died", "old states kept the evidence in the report"
    assert rows["n3"].note == "repair of n2" and rows["n3"].status == "pending"
    assert [(e.parent.key, e.kind) for e in rows["n3"].in_edges.all()] == [("n2", "repair")]
    assert all(len(row.source_hash) == 64 for row in rows.values())

    back = _migrate(BEFORE)
    state = back.get_model("campaigns", "Campaign").objects.get(pk=campaign.pk).engine_state
    nodes = {n["id"]: n for n in state["graph"]["nodes"]}
    assert nodes["n1"]["fitness"] == fitness and nodes["n1"]["status"] == "accepted"
    assert nodes["n3"]["parent_ids"] == ["n2"] and nodes["n3"]["edge"] == "repair"
    assert state["graph"]["edges"] == [{"src": "n2", "dst": "n3", "type": "repair"}]
