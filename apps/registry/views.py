"""Pages of the registry: index (operators, coverage matrix, alarms, freezable candidates), the
freeze list (every frozen kernel, sorted and filtered), operator (what serves per region,
metrics, latency, history, rollback) and the promotion page of an artifact. Plain form posts;
each action calls one service."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View

from apps.accounts.permissions import PortalPermissionRequiredMixin, has_portal_permission
from apps.campaigns.models import Node
from apps.campaigns.views import _headers as sort_headers
from apps.registry import selectors, services, signing
from apps.registry.constants import NEXT_STAGE, Stage
from apps.registry.figures import latency_figure
from apps.registry.forms import (
    FreezeListFilterForm,
    NarrowForm,
    PromoteForm,
    ReasonForm,
    RollbackForm,
)
from apps.registry.models import Alarm, Artifact, Region
from apps.registry.selectors.freeze_list import (
    FREEZE_LIST_SIZE,
    artifact_freeze_list,
    freeze_list_operators,
    freeze_list_sort,
)
from apps.registry.selectors.model_check import (
    model_check_covers,
    model_check_for,
    model_check_rows,
)


def _refusal(request, exc) -> None:
    messages.error(request, " ".join(getattr(exc, "messages", None) or [str(exc)]))


def _form_problems(form) -> str:
    labels = {"canary_percent": "Canary percentage"}
    return "; ".join(
        f"{labels.get(field, field)}: {' '.join(errors)}" for field, errors in form.errors.items()
    )


class IndexView(PortalPermissionRequiredMixin, View):
    def get(self, request):
        return render(
            request,
            "registry/index.html",
            {
                "operators": selectors.operator_list(),
                "matrix": selectors.coverage_matrix(),
                "alarms": selectors.alarm_open_list()[:50],
                "freezable": selectors.accepted_nodes_unfrozen(),
                "key_id": signing.key_id(),
            },
        )


FREEZE_LIST_COLUMNS = [
    ("Artifact", None),
    ("Operator", "operator"),
    ("Platform", "platform"),
    ("Region", None),
    ("Stage", None),
    ("Fitness", "fitness"),
    ("Frozen from", None),
    ("Frozen", "date"),
    ("By", None),
]


class FreezeListView(PortalPermissionRequiredMixin, View):
    """Every frozen kernel, whatever its stage: sortable by fitness, date, operator and platform
    from the column headers, filtered by operator, platform and stage (all in the URL)."""

    def get(self, request):
        filters = FreezeListFilterForm(request.GET)
        filters.is_valid()
        params = {k: v for k, v in filters.cleaned_data.items() if v}
        query = request.GET.copy()
        query.pop("page", None)
        page = Paginator(artifact_freeze_list(**params), FREEZE_LIST_SIZE).get_page(
            request.GET.get("page")
        )
        context = {
            "filters": filters,
            "operators": freeze_list_operators(),
            "page": page,
            "rows": page.object_list,
            "query": query.urlencode(),
            "filtered": any(params.get(k) for k in ("operator", "platform", "stage")),
            "headers": sort_headers(
                query, freeze_list_sort(params.get("sort", "")), FREEZE_LIST_COLUMNS
            ),
        }
        return render(request, "registry/freeze_list.html", context)


class OperatorView(PortalPermissionRequiredMixin, View):
    def get(self, request, operator: str):
        regions = list(selectors.region_list(operator=operator))
        if not regions:
            return render(request, "registry/operator.html", {"operator": operator}, status=404)
        cards = []
        for region in regions:
            metrics = selectors.region_metrics(region=region)
            # The page shows ids, digests and stages: not the body or the IR (~100 kB each).
            artifacts = region.artifacts.defer("ir", "body")
            staged = {a.stage: a for a in artifacts.exclude(stage=Stage.ABORTED)}
            cards.append(
                {
                    "region": region,
                    "default": region.default_artifact,
                    "canary": staged.get(Stage.CANARY),
                    "shadow": staged.get(Stage.SHADOW),
                    "candidates": artifacts.filter(stage=Stage.CANDIDATE),
                    "metrics": metrics,
                    "figure": latency_figure(metrics["latency"]),
                    "figure_id": f"figure-latency-{region.pk}",
                    "events": selectors.region_events(region=region, limit=50),
                    "previous": selectors.previous_default(region=region),
                    "targets": selectors.rollback_targets(region=region),
                    "alarms": selectors.alarm_open_list(region=region),
                }
            )
        return render(
            request,
            "registry/operator.html",
            {
                "operator": operator,
                "cards": cards,
                "unrouted": selectors.operator_fallbacks(operator=operator),
                "alarms": selectors.alarm_open_list(operator=operator),
                "can_rollback": has_portal_permission(request.user, "rollback_artifact"),
            },
        )


class ArtifactView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int):
        artifact = get_object_or_404(selectors.artifact_list(), pk=pk)
        target = NEXT_STAGE.get(artifact.stage)
        approvals = list(artifact.approvals.select_related("user").order_by("created_at"))
        current = {a.pk for a in selectors.current_approvals(artifact=artifact, stage=target)}
        author = artifact.campaign.created_by
        return render(
            request,
            "registry/artifact.html",
            {
                "artifact": artifact,
                "target": target,
                "gates": selectors.artifact_gates(artifact=artifact),
                "binaries": selectors.artifact_binaries(artifact=artifact),
                "approvals": [(a, a.pk in current) for a in approvals],
                "needed": selectors.approvals_needed(artifact=artifact, stage=target)
                if target
                else 0,
                "have": len(current),
                "is_author": author is not None and author.pk == request.user.pk,
                # Approved already by this user for the next stage: the button gives way to that.
                "approved_by_me": next(
                    (a for a in approvals if a.stage == target and a.user_id == request.user.pk),
                    None,
                ),
                "can_approve": has_portal_permission(request.user, "approve_promotion"),
                "can_create": has_portal_permission(request.user, "create_artifact"),
                "events": artifact.events.order_by("-id")[:50],
                "model_check": model_check_rows(model_check_for(artifact=artifact))
                if model_check_covers(artifact=artifact)
                else None,
                "under_compile": selectors.artifact_under_compile(artifact=artifact),
                "promote_form": PromoteForm(),
                "narrow_form": NarrowForm(initial={"dtypes": artifact.scope.get("dtypes")}),
            },
        )


class ArtifactCreateView(PortalPermissionRequiredMixin, View):
    portal_permission = "create_artifact"

    def post(self, request):
        node = get_object_or_404(Node, pk=request.POST.get("node"))
        try:
            artifact = services.artifact_create(node=node, by=request.user)
        except (ValidationError, PermissionDenied) as exc:
            _refusal(request, exc)
            return redirect("registry:index")
        messages.success(request, f"Frozen and signed as artifact #{artifact.pk}.")
        return redirect("registry:artifact", pk=artifact.pk)


class ArtifactActionView(PortalPermissionRequiredMixin, View):
    portal_permission = "approve_promotion"

    def post(self, request, pk: int, action: str):
        artifact = get_object_or_404(Artifact, pk=pk)
        form = (PromoteForm if action == "promote" else ReasonForm)(request.POST)
        if not form.is_valid():
            # Say what was wrong and do nothing: an unreadable k% must never promote at 10%.
            messages.error(request, _form_problems(form))
            return redirect("registry:artifact", pk=pk)
        reason = form.cleaned_data.get("reason", "")
        try:
            if action == "approve":
                services.artifact_approve(artifact=artifact, by=request.user, reason=reason)
                messages.success(request, "Approved.")
            elif action == "promote":
                done = services.artifact_promote(
                    artifact=artifact,
                    by=request.user,
                    reason=reason,
                    canary_percent=form.cleaned_data.get("canary_percent"),
                )
                messages.success(request, f"Promoted to {done.stage}.")
            elif action == "abort":
                services.artifact_abort(artifact=artifact, by=request.user, reason=reason)
                messages.success(request, "Aborted.")
            elif action == "model-check":
                check = services.artifact_model_check(
                    artifact=artifact, by=request.user, force=True
                )
                messages.info(request, check.reason if check else "No model covers this operator.")
            elif action == "recheck":
                check = services.artifact_recheck(artifact=artifact, by=request.user)
                messages.info(request, check.reason if check else "Toolchains agree: no re-run.")
            else:
                messages.error(request, f"unknown action {action!r}")
        except (ValidationError, PermissionDenied) as exc:
            _refusal(request, exc)
        return redirect("registry:artifact", pk=pk)


class ArtifactNarrowView(PortalPermissionRequiredMixin, View):
    portal_permission = "create_artifact"

    def post(self, request, pk: int):
        artifact = get_object_or_404(Artifact, pk=pk)
        form = NarrowForm(request.POST)
        form.is_valid()
        try:
            new = services.artifact_narrow(
                artifact=artifact, by=request.user, dtypes=form.cleaned_data.get("dtypes") or None
            )
        except (ValidationError, PermissionDenied) as exc:
            _refusal(request, exc)
            return redirect("registry:artifact", pk=pk)
        messages.success(request, f"Narrowed: new artifact #{new.pk} (approvals start over).")
        return redirect("registry:artifact", pk=new.pk)


class RegionRollbackView(PortalPermissionRequiredMixin, View):
    portal_permission = "rollback_artifact"

    def post(self, request, pk: int):
        region = get_object_or_404(Region, pk=pk)
        form = RollbackForm(request.POST)
        if not form.is_valid():
            messages.error(request, "Say why you roll back (reason).")
            return redirect("registry:operator", operator=region.operator)
        target = form.cleaned_data["target"] or "previous"
        to = None
        if target.isdigit():
            to = get_object_or_404(Artifact, pk=int(target), region=region)
        try:
            region = services.region_rollback(
                region=region,
                by=request.user,
                reason=form.cleaned_data["reason"],
                to=to,
                to_reference=target == "reference",
            )
        except (ValidationError, PermissionDenied) as exc:
            _refusal(request, exc)
        else:
            now = region.default_artifact
            label = f"#{now.pk} {now.short}" if now else "the PyTorch reference"
            messages.success(request, f"Rolled back: default is now {label}.")
        return redirect("registry:operator", operator=region.operator)


class AlarmResolveView(PortalPermissionRequiredMixin, View):
    portal_permission = "approve_promotion"

    def post(self, request, pk: int):
        alarm = get_object_or_404(Alarm, pk=pk)
        services.alarm_resolve(alarm=alarm, by=request.user)
        return redirect(request.POST.get("next") or "registry:index")
