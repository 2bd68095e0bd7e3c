"""Reads of a campaign's search graph: its nodes, the newest of them as a table, and the graph in
pages as Plotly figures laid out over the whole graph.

One query per read whatever the size of the graph (the tests assert it).
"""

from django.db.models import Prefetch, QuerySet
from django.urls import reverse

from apps.campaigns import charts
from apps.campaigns.models import Campaign, Edge, Node

GRAPH_PAGE_SIZE = 1000
NODE_FIELDS = ("id", "key", "round", "status", "failed_gate", "fitness", "generator", "backend")
NODE_TABLE_SIZE = 50


def campaign_nodes_with_parents(*, campaign: Campaign) -> QuerySet[Node]:
    """The nodes with their in-edges and each edge's parent key (not the parent's report)."""
    edges = Edge.objects.select_related("parent").only(
        "id", "kind", "child_id", "parent", "parent__key"
    )
    return campaign_nodes(campaign=campaign).prefetch_related(Prefetch("in_edges", queryset=edges))


def campaign_nodes(*, campaign: Campaign) -> QuerySet[Node]:
    return campaign.nodes.defer("source", "report").order_by("id")


def campaign_node_table(*, campaign: Campaign, limit: int = NODE_TABLE_SIZE) -> dict:
    """The newest `limit` candidates in id order (new ones are appended live), and the total."""
    total = campaign.nodes.count()
    rows = list(campaign_nodes(campaign=campaign).order_by("-id")[:limit])
    rows.reverse()
    return {"nodes": rows, "total": total, "shown": len(rows)}


def campaign_graph_page(*, campaign: Campaign, after: int = 0, limit: int | None = None) -> dict:
    """One page of the search graph (nodes with id > `after`) as a Plotly figure, plus the cursor.

    The layout is computed over the whole graph and only the drawing is paged, so every page is
    drawn in the same frame and carries its parents' coordinates (the page's graph and the API
    give the same coordinates whatever the page size). One query: every node of the campaign
    with its in-edges, a few columns each. `campaign` needs its `best_node_id`.
    """
    rows = campaign_nodes(campaign=campaign).values(
        *NODE_FIELDS, "in_edges__parent", "in_edges__kind"
    )
    return charts.graph_page(
        rows=rows,
        after=after,
        limit=limit or GRAPH_PAGE_SIZE,
        node_url=reverse("campaigns:node", args=[campaign.pk, "KEY"]).replace("KEY", "{key}"),
        revision=f"campaign-{campaign.pk}",
        best_id=campaign.best_node_id,
    )
