"""The search engine: rounds of propose -> evaluate -> record, until a stated stop.

A campaign is two things: its state, one small JSON-serialisable dict of scalars and
bookkeeping (:func:`campaign_new`: config, round, next id, best, saturation counters, baseline,
outcome), and its search graph, kept by a :class:`~workers.search.graph_store.GraphStore`. By
default the graph lives in the state itself (``state["graph"]``, a
:class:`~workers.search.graph_store.StateGraphStore`: the CLI's JSON); a host with its own
storage passes its store (the portal keeps the graph in its Node/Edge rows, once), and the state
it saves after each evaluation then stays a few kB at any graph size. The engine itself holds
only its collaborators (generators, policy, knowledge retrieval, the store) and can be rebuilt
from the state at any step (:meth:`SearchEngine.from_state`). Two ways to drive it:

Step by step (an external orchestrator such as a Celery control task). :meth:`SearchEngine.step`
is the one rule for what comes next (measure the baseline, wait for evaluations, stop with an
outcome, or propose a round); every driver asks it and does what it says::

    state = campaign_new(problem_source=..., workload=..., platform="cuda")
    engine = SearchEngine.from_state(state, retrieve=my_retrieval)  # store=... to keep the graph
    while (step := engine.step(state)).action != STEP_FINISHED:
        if step.action == STEP_BASELINE:                        # cuda: time the reference once
            # and tune on the same GPU host; a start kept there is reused (start_cache)
            base, tuned = kept_or_measured(starts, ev, baseline_request(state), tune_request(state))
            engine.record_baseline(state, base, tuned=tuned)
        for node_id in step.node_ids:                           # STEP_EVALUATE: new nodes
            req = engine.request_kwargs(state, node_id)         # -> EvaluationRequest(**req)
            ...evaluate elsewhere (STEP_WAIT until every report is recorded)...
            engine.record(state, node_id, report.to_dict())
    summary = campaign_summary(state)                           # outcome, funnel, best, ...

or in one process with an ``Evaluator``: :func:`run_campaign`.

Outcomes (``state["outcome"]``, set when ``should_stop`` first returns True, never left empty):

- ``improved``: an accepted node beats the baseline beyond noise (its fitness CI's lower bound
  is above 1.0). Only a platform with a performance gate (``cuda``) can show this.
- ``no_safe_improvement``: the search saturated (no improvement beyond the best's CI for
  ``saturation_rounds`` rounds), ran out of proposals, or ran on ``interpret``, where accepted
  means "correct" and nothing can be shown faster (``stop_reason`` and ``message`` say which).
- ``budget_exhausted``: candidates, device-seconds or wall time ran out before either of the
  above, with no accepted improvement.
- ``failed``: the campaign could not search: no generator fits the problem, nothing could be
  evaluated, or no candidate passed the correctness gate (the message says why).

Saturation counts rounds in which the best accepted node did not improve beyond its CI (a new
best needs its CI's lower bound above the old best's speedup); rounds before anything is
accepted count too, so a campaign whose correct candidates are all slower ends as
``no_safe_improvement`` rather than running to its budget.

The engine's parts live beside it: proposing a round in :mod:`workers.search.propose`, recording
reports in :mod:`workers.search.recording`, the stop rule and outcomes in
:mod:`workers.search.stopping`, the state in :mod:`workers.search.state`, requests in
:mod:`workers.search.evaluation_requests`, the funnel and summary in
:mod:`workers.search.reporting`. Their public names are re-exported here.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from workers.search.evaluation_requests import (
    baseline_request,
    baseline_times,
    engine_request_defaults,
    evaluation_request,
)
from workers.search.graph import Graph
from workers.search.graph_store import GraphStore, StateGraphStore
from workers.search.policies import make_policy
from workers.search.propose import ProposeMixin
from workers.search.recording import RecordMixin
from workers.search.reporting import FUNNEL_STAGES, GATE_TO_STAGE, campaign_summary, funnel
from workers.search.state import (
    OUTCOME_BUDGET_EXHAUSTED,
    OUTCOME_FAILED,
    OUTCOME_IMPROVED,
    OUTCOME_NO_SAFE_IMPROVEMENT,
    OUTCOMES,
    campaign_new,
    seed_add,
)
from workers.search.stopping import StopMixin
from workers.search.tuning import tune_request

Retrieve = Callable[[dict], list[dict]]

STEP_BASELINE = "baseline"  # measure the reference first (baseline_request), record_baseline
STEP_WAIT = "wait"  # evaluations are out: record their reports, then ask again
STEP_EVALUATE = "evaluate"  # a new round: evaluate these nodes and record their reports
STEP_FINISHED = "finished"  # over: state["outcome"], "stop_reason" and "message" say how
STEP_ACTIONS = (STEP_BASELINE, STEP_WAIT, STEP_EVALUATE, STEP_FINISHED)


@dataclass(frozen=True)
class Step:
    """What a campaign does next (:meth:`SearchEngine.step`)."""

    action: str  # one of STEP_ACTIONS
    round: int
    node_ids: tuple[str, ...] = ()  # evaluate: the round's new nodes, in creation order
    pending: int = 0  # wait: evaluations not recorded yet
    outcome: str | None = None  # finished: one of OUTCOMES
    no_proposals: bool = False  # finished because no generator had anything new to offer


def make_generator(name: str):
    if name == "template":
        from workers.search.generators.template import TemplateGenerator

        return TemplateGenerator()
    if name == "llm":
        from workers.search.generators.llm import LLMGenerator

        return LLMGenerator.from_env()
    if name == "cute":
        from workers.search.generators.cute import CuteGenerator

        return CuteGenerator()
    raise ValueError(f"unknown generator {name!r} (template, llm, cute)")


class SearchEngine(ProposeMixin, RecordMixin, StopMixin):
    """Proposes nodes, records their reports, and decides when to stop (state is external)."""

    def __init__(
        self,
        generators: dict,
        policy,
        retrieve: Retrieve | None = None,
        keep_reports: bool = True,
        store: GraphStore | None = None,
    ) -> None:
        self.generators = generators
        self.policy = policy
        self.retrieve = retrieve
        # None: the graph lives in each state passed in (StateGraphStore(state)).
        self.store = store
        # A standalone campaign keeps each node's full report in its state (its JSON output
        # carries them). A host that stores reports elsewhere (the portal keeps them on its node
        # rows) passes False: its store then gets nodes without their reports.
        self.keep_reports = keep_reports

    @classmethod
    def from_state(
        cls,
        state: dict,
        *,
        retrieve: Retrieve | None = None,
        generators=None,
        keep_reports: bool = True,
        store: GraphStore | None = None,
    ):
        cfg = state["config"]
        names = cfg["generators"]
        gens = (
            generators if generators is not None else {name: make_generator(name) for name in names}
        )
        policy = make_policy(cfg["policy"], **cfg["policy_args"])
        engine = cls(gens, policy, retrieve, keep_reports=keep_reports, store=store)
        if "baseline_times" in state and state.get("baseline") is not None:
            # Saved before the baseline was kept once: keep it the way it is kept now.
            engine.record_baseline(state, state["baseline"])
        return engine

    # ------------------------------------------------------------------ helpers on the state
    def _store(self, state: dict) -> GraphStore:
        return self.store if self.store is not None else StateGraphStore(state)

    def graph(self, state: dict, *, full: bool = True) -> Graph:
        """The whole graph (from the store); ``full=False`` when only its shape is needed."""
        return self._store(state).graph(full=full)

    # ---------------------------------------------------------------------------------- step
    def step(self, state: dict) -> Step:
        """The search's one rule for what comes next, whoever drives it (:func:`run_campaign`
        here, the portal's control task there).

        A campaign that is over stays over. A platform with a performance gate measures its
        baseline before anything else. While evaluations are out it waits: a round is proposed
        only when the last one is fully recorded, so each proposal sees every result. Then it
        stops when a stop condition holds (deciding the outcome), or proposes the next round;
        a round with nothing new in it ends the campaign too (``no_proposals``)."""
        if state["outcome"] is not None:
            return Step(STEP_FINISHED, state["round"], outcome=state["outcome"])
        if state["config"]["platform"] != "interpret" and state.get("baseline") is None:
            return Step(STEP_BASELINE, state["round"])
        pending = self._store(state).totals().pending
        if pending:
            return Step(STEP_WAIT, state["round"], pending=pending)
        if self.should_stop(state):
            return Step(STEP_FINISHED, state["round"], outcome=state["outcome"])
        specs = self.propose(state)
        if specs:
            ids = tuple(spec["node_id"] for spec in specs)
            return Step(STEP_EVALUATE, state["round"], node_ids=ids)
        self.should_stop(state, no_proposals=True)
        return Step(STEP_FINISHED, state["round"], outcome=state["outcome"], no_proposals=True)


# ------------------------------------------------------------------------ one-process driver


def run_campaign(
    state: dict,
    *,
    evaluator=None,
    retrieve: Retrieve | None = None,
    generators: dict | None = None,
    progress: Callable[[dict, dict], None] | None = None,
    jobs: int = 1,
    starts=None,
) -> dict:
    """Run (or resume) a whole campaign in this process with an ``Evaluator``; return state.

    ``starts`` (a :class:`~workers.search.start_cache.StartCache`): a cuda campaign reuses the
    baseline and the tuner's answer kept there for the same problem, workload and host, and
    keeps its own when it measures them (:func:`_start`).

    ``progress(state, event)`` is called after each recorded node and at the end. ``jobs`` > 1
    evaluates a round's candidates that many at a time, each in its own evaluator (its own
    sandbox child): compiling and the interpreter's runs overlap; on a GPU the device lock
    still takes the correctness and timing runs in turn. Reports are recorded in the round's
    order, whatever order they finish in, so a campaign's graph does not depend on ``jobs``.
    """
    from concurrent.futures import ThreadPoolExecutor

    from workers import evaluate as ev_mod

    engine = SearchEngine.from_state(state, retrieve=retrieve, generators=generators)
    own = evaluator is None
    ev = ev_mod.Evaluator() if own else evaluator
    extra = [ev_mod.Evaluator() for _ in range(max(0, int(jobs) - 1))]
    # One pool for the whole campaign: a sandbox child dies with the thread that started it
    # (bwrap's --die-with-parent is a per-thread parent-death signal), so a pool per round
    # restarted every child each round (a new process and the peers' compile: 12-15 s each).
    pool = ThreadPoolExecutor(max_workers=len(extra) + 1) if extra else None
    if own:
        ev.__enter__()
    for other in extra:
        other.__enter__()
    try:
        while (step := engine.step(state)).action != STEP_FINISHED:
            if step.action == STEP_BASELINE:
                _start(engine, ev, state, starts)
                continue
            node_ids = step.node_ids
            if step.action == STEP_WAIT:
                # A resumed campaign re-evaluates nodes left pending (evaluation is idempotent).
                node_ids = tuple(n.id for n in engine.graph(state, full=False).pending())
            if extra and len(node_ids) > 1:
                _evaluate_round(engine, [ev, *extra], pool, ev_mod, state, node_ids, progress)
                continue
            for node_id in node_ids:
                _evaluate_one(engine, ev, ev_mod, state, node_id, progress)
    finally:
        if own:
            ev.__exit__(None, None, None)
        for other in extra:
            other.__exit__(None, None, None)
        if pool is not None:
            pool.shutdown()
    if progress:
        progress(state, {"event": "finished", "outcome": state["outcome"]})
    return state


def _start(engine, ev, state, starts) -> None:
    """The campaign's fixed start: the baseline, and the tuner's answer from the same GPU host
    (kept ones reused where ``starts`` has them: ``start_cache.kept_or_measured``)."""
    from workers.search.start_cache import kept_or_measured

    baseline, tuned = kept_or_measured(starts, ev, baseline_request(state), tune_request(state))
    engine.record_baseline(state, baseline, tuned=tuned)


def _evaluate_one(engine, ev, ev_mod, state, node_id, progress) -> None:
    report_d = _report(ev, ev_mod, engine.request_kwargs(state, node_id))
    engine.record(state, node_id, report_d)
    if progress:
        progress(state, {"event": "recorded", "node_id": node_id, "report": report_d})


def _evaluate_round(engine, evaluators, pool, ev_mod, state, node_ids, progress) -> None:
    """A round's nodes on several evaluators at once (threads of the campaign's ``pool``: the
    work is in their sandbox children); recorded here, in the round's order."""
    import queue

    free: queue.Queue = queue.Queue()
    for ev in evaluators:
        free.put(ev)

    def run(kwargs):
        ev = free.get()
        try:
            return _report(ev, ev_mod, kwargs)
        finally:
            free.put(ev)

    requests = [(node_id, engine.request_kwargs(state, node_id)) for node_id in node_ids]
    futures = [(node_id, pool.submit(run, kwargs)) for node_id, kwargs in requests]
    for node_id, future in futures:
        report_d = future.result()
        engine.record(state, node_id, report_d)
        if progress:
            progress(state, {"event": "recorded", "node_id": node_id, "report": report_d})


def _report(ev, ev_mod, kwargs: dict) -> dict:
    t0 = time.time()
    try:
        report = ev.evaluate(ev_mod.EvaluationRequest(**kwargs))
        return report.to_dict() if hasattr(report, "to_dict") else dict(report)
    except Exception as exc:  # noqa: BLE001 - an evaluator crash is a failed node, not a crash
        return {
            "verdict": "rejected",
            "failed_gate": None,
            "reason": f"evaluator error: {type(exc).__name__}: {exc}",
            "gates": [],
            "wall_s": time.time() - t0,
            "device_s": 0.0,
        }


__all__ = [
    "FUNNEL_STAGES",
    "GATE_TO_STAGE",
    "OUTCOMES",
    "OUTCOME_BUDGET_EXHAUSTED",
    "OUTCOME_FAILED",
    "OUTCOME_IMPROVED",
    "OUTCOME_NO_SAFE_IMPROVEMENT",
    "STEP_ACTIONS",
    "STEP_BASELINE",
    "STEP_EVALUATE",
    "STEP_FINISHED",
    "STEP_WAIT",
    "SearchEngine",
    "Step",
    "baseline_request",
    "baseline_times",
    "campaign_new",
    "campaign_summary",
    "engine_request_defaults",
    "evaluation_request",
    "funnel",
    "make_generator",
    "run_campaign",
    "seed_add",
]
