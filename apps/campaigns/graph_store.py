"""The search graph's one copy in the portal: a campaign's Node and Edge rows.

`RowGraphStore` is the `workers.search.graph_store.GraphStore` the control side hands the search
engine. The engine decides what a node is and what a report does to it; this maps its nodes onto
rows and back. Recording an evaluation reads two nodes and writes one whatever the campaign's
size; proposing a round reads the graph without its sources and feedback (the heavy texts).

Rows carry more than the engine's nodes (the full report, gate results, measurements, dispatch
bookkeeping): those are the evidence services' (`services.evaluations`), never touched here. A
row's `evaluating` is the engine's `pending`; a `cancelled` one reads as rejected (the engine
never runs for a campaign that has them).
"""

from django.db.models import Count, Q, Sum

from apps.campaigns.constants import UNSETTLED_NODE_STATUSES, NodeStatus
from apps.campaigns.models import Campaign, Edge, Node
from workers.cute_dsl import declared_backend
from workers.search.graph import STATUS_ACCEPTED, STATUS_PENDING, STATUS_REJECTED, Graph
from workers.search.graph import Node as GraphNode
from workers.search.graph_store import GraphTotals

HEAVY_FIELDS = ("source", "feedback", "report")


def _engine_status(status: str) -> str:
    if status in UNSETTLED_NODE_STATUSES:
        return STATUS_PENDING
    return STATUS_ACCEPTED if status == NodeStatus.ACCEPTED else STATUS_REJECTED


def _graph_node(row: Node, kind: str, parents: list[str], *, full: bool) -> GraphNode:
    return GraphNode(
        id=row.key,
        source=row.source if full else "",
        generator=row.generator,
        edge=kind,
        parent_ids=parents,
        params=row.params,
        note=row.note,
        round=row.round,
        island=row.island,
        migrated_to=list(row.migrated_to),
        knowledge_ids=row.retrieved_knowledge,
        status=_engine_status(row.status),
        failed_gate=row.failed_gate or None,
        reason=row.reason,
        fitness=row.fitness_detail,
        device_s=row.device_seconds,
        wall_s=row.wall_seconds,
        feedback=row.feedback if full else "",
        source_hash=row.source_hash,
    )


class RowGraphStore:
    """A campaign's graph as its Node and Edge rows. `created` collects the rows `add` made
    (the step announces and dispatches them)."""

    def __init__(self, campaign: Campaign) -> None:
        self.campaign = campaign
        self.created: list[Node] = []

    def _rows(self):
        return Node.objects.filter(campaign_id=self.campaign.pk)

    def graph(self, *, full: bool = True) -> Graph:
        rows = self._rows().order_by("id").defer(*(HEAVY_FIELDS if not full else ("report",)))
        rows = list(rows)
        keys = {row.pk: row.key for row in rows}
        kinds: dict[int, str] = {}
        parents: dict[int, list[str]] = {}
        graph = Graph()
        for parent_id, child_id, kind in (
            Edge.objects.filter(campaign_id=self.campaign.pk)
            .order_by("id")
            .values_list("parent_id", "child_id", "kind")
        ):
            kinds.setdefault(child_id, kind)
            if parent_id is not None:
                parents.setdefault(child_id, []).append(keys[parent_id])
                graph.edges.append({"src": keys[parent_id], "dst": keys[child_id], "type": kind})
        for row in rows:
            node = _graph_node(row, kinds.get(row.pk, "seed"), parents.get(row.pk, []), full=full)
            graph.nodes[node.id] = node
        return graph

    def node(self, node_id: str) -> GraphNode | None:
        row = self._rows().defer("report").filter(key=node_id).first()
        if row is None:
            return None
        kind, parents = "seed", []
        for parent_key, edge_kind in (
            Edge.objects.filter(child_id=row.pk).order_by("id").values_list("parent__key", "kind")
        ):
            kind = edge_kind
            if parent_key is not None:
                parents.append(parent_key)
        return _graph_node(row, kind, parents, full=True)

    def add(self, node: GraphNode) -> None:
        parents = dict(self._rows().filter(key__in=node.parent_ids).values_list("key", "pk"))
        missing = [p for p in node.parent_ids if p not in parents]
        if missing:
            raise ValueError(f"unknown parent {missing[0]} of {node.id}")
        row = Node.objects.create(
            campaign_id=self.campaign.pk,
            key=node.id,
            round=node.round,
            generator=node.generator,
            params=node.params,
            source=node.source,
            backend=declared_backend(node.source),
            source_hash=node.source_hash,
            note=node.note,
            island=node.island,
            migrated_to=list(node.migrated_to),
            retrieved_knowledge=node.knowledge_ids,
        )
        Edge.objects.bulk_create(
            Edge(
                campaign_id=self.campaign.pk, parent_id=parents.get(key), child=row, kind=node.edge
            )
            for key in (node.parent_ids or [None])
        )
        self.created.append(row)

    def save(self, node: GraphNode) -> None:
        fitness = node.fitness or {}
        ci = fitness.get("ci95") or [None, None]
        fields = {
            "failed_gate": node.failed_gate or "",
            "reason": node.reason,
            "fitness": fitness.get("speedup"),
            "fitness_ci_low": ci[0],
            "fitness_ci_high": ci[1],
            "fitness_detail": node.fitness,
            "device_seconds": node.device_s,
            "wall_seconds": node.wall_s,
            "feedback": node.feedback,
            "migrated_to": list(node.migrated_to),
        }
        if node.status != STATUS_PENDING:  # a pending node's row may be evaluating: kept
            fields["status"] = node.status
        if not self._rows().filter(key=node.id).update(**fields):
            raise KeyError(f"no node {node.id} in this campaign")

    def totals(self) -> GraphTotals:
        agg = self._rows().aggregate(
            nodes=Count("id"),
            pending=Count("id", filter=Q(status__in=UNSETTLED_NODE_STATUSES)),
            device_s=Sum("device_seconds"),
        )
        return GraphTotals(
            nodes=agg["nodes"], pending=agg["pending"], device_s=float(agg["device_s"] or 0.0)
        )
