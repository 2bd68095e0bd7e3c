"""Proposing a round: which nodes to repair, seed, combine, mutate or vary, and asking the
generators for them (:class:`ProposeMixin`, one part of
:class:`~workers.search.engine.SearchEngine`).

The mixin uses what the engine holds (``generators``, ``policy``, ``retrieve``), its ``_store``,
and the stop rule's ``_stop_reason`` and ``_close_round``
(:class:`~workers.search.stopping.StopMixin`).
"""

from __future__ import annotations

from workers.search.generators.base import (
    EDGE_ALTERNATIVE,
    EDGE_CROSSOVER,
    EDGE_MUTATION,
    EDGE_REPAIR,
    EDGE_SEED,
    GenerationContext,
    training,
)
from workers.search.graph import STATUS_REJECTED, Graph, Node, source_hash
from workers.search.graph_store import GraphStore
from workers.search.policies import parent_pool, per_case_winners, quality
from workers.search.recording import _failed_gate_evidence

REPAIRABLE_GATES = ("compile", "correctness")


class ProposeMixin:
    """Creates each round's pending nodes (:meth:`propose`)."""

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
            tuned=state.get("tuned"),
        )

    def _whole(self, state: dict, node: Node) -> Node:
        # A graph read for choosing parents may come without sources and feedback (the heavy
        # texts); a generator needs them for the few nodes it is shown.
        return node if node.source else (self._store(state).node(node.id) or node)

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
                train = training(cfg.get("workload"))
                state["generator_fit"][name] = gen.describe(cfg["problem_source"], train)
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
            every = mode == EDGE_SEED
            if every:
                order = names
            elif (fb or {}).get("per_case"):
                # The per-case crossover goes to every generator whose nodes won a case: the
                # winners may come from several (a back-end crossover of Triton and CuTe).
                won = {p.generator for p in parents}
                order, every = [name for name in names if name in won] or order, True
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
                if made and not every:
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


def _repair_depth(graph: Graph, node: Node) -> int:
    depth = 0
    while node.edge == EDGE_REPAIR and node.parent_ids:
        depth += 1
        node = graph.nodes[node.parent_ids[0]]
    return depth


def _evidence(node: Node) -> str:
    # States saved before ``feedback`` existed still have the full report on the node.
    return node.feedback or _failed_gate_evidence(node.report) or node.reason
