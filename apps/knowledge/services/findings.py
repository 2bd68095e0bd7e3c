"""A finished campaign's findings become draft entries for curators to accept or reject.

- The winning pattern: the best accepted node's generator, parameters and measured gain (on
  `interpret` only correctness can be shown, and the draft says so).
- Negative evidence: rejected nodes grouped by the gate and rule that refused them, with the
  transformations that were tried and the gate's evidence.

Each finding is drafted once per campaign (`finding_key`), so ending a campaign twice, or a
redelivered step, adds nothing. The drafts carry the evaluation fingerprint as provenance and
link the campaign and nodes as evidence. The same call then flags entries that disagree with
that fingerprint (services.revalidation).
"""

import json
import logging

from django.db import transaction

from apps.campaigns.constants import NodeStatus
from apps.knowledge.constants import MAX_FAILURE_DRAFTS, EntryKind, EntryOrigin, EntryStatus
from apps.knowledge.models import Entry
from apps.knowledge.selectors.toolchain import campaign_fingerprint
from apps.knowledge.services.entries import knowledge_entry_create
from apps.knowledge.services.revalidation import knowledge_revalidate

logger = logging.getLogger(__name__)

PROVENANCE_KEYS = ("platform", "device", "compute_capability", "driver", "cuda", "torch", "triton")


def _provenance(campaign, fingerprint: dict | None, cases: list[str]) -> dict:
    prov = {k: (fingerprint or {}).get(k) for k in PROVENANCE_KEYS}
    prov["platform"] = prov.get("platform") or campaign.platform
    if cases:
        prov["benchmark_range"] = ", ".join(cases[:8]) + (" …" if len(cases) > 8 else "")
    prov["source"] = f"campaign {campaign.pk} ({campaign.name})"
    return prov


def _family(problem) -> str:
    """The problem's operator family; for an upload or import without one, the catalog's."""
    if problem.family:
        return problem.family
    from workers.catalog import catalog_get

    try:
        return catalog_get(problem.name.replace("-", "_")).family
    except KeyError:
        return ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …"


def _params(params: dict) -> str:
    return json.dumps(params or {}, indent=1, sort_keys=True, default=str)


def _winner_body(campaign, node) -> tuple[str, str]:
    problem = campaign.problem
    rows = []
    for m in node.measurements.filter(kind="workload"):
        base = (m.baselines or {}).get(campaign.baseline) or {}
        ref = base.get("median_ms") if isinstance(base, dict) else None
        gain = f"{ref / m.median_ms:.2f}×" if ref and m.median_ms else "n/a"
        if isinstance(base, dict) and base.get("peer"):
            gain += f" vs {base['peer']}"  # the best peer on this case
        mine = f"{m.median_ms * 1000:.1f}" if m.median_ms else "n/a"
        rows.append(f"| {m.case} | {m.weight:g} | {mine} | {gain} |")
    if campaign.platform == "cuda" and node.fitness is not None:
        ci = ""
        if node.fitness_ci_low is not None:
            ci = f" (95% CI {node.fitness_ci_low:.3f}–{node.fitness_ci_high:.3f})"
        gain = f"measured fitness {node.fitness:.3f}× over {campaign.baseline}{ci}"
    else:
        gain = "correct on the Triton interpreter; no speed measured there (correctness only)"
    body = [
        f"Winning candidate of campaign {campaign.pk} on **{problem.name}** "
        f"({_family(problem) or 'no family'}), platform `{campaign.platform}`: {gain}.",
        "",
        f"Generator `{node.generator}`, node `{node.key}`, parameters:",
        "",
        "```json",
        _params(node.params),
        "```",
    ]
    if rows:
        body += ["", "| case | weight | µs | gain |", "|---|---|---|---|", *rows]
    title = f"{problem.name} on {campaign.platform}: {node.generator} pattern"
    if campaign.platform == "cuda" and node.fitness is not None:
        title += f" at {node.fitness:.2f}×"
    return title[:200], "\n".join(body)


def _failure_groups(campaign) -> dict[tuple[str, str], list]:
    groups: dict[tuple[str, str], list] = {}
    rejected = campaign.nodes.filter(status=NodeStatus.REJECTED).prefetch_related("gates")
    for node in rejected.order_by("id"):
        gate = next((g for g in node.gates.all() if g.name == node.failed_gate), None)
        rule = (gate.rule if gate else "") or (node.reason.split(":")[0][:60] or "rejected")
        groups.setdefault((node.failed_gate or "unknown", rule), []).append((node, gate))
    return groups


def _failure_body(campaign, gate_name: str, rule: str, items: list) -> tuple[str, str]:
    problem = campaign.problem
    lines = [
        f"{len(items)} candidate(s) of campaign {campaign.pk} on **{problem.name}** "
        f"(platform `{campaign.platform}`) failed the **{gate_name}** gate, rule `{rule}`.",
        "",
        "Transformations tried:",
        "",
    ]
    for node, _gate in items[:6]:
        params = ", ".join(f"{k}={v}" for k, v in sorted((node.params or {}).items()))[:200]
        lines.append(f"- `{node.key}` ({node.generator}): {params or 'no parameters'}")
    node, gate = items[0]
    lines += ["", "Evidence (first one):", "", f"> {_clip((node.reason or '').strip(), 400)}"]
    if gate and gate.evidence:
        lines += ["", "```json", _clip(json.dumps(gate.evidence, default=str), 600), "```"]
    title = f"{problem.name}: {gate_name} gate rejects {rule}"
    return title[:200], "\n".join(lines)


@transaction.atomic
def knowledge_campaign_findings(*, campaign) -> list[Entry]:
    """Draft entries for a finished campaign's findings (each once); returns the new drafts."""
    problem = campaign.problem
    fingerprint = campaign_fingerprint(campaign=campaign)
    done = set(Entry.objects.filter(source_campaign=campaign).values_list("finding_key", flat=True))
    common = {
        "by": campaign.created_by,
        "status": EntryStatus.DRAFT,
        "origin": EntryOrigin.CAMPAIGN,
        "source_campaign": campaign,
        "evidence_campaigns": [campaign],
        "families": [_family(problem)] if _family(problem) else [],
        "platforms": [campaign.platform],
        "reason": f"Drafted from campaign {campaign.pk}",
    }
    created = []
    best = campaign.best_node
    if best is not None and best.status == NodeStatus.ACCEPTED and f"winner:{best.key}" not in done:
        cases = list(best.measurements.filter(kind="workload").values_list("case", flat=True))
        title, body = _winner_body(campaign, best)
        created.append(
            knowledge_entry_create(
                **common,
                title=title,
                body=body,
                kind=EntryKind.PATTERN,
                tags=[problem.name, best.generator, "campaign-finding"],
                provenance=_provenance(campaign, fingerprint, cases),
                evidence_nodes=[best],
                finding_key=f"winner:{best.key}",
            )
        )
    groups = sorted(_failure_groups(campaign).items(), key=lambda kv: -len(kv[1]))
    for (gate_name, rule), items in groups[:MAX_FAILURE_DRAFTS]:
        key = f"failed:{gate_name}:{rule}"[:120]
        if key in done:
            continue
        title, body = _failure_body(campaign, gate_name, rule, items)
        created.append(
            knowledge_entry_create(
                **common,
                title=title,
                body=body,
                kind=EntryKind.FAILED_APPROACH,
                tags=[problem.name, gate_name, rule, "negative-evidence"],
                provenance=_provenance(campaign, fingerprint, []),
                evidence_nodes=[node for node, _ in items[:20]],
                finding_key=key,
            )
        )
    return created


def knowledge_campaign_finished(*, campaign_id: int) -> dict:
    """After a campaign ends: draft its findings, then flag entries that disagree with the
    toolchain it ran on. Never raises: knowledge must not break a campaign."""
    from apps.campaigns.models import Campaign

    result = {"drafts": 0, "flagged": 0, "error": ""}
    try:
        campaign = Campaign.objects.select_related("problem", "best_node", "created_by").get(
            pk=campaign_id
        )
        result["drafts"] = len(knowledge_campaign_findings(campaign=campaign))
        fingerprint = campaign_fingerprint(campaign=campaign)
        if fingerprint:
            result["flagged"] = len(knowledge_revalidate(fingerprint=fingerprint))
    except Exception as exc:  # noqa: BLE001 - logged and reported, never raised
        logger.exception("knowledge: findings of campaign %s failed", campaign_id)
        result["error"] = repr(exc)[:300]
    return result
