"""Writes of the registry: freeze and sign artifacts, approve, promote, abort, roll back,
re-run correctness, ingest runtime reports, raise alarms, issue the signed manifest."""

from apps.registry.services.alarms import alarm_raise, alarm_resolve
from apps.registry.services.artifacts import artifact_create, artifact_narrow
from apps.registry.services.common import RegistryError
from apps.registry.services.model_check import artifact_model_check
from apps.registry.services.promotion import (
    PromotionBlocked,
    artifact_abort,
    artifact_approve,
    artifact_promote,
    artifact_recheck,
    region_rollback,
)
from apps.registry.services.runtime import manifest_issue, runtime_report_ingest

__all__ = [
    "PromotionBlocked",
    "RegistryError",
    "alarm_raise",
    "alarm_resolve",
    "artifact_abort",
    "artifact_approve",
    "artifact_create",
    "artifact_model_check",
    "artifact_narrow",
    "artifact_promote",
    "artifact_recheck",
    "manifest_issue",
    "region_rollback",
    "runtime_report_ingest",
]
