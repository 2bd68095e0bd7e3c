"""Celery tasks of the registry's control side. Tasks take ids and plain data and call a service."""

from celery import shared_task

from workers.contract.tasks import RECORD_MODEL_CHECK_TASK, RECORD_RECHECK_TASK


@shared_task(name=RECORD_RECHECK_TASK, acks_late=True, soft_time_limit=60, time_limit=90)
def record_recheck(check_id: int, report: dict) -> bool:
    from apps.registry.services.promotion import artifact_recheck_record

    return artifact_recheck_record(check_id=check_id, report=report)


@shared_task(name=RECORD_MODEL_CHECK_TASK, acks_late=True, soft_time_limit=60, time_limit=90)
def record_model_check(check_id: int, report: dict) -> bool:
    from apps.registry.services.promotion import artifact_model_check_record

    return artifact_model_check_record(check_id=check_id, report=report)
