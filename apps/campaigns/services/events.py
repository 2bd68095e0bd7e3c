"""Live events of campaigns: the rendered partials the pages already show, sent after commit."""

from django.db.models import F
from django.template.loader import render_to_string

from apps.campaigns.consumers import CAMPAIGN_LIST_GROUP, campaign_group, node_group
from apps.campaigns.models import Campaign, Node
from apps.campaigns.selectors import campaign_best_rule, campaign_get, campaign_worker_notice
from kernelevolve_site.events import send_event_on_commit


def campaign_changed(campaign: Campaign) -> None:
    """Progress, funnel and status of a campaign changed (its page and the list follow).

    The event carries a new revision, taken with the row's lock in the caller's transaction,
    and the row as it is now (not the caller's copy, which may be older than a change committed
    since it was read). A page drops a progress partial older than the one it shows, so a step's
    event that arrives after the answer to Cancel cannot put "running" back."""
    Campaign.objects.filter(pk=campaign.pk).update(revision=F("revision") + 1)
    campaign = campaign_get(pk=campaign.pk)
    context = {
        "campaign": campaign,
        "oob": True,
        "worker_notice": campaign_worker_notice(campaign=campaign),
        "best_rule": campaign_best_rule(campaign=campaign),
    }
    html = render_to_string("campaigns/partials/progress.html", context)
    data = {
        "campaign": campaign.pk,
        "status": campaign.status,
        "outcome": campaign.outcome,
        "evaluated": campaign.candidates_evaluated,
        "revision": campaign.revision,
    }
    send_event_on_commit(campaign_group(campaign.pk), "campaign.progress", html=html, data=data)
    send_event_on_commit(CAMPAIGN_LIST_GROUP, "campaign.listed", data=data)


def node_changed(node: Node) -> None:
    """A node got its verdict: its table row is swapped in place."""
    # htmx parses messages as template content, so a bare <tr> survives and swaps by id.
    html = render_to_string("campaigns/partials/node_row.html", {"node": node, "oob": True})
    send_event_on_commit(
        campaign_group(node.campaign_id),
        "campaign.node",
        html=html,
        data={"node": node.key, "status": node.status},
    )


def nodes_created(campaign: Campaign, nodes: list[Node]) -> None:
    """New candidates: their rows are appended to the candidate table."""
    if not nodes:
        return
    rows = "".join(
        render_to_string("campaigns/partials/node_row.html", {"node": node}) for node in nodes
    )
    html = f'<tbody hx-swap-oob="beforeend:#node-rows">{rows}</tbody>'
    send_event_on_commit(
        campaign_group(campaign.pk),
        "campaign.node",
        html=html,
        data={"created": [n.key for n in nodes]},
    )


def comment_changed(comment, *, change: str = "created") -> None:
    """A comment on a candidate was created, edited, deleted, resolved or reopened: the
    candidate's other open pages refresh their comment section (and its lines in the source)."""
    send_event_on_commit(
        node_group(comment.node_id),
        "node.comment",
        data={
            "comment": comment.pk,
            "change": change,
            "author": comment.author.username,
            "line": comment.line,
        },
    )
