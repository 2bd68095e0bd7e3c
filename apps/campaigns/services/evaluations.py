"""Recording an evaluation report: gate results, measurements and the node's verdict.

A report arrives as the plain JSON a worker sent (`EvaluationReport.to_dict()`); it is read
once as the compute core's typed `workers.report.EvaluationReport` (its gates and cases as
`GateResult`, `Case` and `Timing`), which become the node's fields and its gate and
measurement rows (a malformed one raises `MalformedReport`, naming the field). The JSON itself
is kept on the node as it came.
"""

from django.db import transaction
from django.utils import timezone

from apps.campaigns.constants import NodeStatus
from apps.campaigns.models import GateResult as GateRow
from apps.campaigns.models import Measurement, Node
from workers.report import EvaluationReport, Timing


def _timing(timing: Timing | None) -> dict:
    if timing is None:
        timing = Timing(median_ms=None)
    low, high = timing.ci95_ms or (None, None)
    return {
        "median_ms": timing.median_ms,
        "p10_ms": timing.p10_ms,
        "p90_ms": timing.p90_ms,
        "ci_low_ms": low,
        "ci_high_ms": high,
        "samples_ms": list(timing.samples_ms),
    }


def node_record_evidence(*, node: Node, report: dict) -> None:
    """Keep a report the search engine has just recorded on its node (through the campaign's
    graph store, which wrote the verdict, fitness and times): the report itself, its gate
    results and its measured cases."""
    node.report = report
    node.evaluated_at = timezone.now()
    node.save(update_fields=["report", "evaluated_at"])
    _store_evidence(node, EvaluationReport.from_dict(report))


@transaction.atomic
def node_record_report(*, node: Node, report: dict) -> bool:
    """Store a report on a node outside a search (an imported campaign's nodes) once; False
    when the node already has its result. A searched campaign's reports go through the engine
    (`services.search.evaluation_record`)."""
    node = Node.objects.select_for_update().get(pk=node.pk)
    # A cancelled node keeps its status whatever comes back (node_record_late_report).
    if node.status in (NodeStatus.ACCEPTED, NodeStatus.REJECTED, NodeStatus.CANCELLED):
        return False
    typed = EvaluationReport.from_dict(report)
    fitness = typed.fitness or {}
    ci = fitness.get("ci95") or [None, None]
    node.status = NodeStatus.ACCEPTED if typed.accepted else NodeStatus.REJECTED
    node.failed_gate = typed.failed_gate or ""
    node.reason = typed.reason or ""
    node.fitness = fitness.get("speedup")
    node.fitness_ci_low, node.fitness_ci_high = ci[0], ci[1]
    node.fitness_detail = typed.fitness
    node.device_seconds = float(typed.device_s or 0.0)
    node.wall_seconds = float(typed.wall_s or 0.0)
    node.report = report
    node.evaluated_at = timezone.now()
    node.save()
    _store_evidence(node, typed)
    return True


@transaction.atomic
def node_record_late_report(*, node: Node, report: dict) -> bool:
    """Keep a report that arrived after its node was cancelled, as evidence only.

    The device time was spent, so the report, its gates, cases and device-seconds are stored;
    the node stays cancelled with the verdict in its reason, and has no fitness or evaluation
    time, so no count, chart or best ever takes it up. False when one is stored already.
    """
    node = Node.objects.select_for_update().get(pk=node.pk)
    if node.status != NodeStatus.CANCELLED or node.report is not None:
        return False
    typed = EvaluationReport.from_dict(report)
    verdict = typed.verdict or "no verdict"
    if typed.failed_gate:
        verdict += f" at {typed.failed_gate}"
    node.reason = (
        f"{node.reason} Its result arrived after it was cancelled ({verdict}); it is kept "
        "here as evidence and not counted."
    ).strip()
    node.device_seconds = float(typed.device_s or 0.0)
    node.wall_seconds = float(typed.wall_s or 0.0)
    node.report = report
    node.save(update_fields=["reason", "device_seconds", "wall_seconds", "report"])
    _store_evidence(node, typed)
    return True


def _store_evidence(node: Node, report: EvaluationReport) -> None:
    gates, cases = report.gates, report.cases
    GateRow.objects.bulk_create(
        GateRow(
            node=node,
            order=order,
            name=gate.name,
            status=gate.status,
            reason=gate.reason,
            rule=gate.rule or "",
            evidence=gate.evidence,
            wall_seconds=gate.wall_s,
            device_seconds=gate.device_s,
        )
        for order, gate in enumerate(gates)
    )
    Measurement.objects.bulk_create(
        Measurement(
            node=node,
            case=case.name,
            kind=case.kind,
            weight=case.weight,
            status=case.status,
            skip_reason=case.skip_reason or "",
            max_abs_err=case.max_abs_err,
            max_rel_err=case.max_rel_err,
            baselines={name: timing.to_dict() for name, timing in case.baselines.items()},
            **_timing(case.timing),
        )
        for case in cases
    )
