"""Recording results: a node's evaluation report, the campaign's baseline, the best node so far
(:class:`RecordMixin`, one part of :class:`~workers.search.engine.SearchEngine`).

The mixin uses what the engine holds (``keep_reports``) and its ``_store``.
"""

from __future__ import annotations

import time

from workers.search.evaluation_requests import _without_samples, evaluation_request
from workers.search.graph import STATUS_ACCEPTED, STATUS_PENDING, STATUS_REJECTED, Graph, Node
from workers.search.graph_store import GraphStore
from workers.search.tuning import checked


class RecordMixin:
    """Stores reports on nodes and keeps the best node (:meth:`record`, :meth:`record_baseline`)."""

    def request_kwargs(self, state: dict, node_id: str, graph: Graph | None = None) -> dict:
        """Keyword arguments for ``workers.evaluate.EvaluationRequest`` for this node.

        Pass the ``graph`` (with sources) when asking for many nodes at once.
        """
        node = graph.nodes[node_id] if graph is not None else self._store(state).node(node_id)
        if node is None:
            raise KeyError(f"no node {node_id} in this campaign")
        return evaluation_request(state, node.source)

    def record_baseline(self, state: dict, baseline: dict, tuned: dict | None = None) -> None:
        """Keep the reference's measurement (``BaselineReport.to_dict()``), once.

        Candidates' requests carry its per-case timings (:func:`evaluation_request` derives
        them), its fingerprint says where it was measured, its device time is charged to the
        campaign. A host that keeps reports elsewhere (``keep_reports=False``, the portal) keeps
        it without each timing's raw samples (``samples_ms``: 200 numbers per case and
        baseline, most of a cuda state's size; medians, quantiles and intervals stay). Nothing
        reads them: the performance gate times the baselines again beside each candidate, and
        a candidate's evidence keeps those paired samples."""
        state["baseline"] = baseline if self.keep_reports else _without_samples(baseline)
        state.pop("baseline_times", None)  # a state from before: the same timings again
        state["baseline_device_s"] = float(baseline.get("device_s") or 0.0)
        if tuned is not None:
            # The per-case tuner's answer from the same GPU host (workers.search.tuning),
            # checked again here: it crossed a queue from a process that loaded the problem.
            # Its wall time is GPU time the campaign spent, charged with the baseline's.
            kept = not tuned.get("skipped") or tuned.get("cute") is not None
            state["tuned"] = checked(tuned) if kept else None
            if state["tuned"] is not None:
                cute = state["tuned"].get("cute") or {}
                state["baseline_device_s"] += state["tuned"].get("wall_s") or 0.0
                state["baseline_device_s"] += cute.get("wall_s") or 0.0
        # A start kept from an earlier campaign on the same GPU host (workers.search.
        # start_cache): shown with what it cost then, charged nothing now.
        state["start_reused"] = baseline.get("reused")
        if state["start_reused"]:
            state["baseline_device_s"] = 0.0

    def record(self, state: dict, node_id: str, report: dict) -> bool:
        """Store one evaluation report (``EvaluationReport.to_dict()``) on its node.

        Idempotent: a second report for a node already recorded is ignored (returns False),
        so a redelivered evaluation task cannot double-count.
        """
        store = self._store(state)
        node = store.node(node_id)
        if node is None:
            raise KeyError(f"no node {node_id} in this campaign")
        if node.status != STATUS_PENDING:
            return False
        verdict = report.get("verdict")
        node.status = STATUS_ACCEPTED if verdict == "accepted" else STATUS_REJECTED
        node.failed_gate = report.get("failed_gate")
        node.reason = report.get("reason") or ""
        node.gates = [
            {k: g.get(k) for k in ("name", "status", "reason", "wall_s", "device_s")}
            for g in report.get("gates") or []
        ]
        node.fitness = report.get("fitness")
        node.device_s = float(report.get("device_s") or 0.0)
        node.wall_s = float(report.get("wall_s") or 0.0)
        node.feedback = _failed_gate_evidence(report) if node.status == STATUS_REJECTED else ""
        node.report = report if self.keep_reports else None
        state["fingerprint"] = state["fingerprint"] or report.get("fingerprint")
        state["harness_hash"] = state["harness_hash"] or report.get("harness_hash")
        store.save(node)
        if node.status == STATUS_ACCEPTED:
            if state["first_accepted"] is None:
                totals = store.totals()
                state["first_accepted"] = {
                    "node_id": node.id,
                    "wall_s": time.time() - state["started_at"],
                    "device_s": totals.device_s + state["baseline_device_s"],
                    "candidates": totals.evaluated,
                }
            self._update_best(state, store, node)
        return True

    def _update_best(self, state: dict, store: GraphStore, node: Node) -> None:
        best = store.node(state["best_id"]) if state["best_id"] else None
        if best is None:
            improved = True
        elif node.fitness is None or best.fitness is None:
            improved = False  # no performance gate: the first correct node stays the reference
        else:
            improved = (node.ci_low or 0.0) > (best.speedup or 0.0)
        if improved:
            state["best_id"] = node.id
            state["improved_in_round"] = True
            state["best_history"].append(
                {
                    "round": state["round"],
                    "node_id": node.id,
                    "speedup": node.speedup,
                    "ci95": (node.fitness or {}).get("ci95"),
                    "wall_s": time.time() - state["started_at"],
                }
            )


def _failed_gate_evidence(report: dict | None) -> str:
    """The failing gate's evidence, tail-capped: what a repair prompt shows of a failure."""
    for gate in (report or {}).get("gates") or []:
        if gate.get("status") == "failed":
            ev = gate.get("evidence")
            text = ev if isinstance(ev, str) else repr(ev)
            return text[-4000:]
    return ""
