"""Registry alarms: raised by promotion gates, runtime reports and the manifest; resolved by
an approver. Their own module, so every service that raises one imports it one way."""

from django.utils import timezone

from apps.registry.consumers import registry_group
from apps.registry.models import Alarm
from apps.registry.services.common import require
from kernelevolve_site.events import send_event_on_commit


def alarm_raise(
    *, kind: str, message: str, artifact=None, region=None, operator="", platform="", evidence=None
) -> Alarm:
    """Open an alarm unless the same kind is already open for the same artifact/region."""
    region = region or (artifact.region if artifact is not None else None)
    operator = operator or (region.operator if region else "")
    platform = platform or (region.platform if region else "")
    open_same = Alarm.objects.filter(
        kind=kind, artifact=artifact, region=region, operator=operator, resolved_at__isnull=True
    ).first()
    if open_same is not None:
        return open_same
    alarm = Alarm.objects.create(
        kind=kind,
        message=message,
        artifact=artifact,
        region=region,
        operator=operator,
        platform=platform,
        evidence=evidence or {},
    )
    send_event_on_commit(
        registry_group(operator), "registry.alarm", data={"alarm": alarm.pk, "kind": kind}
    )
    return alarm


def alarm_resolve(*, alarm: Alarm, by) -> Alarm:
    require(by, "approve_promotion")
    if alarm.resolved_at is None:
        alarm.resolved_at = timezone.now()
        alarm.resolved_by = by
        alarm.save(update_fields=["resolved_at", "resolved_by"])
    return alarm
