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
            engine.record_baseline(state, baseline(baseline_request(state)).to_dict())
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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from workers.search.generators.base import (
    EDGE_ALTERNATIVE,
    EDGE_CROSSOVER,
    EDGE_MUTATION,
    EDGE_REPAIR,
    EDGE_SEED,
    GenerationContext,
)
from workers.search.graph import (
    STATUS_ACCEPTED,
    STATUS_PENDING,
    STATUS_REJECTED,
    Graph,
    Node,
    source_hash,
)
from workers.search.graph_store import GraphStore, StateGraphStore
from workers.search.policies import make_policy, parent_pool, per_case_winners, quality

OUTCOME_IMPROVED = "improved"
OUTCOME_NO_SAFE_IMPROVEMENT = "no_safe_improvement"
OUTCOME_BUDGET_EXHAUSTED = "budget_exhausted"
OUTCOME_FAILED = "failed"
OUTCOMES = (
    OUTCOME_IMPROVED,
    OUTCOME_NO_SAFE_IMPROVEMENT,
    OUTCOME_BUDGET_EXHAUSTED,
    OUTCOME_FAILED,
)

REPAIRABLE_GATES = ("compile", "correctness")
FUNNEL_STAGES = (
    "generated",
    "pending",
    "static_rejected",
    "compile_failed",
    "incorrect",
    "slower",
    "errored",
    "accepted",
)
GATE_TO_STAGE = {
    "static": "static_rejected",
    "compile": "compile_failed",
    "correctness": "incorrect",
    "performance": "slower",
    "fitness": "slower",
}

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


def campaign_new(
    *,
    problem_source: str,
    workload: dict | None = None,
    platform: str = "interpret",
    generators: list[str] | tuple[str, ...] = ("template",),
    policy: str = "best_first",
    policy_args: dict | None = None,
    max_candidates: int = 40,
    max_device_s: float | None = None,
    max_wall_s: float | None = None,
    branches: int = 3,
    children_per_branch: int = 2,
    seeds: int = 4,
    repairs_per_round: int = 1,
    saturation_rounds: int = 3,
    target_speedup: float | None = None,
    baseline: str = "eager",
    incumbent_source: str | None = None,
    trials: int = 3,
    seed: int = 0,
    regression_tolerance: float = 0.02,
    time_limit_s: float = 120.0,
    problem_name: str = "",
    tune: bool = False,
) -> dict:
    """A fresh campaign state (plain JSON data; the graph is the store's, see the module doc).
    ``tune``: the template generator's first seed on a GPU host is the per-case tuner's table."""
    return {
        "version": 1,
        "config": {
            "problem_name": problem_name,
            "problem_source": problem_source,
            "workload": workload,
            "platform": platform,
            "generators": list(generators),
            "policy": policy,
            "policy_args": dict(policy_args or {}),
            "budget": {
                "max_candidates": max_candidates,
                "max_device_s": max_device_s,
                "max_wall_s": max_wall_s,
            },
            "branches": branches,
            "children_per_branch": children_per_branch,
            "seeds": seeds,
            "repairs_per_round": repairs_per_round,
            "saturation_rounds": saturation_rounds,
            "target_speedup": target_speedup,
            "baseline": baseline,
            "incumbent_source": incumbent_source,
            "trials": trials,
            "seed": seed,
            "regression_tolerance": regression_tolerance,
            "time_limit_s": time_limit_s,
            "tune": tune,
        },
        "round": 0,
        "next_id": 1,
        "best_id": None,
        "best_history": [],
        "rounds_without_improvement": 0,
        "improved_in_round": False,
        "started_at": time.time(),
        "baseline": None,
        "baseline_device_s": 0.0,
        "first_accepted": None,
        "generator_stats": {},
        "generator_fit": {},
        "duplicates": 0,
        "outcome": None,
        "stop_reason": None,
        "message": "",
        "fingerprint": None,
        "harness_hash": None,
    }


def make_generator(name: str, *, tune: bool = False):
    if name == "template":
        from workers.search.generators.template import TemplateGenerator

        return TemplateGenerator(tune=tune)
    if name == "llm":
        from workers.search.generators.llm import LLMGenerator

        return LLMGenerator.from_env()
    raise ValueError(f"unknown generator {name!r} (template, llm)")


class SearchEngine:
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
            generators
            if generators is not None
            else {name: make_generator(name, tune=cfg.get("tune", False)) for name in names}
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

    def _ctx(self, state: dict, mode: str, parents: list[Node], feedback=None) -> GenerationContext:
        cfg = state["config"]
        knowledge = []
        if self.retrieve is not None:
            query = {
                "problem_source": cfg["problem_source"],
                "problem_name": cfg["problem_name"],
                "platform": cfg["platform"],
                "family": (state["generator_fit"].get("template") or {}).get("family"),
                "mode": mode,
                "feedback": feedback,
            }
            try:
                knowledge = list(self.retrieve(query) or [])
            except Exception as exc:  # noqa: BLE001 - retrieval must never stop a campaign
                state["generator_stats"].setdefault("retrieval", {}).setdefault("errors", [])
                state["generator_stats"]["retrieval"]["errors"].append(repr(exc)[:200])
        return GenerationContext(
            problem_source=cfg["problem_source"],
            workload=cfg["workload"],
            platform=cfg["platform"],
            parents=[self._whole(state, p).to_dict(with_report=False) for p in parents],
            mode=mode,
            feedback=feedback,
            knowledge=knowledge,
            seed=cfg["seed"] * 1000 + state["round"],
            attempt=state["round"] if mode == EDGE_SEED else 1,
        )

    def _whole(self, state: dict, node: Node) -> Node:
        # A graph read for choosing parents may come without sources and feedback (the heavy
        # texts); a generator needs them for the few nodes it is shown.
        return node if node.source else (self._store(state).node(node.id) or node)

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

    # ------------------------------------------------------------------------------- propose
    def propose(self, state: dict) -> list[dict]:
        """Create the next round's nodes (status ``pending``) and return their specs.

        Returns [] when a stop condition holds or no generator has anything to offer; call
        :meth:`should_stop` next, which then ends the campaign with its reason. A driver asks
        :meth:`step`, which does both in their order.
        """
        if state["outcome"] is not None or self._stop_reason(state):
            return []
        store = self._store(state)
        graph = store.graph(full=False)
        cfg = state["config"]
        self._close_round(state, graph)
        state["round"] += 1
        for name, gen in self.generators.items():
            if name not in state["generator_fit"] and hasattr(gen, "describe"):
                state["generator_fit"][name] = gen.describe(cfg["problem_source"])
        remaining = cfg["budget"]["max_candidates"] - len(graph.nodes)
        jobs: list[tuple[str, list[Node], dict | None]] = []
        accepted = graph.accepted()
        pool = parent_pool(graph)  # accepted, or correct but slower: both can be parents
        if graph.nodes:  # repairs first: a failure's evidence is the freshest lead
            for node in self._repair_targets(state, graph):
                node = self._whole(state, node)
                fb = {"gate": node.failed_gate, "reason": node.reason, "evidence": _evidence(node)}
                jobs.append((EDGE_REPAIR, [node], fb))
        if not graph.nodes or not accepted:
            jobs.append((EDGE_SEED, [], None))
        winners = per_case_winners(pool)
        contributors = sorted(
            {n.id: n for n in winners.values()}.values(), key=lambda n: (-quality(n), n.id)
        )
        if len(contributors) >= 2:  # no one candidate is fastest everywhere: combine them
            per_case = {case: node.id for case, node in winners.items()}
            jobs.append((EDGE_CROSSOVER, contributors, {"per_case": per_case}))
        if graph.nodes:
            parents = self._select(store, graph, state) if pool else []
            for i, parent in enumerate(parents):
                if i == len(parents) - 1 and len(pool) >= 2 and state["round"] % 2 == 0:
                    other = max(
                        (n for n in pool if n.id != parent.id),
                        key=lambda n: (quality(n), n.id),
                    )
                    jobs.append((EDGE_CROSSOVER, [parent, other], None))
                elif i % 3 == 2 or (state["round"] % 3 == 0 and i == 0):
                    jobs.append((EDGE_ALTERNATIVE, [parent], None))
                else:
                    jobs.append((EDGE_MUTATION, [parent], None))
        specs: list[dict] = []
        names = list(self.generators)
        for j, (mode, parents, fb) in enumerate(jobs):
            if remaining - len(specs) <= 0:
                break
            n = cfg["seeds"] if mode == EDGE_SEED else cfg["children_per_branch"]
            n = min(n, remaining - len(specs))
            # Rotate which generator goes first so each gets turns; fall through when one
            # cannot serve this parent (the template cannot mutate an LLM's free-form kernel).
            order = names[j % len(names) :] + names[: j % len(names)]
            if mode == EDGE_SEED:
                order = names
            for name in order:
                ctx = self._ctx(state, mode, parents, fb)
                kids = [k.get("id") for k in ctx.knowledge]
                proposals = self._call(state, name, ctx, n)
                made = 0
                for prop in proposals:
                    spec = self._add(state, store, graph, name, prop, parents, kids)
                    if spec is not None:
                        specs.append(spec)
                        made += 1
                if made and mode != EDGE_SEED:
                    break
        return specs

    def _select(self, store: GraphStore, graph: Graph, state: dict) -> list[Node]:
        """The policy's parents; what it changed on nodes (islands' migrations) is saved."""
        before = {n.id: list(n.migrated_to) for n in graph.nodes.values()}
        parents = self.policy.select(graph, state["config"]["branches"], state)
        for node in graph.nodes.values():
            if node.migrated_to != before[node.id]:
                whole = self._whole(state, node)
                whole.migrated_to = list(node.migrated_to)
                store.save(whole)
        return parents

    def _call(self, state: dict, name: str, ctx: GenerationContext, n: int):
        gen = self.generators[name]
        try:
            proposals = gen.propose(ctx, n)
        except Exception as exc:  # noqa: BLE001 - a broken generator is counted, not fatal
            stats = state["generator_stats"].setdefault(name, {})
            stats["exceptions"] = stats.get("exceptions", 0) + 1
            stats["last_exception"] = repr(exc)[:300]
            proposals = []
        if hasattr(gen, "stats"):
            state["generator_stats"][name] = {
                **state["generator_stats"].get(name, {}),
                **gen.stats(),
            }
        return proposals

    def _add(
        self, state, store: GraphStore, graph: Graph, gen_name, prop, parents: list[Node], kids
    ) -> dict | None:
        digest = source_hash(prop.source)
        if graph.has_source(digest):
            state["duplicates"] += 1
            return None
        node_id = f"n{state['next_id']}"
        state["next_id"] += 1
        island = parents[0].island if parents else 0
        if not parents and hasattr(self.policy, "assign_island"):
            island = self.policy.assign_island(state["next_id"])
        node = Node(
            id=node_id,
            source=prop.source,
            generator=gen_name,
            edge=prop.edge,
            parent_ids=[p.id for p in parents],
            params=dict(prop.params),
            note=prop.note,
            round=state["round"],
            island=island,
            knowledge_ids=list(kids),
            source_hash=digest,
        )
        graph.add(node)
        store.add(node)
        return {
            "node_id": node_id,
            "source": prop.source,
            "generator": gen_name,
            "edge": prop.edge,
            "parent_ids": node.parent_ids,
            "params": node.params,
            "round": state["round"],
        }

    def _repair_targets(self, state: dict, graph: Graph) -> list[Node]:
        cfg = state["config"]
        targets = []
        for node in reversed(list(graph.nodes.values())):
            if len(targets) >= cfg["repairs_per_round"]:
                break
            if node.status != STATUS_REJECTED or node.failed_gate not in REPAIRABLE_GATES:
                continue
            if graph.children(node.id) or _repair_depth(graph, node) >= 2:
                continue
            targets.append(node)
        return targets

    def _close_round(self, state: dict, graph: Graph) -> None:
        if state["round"] == 0:
            return
        if state["improved_in_round"]:
            state["rounds_without_improvement"] = 0
        else:
            state["rounds_without_improvement"] += 1
        state["improved_in_round"] = False

    # -------------------------------------------------------------------------------- record
    def request_kwargs(self, state: dict, node_id: str, graph: Graph | None = None) -> dict:
        """Keyword arguments for ``workers.evaluate.EvaluationRequest`` for this node.

        Pass the ``graph`` (with sources) when asking for many nodes at once.
        """
        node = graph.nodes[node_id] if graph is not None else self._store(state).node(node_id)
        if node is None:
            raise KeyError(f"no node {node_id} in this campaign")
        return evaluation_request(state, node.source)

    def record_baseline(self, state: dict, baseline: dict) -> None:
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

    # ---------------------------------------------------------------------------- stopping
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


def _repair_depth(graph: Graph, node: Node) -> int:
    depth = 0
    while node.edge == EDGE_REPAIR and node.parent_ids:
        depth += 1
        node = graph.nodes[node.parent_ids[0]]
    return depth


def _failed_gate_evidence(report: dict | None) -> str:
    """The failing gate's evidence, tail-capped: what a repair prompt shows of a failure."""
    for gate in (report or {}).get("gates") or []:
        if gate.get("status") == "failed":
            ev = gate.get("evidence")
            text = ev if isinstance(ev, str) else repr(ev)
            return text[-4000:]
    return ""


def _evidence(node: Node) -> str:
    # States saved before ``feedback`` existed still have the full report on the node.
    return node.feedback or _failed_gate_evidence(node.report) or node.reason


def _total_device_s(graph: Graph) -> float:
    return sum(n.device_s for n in graph.nodes.values())


# ------------------------------------------------------------------------------- reporting


def funnel(state: dict, store: GraphStore | None = None) -> dict:
    """Counts per stage (they add up to ``generated``), device-seconds per gate, cost."""
    graph = (store or StateGraphStore(state)).graph(full=False)
    counts = dict.fromkeys(FUNNEL_STAGES, 0)
    device_by_gate: dict[str, float] = {}
    wall_by_gate: dict[str, float] = {}
    for node in graph.nodes.values():
        counts["generated"] += 1
        if node.status == STATUS_PENDING:
            counts["pending"] += 1
        elif node.status == STATUS_ACCEPTED:
            counts["accepted"] += 1
        else:
            counts[GATE_TO_STAGE.get(node.failed_gate or "", "errored")] += 1
        for gate in node.gates:
            name = gate.get("name") or "?"
            device_by_gate[name] = device_by_gate.get(name, 0.0) + float(gate.get("device_s") or 0)
            wall_by_gate[name] = wall_by_gate.get(name, 0.0) + float(gate.get("wall_s") or 0)
    device_total = _total_device_s(graph) + state.get("baseline_device_s", 0.0)
    return {
        **counts,
        "device_s_by_gate": device_by_gate,
        "wall_s_by_gate": wall_by_gate,
        "baseline_device_s": state.get("baseline_device_s", 0.0),
        "device_s_total": device_total,
        "device_s_per_accepted": device_total / counts["accepted"] if counts["accepted"] else None,
        "duplicates_dropped": state.get("duplicates", 0),
    }


def campaign_summary(
    state: dict, *, with_sources: bool = True, store: GraphStore | None = None
) -> dict:
    """The campaign as one JSON document (what the CLI writes and ``import_campaign`` reads)."""
    store = store or StateGraphStore(state)
    graph = store.graph(full=with_sources)
    best = graph.nodes.get(state["best_id"]) if state["best_id"] else None
    best_dict = None
    if best is not None:
        best_dict = best.to_dict(with_report=False)
        best_dict["verdict"] = best.status
    cfg = {k: v for k, v in state["config"].items()}
    evaluated = sum(1 for n in graph.nodes.values() if n.status != STATUS_PENDING)
    wall = time.time() - state["started_at"]
    fun = funnel(state, store)
    device_min = fun["device_s_total"] / 60.0
    return {
        "outcome": state["outcome"],
        "stop_reason": state["stop_reason"],
        "message": state["message"],
        "platform": cfg["platform"],
        "rounds": state["round"],
        "funnel": fun,
        "best": best_dict,
        "best_history": state["best_history"],
        "first_accepted": state["first_accepted"],
        "candidates_evaluated": evaluated,
        "candidates_per_device_minute": evaluated / device_min if device_min > 0 else None,
        "wall_s": wall,
        "device_s": fun["device_s_total"],
        "generators": state["generator_fit"],
        "generator_stats": state["generator_stats"],
        "fingerprint": state["fingerprint"],
        "harness_hash": state["harness_hash"],
        "baseline": state.get("baseline"),
        "config": cfg,
        "nodes": [n.to_dict(with_source=with_sources) for n in graph.nodes.values()],
        "edges": graph.edges,
    }


# ------------------------------------------------------------------------ one-process driver


def run_campaign(
    state: dict,
    *,
    evaluator=None,
    retrieve: Retrieve | None = None,
    generators: dict | None = None,
    progress: Callable[[dict, dict], None] | None = None,
) -> dict:
    """Run (or resume) a whole campaign in this process with an ``Evaluator``; return state.

    ``progress(state, event)`` is called after each recorded node and at the end.
    """
    from workers import evaluate as ev_mod

    engine = SearchEngine.from_state(state, retrieve=retrieve, generators=generators)
    own = evaluator is None
    ev = ev_mod.Evaluator() if own else evaluator
    if own:
        ev.__enter__()
    try:
        while (step := engine.step(state)).action != STEP_FINISHED:
            if step.action == STEP_BASELINE:
                base = ev.baseline(ev_mod.EvaluationRequest(**baseline_request(state)))
                engine.record_baseline(state, base.to_dict() if hasattr(base, "to_dict") else base)
                continue
            node_ids = step.node_ids
            if step.action == STEP_WAIT:
                # A resumed campaign re-evaluates nodes left pending (evaluation is idempotent).
                node_ids = tuple(n.id for n in engine.graph(state, full=False).pending())
            for node_id in node_ids:
                _evaluate_one(engine, ev, ev_mod, state, node_id, progress)
    finally:
        if own:
            ev.__exit__(None, None, None)
    if progress:
        progress(state, {"event": "finished", "outcome": state["outcome"]})
    return state


def baseline_request(state: dict) -> dict:
    """Keyword arguments for the campaign's one ``baseline()`` call: the incumbent when given,
    else the reference itself in the candidate format."""
    cfg = state["config"]
    src = cfg["incumbent_source"] or cfg["problem_source"].replace(
        "class Model(", "class ModelNew("
    )
    return {**engine_request_defaults(cfg), "candidate_source": src}


def evaluation_request(state: dict, candidate_source: str) -> dict:
    """Keyword arguments for ``workers.evaluate.EvaluationRequest`` for one candidate."""
    kw = {**engine_request_defaults(state["config"]), "candidate_source": candidate_source}
    if state.get("baseline") is not None:
        kw["baseline_times"] = baseline_times(state["baseline"])
    return kw


def baseline_times(baseline: dict) -> dict:
    """``{case name: {baseline name: timing}}`` of a baseline report (a request's
    ``baseline_times``; ``BaselineReport.times()`` of its plain form)."""
    return {c["name"]: c.get("timings") or {} for c in baseline.get("cases") or []}


def _without_samples(baseline: dict) -> dict:
    """The baseline report without its timings' raw samples (see ``record_baseline``)."""
    cases = []
    for case in baseline.get("cases") or []:
        timings = {
            name: {k: v for k, v in timing.items() if k != "samples_ms"}
            if isinstance(timing, dict)
            else timing
            for name, timing in (case.get("timings") or {}).items()
        }
        cases.append({**case, "timings": timings})
    return {**baseline, "cases": cases}


def seed_add(
    state: dict,
    *,
    source: str,
    generator: str,
    params: dict | None = None,
    note: str = "",
    store: GraphStore | None = None,
) -> str:
    """Add a seed the host brings (a warm start from an earlier campaign's node) as a pending
    node before the first round; returns its id. Its evaluation is the campaign's first."""
    node_id = f"n{state['next_id']}"
    (store or StateGraphStore(state)).add(
        Node(
            id=node_id,
            source=source,
            generator=generator,
            edge=EDGE_SEED,
            params=dict(params or {}),
            note=note,
            round=state["round"],
        )
    )
    state["next_id"] += 1
    return node_id


def engine_request_defaults(cfg: dict) -> dict:
    return {
        "problem_source": cfg["problem_source"],
        "workload": cfg["workload"],
        "platform": cfg["platform"],
        "baseline": cfg["baseline"],
        "incumbent_source": cfg["incumbent_source"],
        "trials": cfg["trials"],
        "seed": cfg["seed"],
        "regression_tolerance": cfg["regression_tolerance"],
        "time_limit_s": cfg["time_limit_s"],
    }


def _evaluate_one(engine, ev, ev_mod, state, node_id, progress) -> None:
    kwargs = engine.request_kwargs(state, node_id)
    t0 = time.time()
    try:
        report = ev.evaluate(ev_mod.EvaluationRequest(**kwargs))
        report_d = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    except Exception as exc:  # noqa: BLE001 - an evaluator crash is a failed node, not a crash
        report_d = {
            "verdict": "rejected",
            "failed_gate": None,
            "reason": f"evaluator error: {type(exc).__name__}: {exc}",
            "gates": [],
            "wall_s": time.time() - t0,
            "device_s": 0.0,
        }
    engine.record(state, node_id, report_d)
    if progress:
        progress(state, {"event": "recorded", "node_id": node_id, "report": report_d})


__all__ = [
    "OUTCOMES",
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
    "evaluation_request",
    "funnel",
    "run_campaign",
    "seed_add",
]
