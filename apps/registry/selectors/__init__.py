"""Reads of the registry: regions and artifacts, gate states, the signed manifest, runtime
metrics (coverage, mismatches, latency), the coverage matrix and alarms."""

from apps.registry.selectors.binaries import artifact_binaries
from apps.registry.selectors.gates import (
    GateState,
    approvals_needed,
    artifact_gates,
    current_approvals,
    runtime_toolchain,
    toolchain_key,
    toolchain_of,
)
from apps.registry.selectors.manifest import manifest_build
from apps.registry.selectors.metrics import (
    coverage_matrix,
    operator_fallbacks,
    region_metrics,
    shadow_stats,
)
from apps.registry.selectors.registry import (
    accepted_nodes_unfrozen,
    alarm_open_list,
    artifact_get,
    artifact_list,
    operator_list,
    previous_default,
    region_events,
    region_list,
    rollback_targets,
)
from apps.registry.selectors.under_compile import (
    UnderCompile,
    artifact_beats_compile,
    artifact_under_compile,
)

__all__ = [
    "GateState",
    "UnderCompile",
    "accepted_nodes_unfrozen",
    "alarm_open_list",
    "approvals_needed",
    "artifact_beats_compile",
    "artifact_binaries",
    "artifact_gates",
    "artifact_get",
    "artifact_list",
    "artifact_under_compile",
    "coverage_matrix",
    "current_approvals",
    "manifest_build",
    "operator_fallbacks",
    "operator_list",
    "previous_default",
    "region_events",
    "region_list",
    "region_metrics",
    "rollback_targets",
    "runtime_toolchain",
    "shadow_stats",
    "toolchain_key",
    "toolchain_of",
]
