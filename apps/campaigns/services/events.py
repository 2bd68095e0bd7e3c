"""Live events of campaigns: the rendered partials the pages already show, sent after commit."""

import threading
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.template.loader import render_to_string

from apps.campaigns.constants import NodeStatus
from apps.campaigns.consumers import CAMPAIGN_LIST_GROUP, campaign_group, node_group
from apps.campaigns.models import Campaign, Node
from apps.campaigns.selectors import (
    BEST_CONTENDERS_SHOWN,
    BestRule,
    campaign_best_rule,
    campaign_get,
    campaign_worker_notice,
)
from kernelevolve_site.events import send_event_on_commit


@dataclass(frozen=True)
class _BestRuleShown:
    """The best rule a campaign's last committed event showed, and the state it was replayed
    from: the campaign (by pk and creation time), its best, and its funnel's accepted count
    (kept equal to its accepted rows by services.search)."""

    created_at: datetime
    best_node_id: int
    accepted: int
    rule: BestRule


# Per process, the last few campaigns'. Replaying the rule reads every accepted row (on SQLite
# each wide row: 90 ms at 2,000 nodes), and most events cannot change what it shows; the ones
# that can replay it. Only a committed state is kept, so a rolled-back step never shows.
_BEST_RULES: OrderedDict[int, _BestRuleShown] = OrderedDict()
_BEST_RULES_KEPT = 256
_BEST_RULES_LOCK = threading.Lock()  # the ASGI server's requests run in threads


def _best_rule_unchanged(shown: _BestRuleShown, recorded: Node | None, accepted: int) -> bool:
    """Whether the rule shown before still holds: the accepted rows are the same ones (they
    only grow, so the same count is the same rows), or the one added, `recorded`, is neither the
    best nor among the contenders shown. A new accepted candidate comes last in the replay: it
    replaces the best only when its CI lower bound is above the best's speedup, and enters the
    table (the strongest first, ties in recorded order) only above the weakest one shown."""
    if accepted == shown.accepted:
        return True
    if recorded is None or recorded.status != NodeStatus.ACCEPTED or accepted != shown.accepted + 1:
        return False
    rule = shown.rule
    if len(rule.contenders) < BEST_CONTENDERS_SHOWN:
        return False
    if recorded.fitness is None:
        # Timed or not, an untimed candidate sorts after every one shown.
        return all(c.fitness is None or c.fitness >= 0.0 for c in rule.contenders)
    if rule.best.fitness is None:
        return False  # perhaps the first timed one: the rule's wording changes
    if (recorded.fitness_ci_low or 0.0) > rule.best.fitness:
        return False
    return recorded.fitness <= min(c.fitness or 0.0 for c in rule.contenders)


def _best_rule_for_event(*, campaign: Campaign, recorded: Node | None = None) -> BestRule | None:
    """`campaign_best_rule` for a live event, replayed only when the event can change it.

    `recorded` is the candidate whose evaluation this event follows (None: a step, a start or
    a cancel, which change no accepted candidate); `campaign` is the row as committed with it."""
    if campaign.best_node_id is None:
        return None
    accepted = (campaign.funnel or {}).get("accepted")
    shown = _BEST_RULES.get(campaign.pk)
    if (
        isinstance(accepted, int)
        and shown is not None
        and (shown.created_at, shown.best_node_id) == (campaign.created_at, campaign.best_node_id)
        and shown.rule.replayed
        and _best_rule_unchanged(shown, recorded, accepted)
    ):
        rule = shown.rule
    else:
        rule = campaign_best_rule(campaign=campaign)
    if rule is None or not isinstance(accepted, int):
        return rule
    now = _BestRuleShown(campaign.created_at, campaign.best_node_id, accepted, rule)

    def keep() -> None:
        with _BEST_RULES_LOCK:
            _BEST_RULES[campaign.pk] = now
            _BEST_RULES.move_to_end(campaign.pk)
            while len(_BEST_RULES) > _BEST_RULES_KEPT:
                _BEST_RULES.popitem(last=False)

    transaction.on_commit(keep)
    return rule


def campaign_changed(campaign: Campaign, *, recorded: Node | None = None) -> None:
    """Progress, funnel and status of a campaign changed (its page and the list follow);
    `recorded`: the candidate whose evaluation changed it, if one did.

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
        "best_rule": _best_rule_for_event(campaign=campaign, recorded=recorded),
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
