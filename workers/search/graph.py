"""The search graph: candidate nodes with their measured state, and typed edges between them.

Plain data throughout (``to_dict``/``from_dict``), so the control side can persist the graph in
its database and a standalone campaign can write it to JSON. A node's ``status`` moves
``pending`` -> ``accepted`` | ``rejected``; a rejected node records the gate that stopped it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from workers.search.generators.base import EDGE_TYPES

STATUS_PENDING = "pending"
STATUS_ACCEPTED = "accepted"
STATUS_REJECTED = "rejected"


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


@dataclass
class Node:
    """One candidate and what the gates said about it."""

    id: str
    source: str
    generator: str
    edge: str
    parent_ids: list[str] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    note: str = ""
    round: int = 0
    island: int = 0
    migrated_to: list[int] = field(default_factory=list)
    knowledge_ids: list = field(default_factory=list)
    status: str = STATUS_PENDING
    failed_gate: str | None = None
    reason: str = ""
    gates: list[dict] = field(default_factory=list)
    fitness: dict | None = None
    device_s: float = 0.0
    wall_s: float = 0.0
    report: dict | None = None
    feedback: str = ""
    source_hash: str = ""

    def __post_init__(self) -> None:
        if self.edge not in EDGE_TYPES:
            raise ValueError(f"unknown edge type {self.edge!r}")
        if not self.source_hash:
            self.source_hash = source_hash(self.source)

    @property
    def speedup(self) -> float | None:
        return (self.fitness or {}).get("speedup")

    @property
    def ci_low(self) -> float | None:
        ci = (self.fitness or {}).get("ci95") or [None, None]
        return ci[0]

    def to_dict(self, *, with_source: bool = True, with_report: bool = True) -> dict:
        # Shallow: the engine saves the whole graph after every evaluation, and a deep copy of
        # every node's gates and fitness made that quadratic in practice. Values are shared, not
        # copied; the engine replaces a node's fields, it never edits them in place.
        d = {name: getattr(self, name) for name in self.__dataclass_fields__}
        if not with_source:
            d.pop("source")
        if not with_report:
            d.pop("report")
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Node:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class Graph:
    """Nodes by id (in creation order) and the edges that produced them."""

    nodes: dict[str, Node] = field(default_factory=dict)
    edges: list[dict] = field(default_factory=list)

    def add(self, node: Node) -> Node:
        if node.id in self.nodes:
            raise ValueError(f"duplicate node id {node.id}")
        for parent in node.parent_ids:
            if parent not in self.nodes:
                raise ValueError(f"unknown parent {parent} of {node.id}")
            self.edges.append({"src": parent, "dst": node.id, "type": node.edge})
        self.nodes[node.id] = node
        return node

    def children(self, node_id: str) -> list[Node]:
        return [
            self.nodes[e["dst"]]
            for e in self.edges
            if e["src"] == node_id and e["dst"] in self.nodes
        ]

    def accepted(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.status == STATUS_ACCEPTED]

    def pending(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.status == STATUS_PENDING]

    def has_source(self, digest: str) -> bool:
        return any(n.source_hash == digest for n in self.nodes.values())

    def to_dict(self) -> dict:
        return {"nodes": [n.to_dict() for n in self.nodes.values()], "edges": list(self.edges)}

    @classmethod
    def from_dict(cls, d: dict) -> Graph:
        g = cls()
        for nd in d.get("nodes", []):
            node = Node.from_dict(nd)
            g.nodes[node.id] = node
        g.edges = [dict(e) for e in d.get("edges", [])]
        return g
