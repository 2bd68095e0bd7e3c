"""Demo knowledge: the starter set, plus draft findings of finished campaigns (e.g. the
imported H200 searches) so the curation queue shows real evidence. Safe to run again."""

from apps.campaigns.constants import FINISHED_STATUSES
from apps.campaigns.models import Campaign
from apps.knowledge.services.findings import knowledge_campaign_findings
from apps.knowledge.services.imports import knowledge_starter_load


def knowledge_demo_seed() -> list[str]:
    starter = knowledge_starter_load()
    lines = [
        f"knowledge starter set: {len(starter.created)} created, "
        f"{len(starter.unchanged) + len(starter.updated)} already there"
    ]
    finished = Campaign.objects.filter(status__in=FINISHED_STATUSES).select_related(
        "problem", "best_node", "created_by"
    )
    drafts = sum(len(knowledge_campaign_findings(campaign=c)) for c in finished)
    lines.append(f"knowledge drafts from finished campaigns: {drafts}")
    return lines
