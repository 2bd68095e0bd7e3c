"""The engine over a graph store of the host's: the state it saves holds no graph and stays
small, and the campaign runs as it does with the graph in the state."""

from __future__ import annotations

import json

from workers.evaluate import EvaluationRequest
from workers.search.engine import SearchEngine, campaign_new, campaign_summary
from workers.search.graph_store import GraphStore, StateGraphStore


def by_tile(params):
    return {512: 1.0, 1024: 1.05, 2048: 1.2, 4096: 1.3, 8192: 1.5, 16384: 1.45}.get(params["tile"])


def test_a_host_store_keeps_the_graph_and_the_state_keeps_only_scalars(
    softmax_source, fake_evaluator
):
    elsewhere: dict = {}  # the host's storage (the portal: Node/Edge rows)
    store = StateGraphStore(elsewhere)
    assert isinstance(store, GraphStore)
    ev = fake_evaluator(by_tile)
    state = campaign_new(
        problem_source=softmax_source, platform="cuda", max_candidates=10, saturation_rounds=50
    )
    while True:
        state = json.loads(json.dumps(state))  # saved and read back between steps
        engine = SearchEngine.from_state(state, store=store, keep_reports=False)
        if engine.should_stop(state) or not engine.propose(state):
            break
        for node in engine.graph(state).pending():
            request = EvaluationRequest(**engine.request_kwargs(state, node.id))
            assert engine.record(state, node.id, ev.evaluate(request).to_dict()) is True
            assert engine.record(state, node.id, {"verdict": "accepted"}) is False
    assert "graph" not in state and len(json.dumps(state)) < 10_000
    assert state["outcome"] == "improved"
    summary = campaign_summary(state, store=store)
    assert len(summary["nodes"]) == 10 == ev.calls == store.totals().evaluated
    assert summary["best"]["id"] == state["best_id"]
    assert summary["funnel"]["accepted"] == len(store.graph().accepted()) > 0
