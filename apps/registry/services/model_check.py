"""The model check gate's dispatch: send a check to a worker of the artifact's platform (its
result is kept by ``promotion.artifact_model_check_record``). The check runs the decoder stock
vs patched with the artifact's kernel (``workers.runtime.model_check``) behind the sandbox on an
evaluation worker, never in this web process; a default promotion of a covered operator waits
for it and a failed one aborts the artifact."""

from django.db import transaction
from django.utils import timezone

from apps.registry.constants import ABORTABLE, MODEL_CHECK_RESEND_S, Gate, GateStatus
from apps.registry.models import Artifact, GateCheck
from apps.registry.selectors.model_check import (
    model_check_covers,
    model_check_key,
    model_check_request,
)
from apps.registry.services.common import RegistryError, check_send
from workers.contract.tasks import MODEL_CHECK_TASK


def artifact_model_check(*, artifact: Artifact, by=None, force: bool = False) -> GateCheck | None:
    """Send the model check of ``artifact`` (as it would serve now) to its platform's queue.

    None when the operator is not one the decoder uses; the existing check when one for the
    same kernels and config has a result or is still in flight (``force`` sends a finished
    one again as a new check)."""
    if not model_check_covers(artifact=artifact):
        return None
    if artifact.stage not in ABORTABLE:
        raise RegistryError(f"artifact #{artifact.pk} is {artifact.stage}: no model check")
    request = model_check_request(artifact=artifact)
    key = model_check_key(request)
    now = timezone.now()
    with transaction.atomic():
        check = (
            GateCheck.objects.select_for_update()
            .filter(artifact=artifact, gate=Gate.MODEL, toolchain_key=key)
            .order_by("-id")
            .first()
        )
        if check is not None and check.status != GateStatus.INCONCLUSIVE and not force:
            return check
        recent = (
            check is not None
            and check.status == GateStatus.INCONCLUSIVE
            and check.dispatched_at
            and (now - check.dispatched_at).total_seconds() < MODEL_CHECK_RESEND_S
        )
        if recent:
            return check
        if check is None or check.status != GateStatus.INCONCLUSIVE:
            check = GateCheck(artifact=artifact, gate=Gate.MODEL, toolchain_key=key)
        _dispatch(check, request, now)
    return check


def _dispatch(check: GateCheck, request: dict, now) -> None:
    what = f"model check ({request['config']} decoder, {request['dtype']})"
    check_send(
        check, task=MODEL_CHECK_TASK, request=request, platform=request["platform"], what=what,
        now=now,
    )  # fmt: skip
