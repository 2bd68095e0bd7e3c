"""The search graph leaves `Campaign.engine_state`: the Node/Edge rows become its one copy.

Forward: for each campaign whose state still holds a graph, every graph node gets its row (a
node the rows lacked, which only a step that died between saving the state and creating rows
could leave, is created with its edges), the fields only the state kept move to the row (note,
island, migrated_to, fitness as reported, the failing gate's evidence), and the graph is
dropped from the state. Every row gets its source's hash. Backward: the graph is rebuilt into
each searched campaign's state from the rows, as the code before this migration expects.
"""

import hashlib

from django.db import migrations

EVIDENCE_CAP = 4000
UNSETTLED = ("pending", "evaluating")


def _failed_gate_evidence(report):
    for gate in (report or {}).get("gates") or []:
        if gate.get("status") == "failed":
            ev = gate.get("evidence")
            text = ev if isinstance(ev, str) else repr(ev)
            return text[-EVIDENCE_CAP:]
    return ""


def graph_to_rows(apps, schema_editor):
    Campaign = apps.get_model("campaigns", "Campaign")
    Node = apps.get_model("campaigns", "Node")
    Edge = apps.get_model("campaigns", "Edge")
    for campaign in Campaign.objects.only("id", "engine_state").iterator(chunk_size=20):
        state = campaign.engine_state or {}
        graph = state.pop("graph", None)
        if graph is None:
            continue
        rows = {row.key: row for row in Node.objects.filter(campaign_id=campaign.pk)}
        for data in graph.get("nodes") or []:
            row = rows.get(data["id"])
            if row is None:
                row = Node.objects.create(
                    campaign_id=campaign.pk,
                    key=data["id"],
                    round=data.get("round") or 0,
                    generator=data.get("generator") or "",
                    params=data.get("params") or {},
                    source=data.get("source") or "",
                    retrieved_knowledge=data.get("knowledge_ids") or [],
                )
                rows[row.key] = row
                parents = [rows[p] for p in data.get("parent_ids") or [] if p in rows] or [None]
                for parent in parents:
                    Edge.objects.create(
                        campaign_id=campaign.pk,
                        parent=parent,
                        child=row,
                        kind=data.get("edge") or "seed",
                    )
            row.note = data.get("note") or ""
            row.island = data.get("island") or 0
            row.migrated_to = list(data.get("migrated_to") or [])
            row.fitness_detail = data.get("fitness")
            row.feedback = data.get("feedback") or _failed_gate_evidence(data.get("report"))
            row.save(update_fields=["note", "island", "migrated_to", "fitness_detail", "feedback"])
        campaign.engine_state = state
        campaign.save(update_fields=["engine_state"])
    batch = []
    for row in Node.objects.only("id", "source").iterator(chunk_size=500):
        row.source_hash = hashlib.sha256(row.source.encode()).hexdigest()
        batch.append(row)
        if len(batch) >= 500:
            Node.objects.bulk_update(batch, ["source_hash"])
            batch = []
    Node.objects.bulk_update(batch, ["source_hash"])


def rows_to_graph(apps, schema_editor):
    Campaign = apps.get_model("campaigns", "Campaign")
    Node = apps.get_model("campaigns", "Node")
    Edge = apps.get_model("campaigns", "Edge")
    GateResult = apps.get_model("campaigns", "GateResult")
    for campaign in Campaign.objects.only("id", "engine_state").iterator(chunk_size=20):
        state = campaign.engine_state or {}
        if "config" not in state or "graph" in state:
            continue  # imported (no engine state) or already in the old layout
        rows = list(Node.objects.filter(campaign_id=campaign.pk).order_by("id"))
        keys = {row.pk: row.key for row in rows}
        kinds, parents, edges = {}, {}, []
        for parent_id, child_id, kind in (
            Edge.objects.filter(campaign_id=campaign.pk)
            .order_by("id")
            .values_list("parent_id", "child_id", "kind")
        ):
            kinds.setdefault(child_id, kind)
            if parent_id is not None:
                parents.setdefault(child_id, []).append(keys[parent_id])
                edges.append({"src": keys[parent_id], "dst": keys[child_id], "type": kind})
        gates = {}
        for node_id, name, status, reason, wall, device in (
            GateResult.objects.filter(node__campaign_id=campaign.pk)
            .order_by("node_id", "order")
            .values_list("node_id", "name", "status", "reason", "wall_seconds", "device_seconds")
        ):
            gates.setdefault(node_id, []).append(
                {
                    "name": name,
                    "status": status,
                    "reason": reason,
                    "wall_s": wall,
                    "device_s": device,
                }
            )
        nodes = []
        for row in rows:
            if row.status in UNSETTLED:
                status = "pending"
            else:
                status = row.status if row.status in ("accepted", "rejected") else "rejected"
            nodes.append(
                {
                    "id": row.key,
                    "source": row.source,
                    "generator": row.generator,
                    "edge": kinds.get(row.pk, "seed"),
                    "parent_ids": parents.get(row.pk, []),
                    "params": row.params,
                    "note": row.note,
                    "round": row.round,
                    "island": row.island,
                    "migrated_to": row.migrated_to,
                    "knowledge_ids": row.retrieved_knowledge,
                    "status": status,
                    "failed_gate": row.failed_gate or None,
                    "reason": row.reason,
                    "gates": gates.get(row.pk, []),
                    "fitness": row.fitness_detail,
                    "device_s": row.device_seconds,
                    "wall_s": row.wall_seconds,
                    "report": None,
                    "feedback": row.feedback,
                    "source_hash": row.source_hash,
                }
            )
        state["graph"] = {"nodes": nodes, "edges": edges}
        campaign.engine_state = state
        campaign.save(update_fields=["engine_state"])


class Migration(migrations.Migration):
    dependencies = [
        ("campaigns", "0008_node_graph_fields"),
    ]

    operations = [migrations.RunPython(graph_to_rows, rows_to_graph)]
