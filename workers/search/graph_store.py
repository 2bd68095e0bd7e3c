"""Where the search graph lives: the interface the engine reads and writes nodes through.

The engine owns the graph's rules (which nodes exist, how they are linked, what a report does
to a node); a store only keeps them. Two stores exist:

- :class:`StateGraphStore` (here): the graph as plain JSON inside the campaign state
  (``state["graph"]``), for the standalone CLI and the tests; its output file carries it.
- ``apps.campaigns.graph_store.RowGraphStore``: the portal's Node and Edge rows, so the graph
  is stored once and the saved state keeps only the search's scalars.

What the engine needs of a store is small on purpose: recording one evaluation reads two nodes
(the one recorded, the best) and writes one, whatever the size of the graph; only proposing a
round and ending the campaign read the whole graph.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from workers.search.graph import STATUS_PENDING, Graph, Node


@dataclass(frozen=True)
class GraphTotals:
    """Counts over the whole graph that stop rules and the first acceptance read."""

    nodes: int
    pending: int
    device_s: float

    @property
    def evaluated(self) -> int:
        return self.nodes - self.pending


@runtime_checkable
class GraphStore(Protocol):
    """The search graph's one copy. Node ids are the engine's (``n1``, ``n2``, ...)."""

    def graph(self, *, full: bool = True) -> Graph:
        """Every node and edge, in creation order. With ``full=False`` a store may leave each
        node's heavy texts empty (``source``, ``feedback``; ``source_hash`` stays): what choosing
        parents needs. The engine asks :meth:`node` for the few it then needs whole."""
        ...

    def node(self, node_id: str) -> Node | None:
        """One node with its source, or None."""
        ...

    def add(self, node: Node) -> None:
        """Keep a new node and its edges (from ``parent_ids``, typed ``node.edge``; a node
        without parents is a seed). Its source, generator, edge, parents, params, note, round
        and knowledge are fixed from here on."""
        ...

    def save(self, node: Node) -> None:
        """Keep what changed on a node read whole (:meth:`node`): its measured state (status,
        failed gate, reason, gates, fitness, device and wall seconds, feedback, report) and its
        ``migrated_to``. A store may keep gates and reports elsewhere (the portal's evidence
        rows) and leave them out."""
        ...

    def totals(self) -> GraphTotals:
        """Node count, pending count and device-seconds over all nodes."""
        ...


class StateGraphStore:
    """The graph as JSON in the campaign state (``state["graph"]``): ``{"nodes": [node dicts
    in creation order], "edges": [{"src", "dst", "type"}]}``, the layout a CLI campaign's
    output file has always had."""

    def __init__(self, state: dict) -> None:
        self.state = state

    @property
    def _data(self) -> dict:
        return self.state.setdefault("graph", {"nodes": [], "edges": []})

    def graph(self, *, full: bool = True) -> Graph:
        return Graph.from_dict(self._data)

    def _index(self, node_id: str) -> int | None:
        for i, d in enumerate(self._data["nodes"]):
            if d["id"] == node_id:
                return i
        return None

    def node(self, node_id: str) -> Node | None:
        i = self._index(node_id)
        return None if i is None else Node.from_dict(self._data["nodes"][i])

    def add(self, node: Node) -> None:
        data = self._data
        known = {d["id"] for d in data["nodes"]}
        if node.id in known:
            raise ValueError(f"duplicate node id {node.id}")
        for parent in node.parent_ids:
            if parent not in known:
                raise ValueError(f"unknown parent {parent} of {node.id}")
            data["edges"].append({"src": parent, "dst": node.id, "type": node.edge})
        data["nodes"].append(node.to_dict())

    def save(self, node: Node) -> None:
        i = self._index(node.id)
        if i is None:
            raise KeyError(f"no node {node.id} in this campaign")
        self._data["nodes"][i] = node.to_dict()

    def totals(self) -> GraphTotals:
        nodes = self._data["nodes"]
        return GraphTotals(
            nodes=len(nodes),
            pending=sum(1 for d in nodes if d.get("status", STATUS_PENDING) == STATUS_PENDING),
            device_s=sum(float(d.get("device_s") or 0.0) for d in nodes),
        )


__all__ = ["GraphStore", "GraphTotals", "StateGraphStore"]
