"""Helpers the registry services share: permission guards, events, live notifications."""

from celery import current_app
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from apps.accounts.permissions import denial_message, has_portal_permission
from apps.campaigns.constants import eval_queue
from apps.registry.constants import GateStatus
from apps.registry.consumers import registry_group
from apps.registry.models import Event
from kernelevolve_site.events import send_event_on_commit


class RegistryError(ValidationError):
    """A refused registry action; the message says why (the API answers 400/409 with it)."""


def require(user, codename: str) -> None:
    if not has_portal_permission(user, codename):
        raise PermissionDenied(denial_message(codename))


def event_add(
    *, region, kind, actor=None, artifact=None, from_stage="", to_stage="", from_artifact="",
    to_artifact="", reason="", evidence=None,
) -> Event:  # fmt: skip
    event = Event.objects.create(
        region=region,
        artifact=artifact,
        kind=kind,
        actor=actor,
        actor_name=actor.username if actor is not None else "system",
        from_stage=from_stage or "",
        to_stage=to_stage or "",
        from_artifact=from_artifact or "",
        to_artifact=to_artifact or "",
        reason=reason or "",
        evidence=evidence or {},
    )
    notify_region(region, kind=kind, event=event.pk)
    return event


def notify_region(region, *, kind: str, **data) -> None:
    """After commit: the operator's live pages re-fetch (a transition, a re-run's result)."""
    send_event_on_commit(
        registry_group(region.operator),
        "registry.changed",
        data={"region": region.pk, "kind": kind, **data},
    )


def check_send(check, *, task: str, request: dict, platform: str, what: str, now) -> None:
    """Send a gate check's run to the platform's evaluation queue (after commit) and say so on
    the check: inconclusive until a worker answers, where it went, when, how many times."""
    queue = eval_queue(platform)
    check.status = GateStatus.INCONCLUSIVE
    check.queue = queue
    check.dispatched_at = now
    check.dispatch_count += 1
    check.reason = (
        f"{what} sent to {queue} at {now:%Y-%m-%d %H:%M:%S} UTC; waiting for a {platform} worker"
        + (f" (sent {check.dispatch_count} times)" if check.dispatch_count > 1 else "")
    )
    check.save()
    check_id = check.pk
    transaction.on_commit(
        lambda: current_app.send_task(task, args=[check_id, request], queue=queue)
    )
