"""The stop rule: when a campaign is over, and with which outcome (:class:`StopMixin`, one part of
:class:`~workers.search.engine.SearchEngine`, whose docstring describes the outcomes).

The mixin uses the engine's ``_store`` and ``graph``.
"""

from __future__ import annotations

import time

from workers.search.graph import STATUS_PENDING, STATUS_REJECTED, Graph
from workers.search.state import (
    OUTCOME_BUDGET_EXHAUSTED,
    OUTCOME_FAILED,
    OUTCOME_IMPROVED,
    OUTCOME_NO_SAFE_IMPROVEMENT,
)


class StopMixin:
    """Decides when to stop (:meth:`should_stop`) and the outcome (:meth:`finish`)."""

    def _close_round(self, state: dict, graph: Graph) -> None:
        if state["round"] == 0:
            return
        if state["improved_in_round"]:
            state["rounds_without_improvement"] = 0
        else:
            state["rounds_without_improvement"] += 1
        state["improved_in_round"] = False

    def _stop_reason(self, state: dict) -> str | None:
        cfg = state["config"]
        store = self._store(state)
        totals = store.totals()
        if totals.pending:
            return None
        budget = cfg["budget"]
        fit = state["generator_fit"]
        if fit and not any(f.get("fits", True) for f in fit.values()) and not totals.nodes:
            return "no_generator_fits"
        target = cfg["target_speedup"]
        if target and state["best_id"]:
            best = store.node(state["best_id"])
            if best is not None and (best.ci_low or 0.0) >= target:
                return "target_met"
        if totals.nodes >= budget["max_candidates"]:
            return "budget_candidates"
        device = totals.device_s + state["baseline_device_s"]
        if budget["max_device_s"] is not None and device >= budget["max_device_s"]:
            return "budget_device_s"
        if (
            budget["max_wall_s"] is not None
            and time.time() - state["started_at"] >= budget["max_wall_s"]
        ):
            return "budget_wall_s"
        if state["rounds_without_improvement"] >= cfg["saturation_rounds"]:
            return "saturated"
        return None

    def should_stop(self, state: dict, *, no_proposals: bool = False) -> bool:
        """True when the campaign is over; then ``state['outcome']`` and ``message`` are set."""
        if state["outcome"] is not None:
            return True
        reason = self._stop_reason(state)
        if reason is None and no_proposals and not self._store(state).totals().pending:
            reason = "no_proposals"
        if reason is None:
            return False
        self.finish(state, reason)
        return True

    def finish(self, state: dict, reason: str) -> None:
        """End the campaign with ``reason`` and decide its outcome (see the module docstring)."""
        graph = self.graph(state, full=False)
        # Count the last round's result for saturation bookkeeping.
        self._close_round(state, graph)
        state["stop_reason"] = reason
        evaluated = [n for n in graph.nodes.values() if n.status != STATUS_PENDING]
        accepted = graph.accepted()
        best = graph.nodes.get(state["best_id"]) if state["best_id"] else None
        on_device = any(n.fitness for n in accepted)
        errored = [n for n in evaluated if n.status == STATUS_REJECTED and not n.failed_gate]
        viable = accepted + [n for n in evaluated if n.failed_gate in ("performance", "fitness")]
        fits = state["generator_fit"]
        if best is not None and best.fitness and (best.ci_low or 0.0) > 1.0:
            outcome = OUTCOME_IMPROVED
            message = (
                f"{best.id} is {best.speedup:.3f}x the {state['config']['baseline']} baseline "
                f"(95% CI {best.fitness.get('ci95')})"
            )
        elif reason == "no_generator_fits" or not evaluated:
            outcome = OUTCOME_FAILED
            why = "; ".join(f"{k}: {v.get('summary', '')}" for k, v in fits.items())
            message = f"nothing was evaluated ({reason}). {why}".strip()
        elif evaluated and len(errored) == len(evaluated):
            outcome = OUTCOME_FAILED
            message = f"every evaluation errored outside the gates; last: {errored[-1].reason}"
        elif accepted and not on_device:
            outcome = OUTCOME_NO_SAFE_IMPROVEMENT
            message = (
                f"{len(accepted)} of {len(evaluated)} candidates passed every gate on "
                f"{state['config']['platform']}, which has no performance gate: correctness only, "
                "nothing can be shown faster"
            )
        elif reason.startswith("budget"):
            outcome = OUTCOME_BUDGET_EXHAUSTED
            message = f"budget spent ({reason}) with no accepted improvement"
        elif not viable:
            outcome = OUTCOME_FAILED
            message = f"stopped ({reason}): no candidate passed the correctness gate"
        else:
            outcome = OUTCOME_NO_SAFE_IMPROVEMENT
            message = (
                f"stopped ({reason}): {len(viable)} correct candidate(s), none beat the "
                f"{state['config']['baseline']} baseline beyond noise"
            )
        state["outcome"] = outcome
        state["message"] = message
