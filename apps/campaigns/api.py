"""REST API for campaigns: problems (uploads checked in the sandbox), campaigns, actions, the
graph in pages, charts, exports, nodes, comments, reviews, compare, inbox and portfolio. Every
portal page action is here too. Writes go through services."""

import csv
import difflib
import io

from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.permissions import ReadPortal, portal_permission
from apps.campaigns import charts, selectors
from apps.campaigns.models import Campaign, Comment, Node
from apps.campaigns.selectors import suites as suite_selectors
from apps.campaigns.serializers import (
    CampaignActionSerializer,
    CampaignChartsSerializer,
    CampaignCreateSerializer,
    CampaignSerializer,
    CampaignUploadSerializer,
    CommentEditSerializer,
    CommentResolveSerializer,
    CommentSerializer,
    CompareSerializer,
    ContinueSerializer,
    ExportRowSerializer,
    GraphPageSerializer,
    InboxSerializer,
    NodeDetailSerializer,
    NodeReviewDecisionSerializer,
    NodeReviewSerializer,
    NodeSerializer,
    PortfolioRowSerializer,
    ProblemSerializer,
    ProblemUploadSerializer,
    SuiteRunDetailSerializer,
    SuiteRunImportSerializer,
    SuiteRunSerializer,
    WorkloadPreviewResultSerializer,
    WorkloadPreviewSerializer,
)
from apps.campaigns.services import campaigns as campaign_services
from apps.campaigns.services import comments as comment_services
from apps.campaigns.services import review as review_services
from apps.campaigns.services import suites as suite_services
from apps.campaigns.services.problems import (
    problem_reference_check,
    problem_upload,
    workload_check,
    workload_from_upload,
)
from kernelevolve_site.api import service_call

AuthorCampaign = portal_permission("author_campaign")
ControlCampaign = portal_permission("control_campaign")
CommentCandidate = portal_permission("comment_candidate")


class WriteNeeds:
    """GET needs the read permission; writes need `write_permission`."""

    write_permission = AuthorCampaign

    def get_permissions(self):
        if self.request.method in ("GET", "HEAD", "OPTIONS"):
            return [ReadPortal()]
        return [ReadPortal(), self.write_permission()]


class ProblemListApi(WriteNeeds, generics.ListAPIView):
    serializer_class = ProblemSerializer

    def get_queryset(self):
        return selectors.problem_list()

    @extend_schema(
        request=ProblemUploadSerializer,
        responses={201: ProblemSerializer},
        description="Upload a KernelBench-format problem with a workload or a trace; the "
        "reference imports and runs its heaviest case in the sandbox before anything is saved.",
    )
    def post(self, request):
        payload = ProblemUploadSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        workload, field = _upload_workload(data.pop("workload", None), data.pop("trace", ""))
        problem = service_call(
            problem_upload,
            created_by=request.user,
            workload=workload,
            workload_field=field,
            **data,
        )
        return Response(ProblemSerializer(problem).data, status=status.HTTP_201_CREATED)


def _upload_workload(workload, trace: str) -> tuple[dict | None, str]:
    """A workload from a JSON object or trace text; errors name `workload` or `trace`."""
    if trace:
        wl = service_call(workload_from_upload, trace_text=trace, trace_field="trace")
        return wl, "trace"
    return service_call(workload_check, workload=workload), "workload"


class WorkloadPreviewApi(APIView):
    """What the author page shows before saving: the cases and weights, the bar chart, and the
    reference's run in the sandbox (when a source is given)."""

    permission_classes = [ReadPortal, AuthorCampaign]

    @extend_schema(request=WorkloadPreviewSerializer, responses=WorkloadPreviewResultSerializer)
    def post(self, request):
        payload = WorkloadPreviewSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        workload, field = _upload_workload(data.get("workload"), data.get("trace", ""))
        checked = None
        if data.get("source"):
            checked = service_call(
                problem_reference_check,
                source=data["source"],
                workload=workload,
                workload_field=field,
            )
        cases = (workload or {}).get("cases") or [
            {"name": "default", "overrides": {}, "dtype": None, "weight": 1.0}
        ]
        total = sum(float(c.get("weight") or 0) for c in cases) or 1.0
        return Response(
            {
                "workload": workload,
                "cases": [{**c, "share": float(c.get("weight") or 0) / total} for c in cases],
                "figure": charts.weights_figure(cases),
                "reference_check": checked,
            }
        )


LIST_PARAMS = [
    OpenApiParameter("status", str, description="queued, running, paused, ..."),
    OpenApiParameter("platform", str, description="interpret or cuda"),
    OpenApiParameter("outcome", str, description="an outcome, or `none` for none yet"),
    OpenApiParameter("problem", str, description="problem name"),
    OpenApiParameter("q", str, description="search in name, problem and family"),
    OpenApiParameter(
        "sort",
        str,
        description=f"one of {', '.join(selectors.CAMPAIGN_SORTS)}; prefix '-' to reverse",
    ),
]


class CampaignListApi(WriteNeeds, generics.ListAPIView):
    serializer_class = CampaignSerializer

    def get_queryset(self):
        params = {
            k: self.request.query_params[k]
            for k in ("status", "platform", "outcome", "problem", "q", "sort")
            if self.request.query_params.get(k)
        }
        return selectors.campaign_search(**params)

    @extend_schema(parameters=LIST_PARAMS)
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(request=CampaignCreateSerializer, responses={201: CampaignSerializer})
    def post(self, request):
        payload = CampaignCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        campaign = service_call(
            campaign_services.campaign_create, created_by=request.user, **payload.validated_data
        )
        return Response(CampaignSerializer(campaign).data, status=status.HTTP_201_CREATED)


class CampaignDetailApi(generics.RetrieveAPIView):
    permission_classes = [ReadPortal]
    serializer_class = CampaignSerializer

    def get_queryset(self):
        return selectors.campaign_list()


ACTIONS = {
    "pause": campaign_services.campaign_pause,
    "resume": campaign_services.campaign_resume,
    "cancel": campaign_services.campaign_cancel,
}


class CampaignActionApi(APIView):
    permission_classes = [ReadPortal, ControlCampaign]

    @extend_schema(request=CampaignActionSerializer, responses=CampaignSerializer)
    def post(self, request, pk: int):
        payload = CampaignActionSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        action = payload.validated_data["action"]
        campaign = get_object_or_404(selectors.campaigns_for_reading(), pk=pk)
        kwargs = {"by": request.user} if action == "cancel" else {}
        campaign = service_call(ACTIONS[action], campaign=campaign, **kwargs)
        return Response(CampaignSerializer(selectors.campaign_get(pk=campaign.pk)).data)


class NodeListApi(generics.ListAPIView):
    permission_classes = [ReadPortal]
    serializer_class = NodeSerializer

    def get_queryset(self):
        campaign = get_object_or_404(selectors.campaigns_for_reading(), pk=self.kwargs["pk"])
        return selectors.campaign_nodes_with_parents(campaign=campaign)


class NodeDetailApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(responses=NodeDetailSerializer)
    def get(self, request, pk: int, key: str):
        return Response(NodeDetailSerializer(selectors.node_get(campaign_id=pk, key=key)).data)


class NodeContinueApi(APIView):
    permission_classes = [ReadPortal, ControlCampaign]

    @extend_schema(request=ContinueSerializer, responses={201: CampaignSerializer})
    def post(self, request, pk: int, key: str):
        payload = ContinueSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        node = selectors.node_get(campaign_id=pk, key=key)
        campaign = service_call(
            campaign_services.campaign_continue_from_node,
            node=node,
            created_by=request.user,
            **payload.validated_data,
        )
        return Response(CampaignSerializer(campaign).data, status=status.HTTP_201_CREATED)


class CampaignUploadApi(APIView):
    """Author a campaign on an uploaded problem (the page's upload path)."""

    permission_classes = [ReadPortal, AuthorCampaign]

    @extend_schema(request=CampaignUploadSerializer, responses={201: CampaignSerializer})
    def post(self, request):
        payload = CampaignUploadSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = dict(payload.validated_data)
        workload, field = _upload_workload(data.pop("workload", None), data.pop("trace", ""))
        campaign = service_call(
            campaign_services.campaign_create_from_upload,
            created_by=request.user,
            problem_name=data.pop("problem_name"),
            problem_source=data.pop("problem_source"),
            workload=workload,
            workload_field=field,
            **data,
        )
        return Response(CampaignSerializer(campaign).data, status=status.HTTP_201_CREATED)


class CampaignGraphApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(
        parameters=[OpenApiParameter("after", int, description="cursor from the previous page")],
        responses=GraphPageSerializer,
        description="One page of the search graph as a Plotly figure, laid out over the whole "
        "graph (each page carries its parents' coordinates); pages merge trace by trace (same "
        "trace order on every page).",
    )
    def get(self, request, pk: int):
        campaign = get_object_or_404(Campaign.objects.only("id", "best_node"), pk=pk)
        try:
            after = int(request.query_params.get("after") or 0)
        except ValueError as exc:
            raise ValidationError({"after": "an integer cursor"}) from exc
        return Response(selectors.campaign_graph_page(campaign=campaign, after=after))


class CampaignChartsApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(responses=CampaignChartsSerializer)
    def get(self, request, pk: int):
        campaign = get_object_or_404(selectors.campaigns_for_reading(), pk=pk)
        return Response(selectors.campaign_charts(campaign=campaign))


class CampaignExportApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(
        parameters=[OpenApiParameter("as", str, enum=["json", "csv"], description="default json")],
        responses={
            (200, "application/json"): ExportRowSerializer(many=True),
            (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
        },
        description="A campaign's nodes with their per-case measurements, one row per case.",
    )
    def get(self, request, pk: int):
        campaign = get_object_or_404(selectors.campaigns_for_reading(), pk=pk)
        rows = selectors.campaign_export_rows(campaign=campaign)
        if request.query_params.get("as") == "csv":
            out = io.StringIO()
            writer = csv.DictWriter(out, fieldnames=list(rows[0]) if rows else ["node"])
            writer.writeheader()
            writer.writerows(rows)
            return HttpResponse(out.getvalue(), content_type="text/csv")
        return Response(rows)


def _node(pk: int, key: str) -> Node:
    return get_object_or_404(Node.objects.defer("report"), campaign_id=pk, key=key)


class NodeCommentListApi(generics.ListAPIView):
    serializer_class = CommentSerializer

    def get_permissions(self):
        if self.request.method == "POST":
            return [ReadPortal(), CommentCandidate()]
        return [ReadPortal()]

    def get_queryset(self):
        return selectors.node_comments(node=_node(self.kwargs["pk"], self.kwargs["key"]))

    @extend_schema(request=CommentSerializer, responses={201: CommentSerializer})
    def post(self, request, pk: int, key: str):
        payload = CommentSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        comment = service_call(
            comment_services.comment_create,
            node=_node(pk, key),
            author=request.user,
            **payload.validated_data,
        )
        return Response(CommentSerializer(comment).data, status=status.HTTP_201_CREATED)


def _comment(pk: int, key: str, comment_id: int) -> Comment:
    return get_object_or_404(
        Comment.objects.select_related("author", "resolved_by", "node"),
        pk=comment_id,
        node__campaign_id=pk,
        node__key=key,
    )


class NodeCommentApi(APIView):
    """One comment: read it; edit or delete it (its author or an admin)."""

    def get_permissions(self):
        if self.request.method in ("PATCH", "DELETE"):
            return [ReadPortal(), CommentCandidate()]
        return [ReadPortal()]

    @extend_schema(responses=CommentSerializer)
    def get(self, request, pk: int, key: str, comment_id: int):
        return Response(CommentSerializer(_comment(pk, key, comment_id)).data)

    @extend_schema(request=CommentEditSerializer, responses=CommentSerializer)
    def patch(self, request, pk: int, key: str, comment_id: int):
        payload = CommentEditSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        comment = service_call(
            comment_services.comment_edit,
            comment=_comment(pk, key, comment_id),
            by=request.user,
            body=payload.validated_data["body"],
        )
        return Response(CommentSerializer(comment).data)

    @extend_schema(request=None, responses={204: None})
    def delete(self, request, pk: int, key: str, comment_id: int):
        service_call(
            comment_services.comment_delete,
            comment=_comment(pk, key, comment_id),
            by=request.user,
        )
        return Response(status=status.HTTP_204_NO_CONTENT)


class NodeCommentResolveApi(APIView):
    """Resolve a comment's thread (or reopen it with `resolved: false`)."""

    permission_classes = [ReadPortal, CommentCandidate]

    @extend_schema(request=CommentResolveSerializer, responses=CommentSerializer)
    def post(self, request, pk: int, key: str, comment_id: int):
        payload = CommentResolveSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        thread = service_call(
            comment_services.comment_resolve,
            comment=_comment(pk, key, comment_id),
            by=request.user,
            resolved=payload.validated_data["resolved"],
        )
        return Response(CommentSerializer(thread).data)


class NodeReviewApi(generics.ListAPIView):
    """A candidate's reviews, newest decision first. POST records yours, as the candidate page's
    review box does (same permission, same service): `approved`, or `changes_requested` with a
    comment saying what to change; a new decision replaces your last one. No decision only marks
    the candidate reviewed."""

    serializer_class = NodeReviewSerializer

    def get_permissions(self):
        if self.request.method == "POST":
            return [ReadPortal(), CommentCandidate()]
        return [ReadPortal()]

    def get_queryset(self):
        return selectors.node_review_decisions(node=_node(self.kwargs["pk"], self.kwargs["key"]))

    @extend_schema(request=NodeReviewDecisionSerializer, responses={201: NodeReviewSerializer})
    def post(self, request, pk: int, key: str):
        node = _node(pk, key)
        payload = NodeReviewDecisionSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        decision, body = payload.validated_data["decision"], payload.validated_data["body"]
        if decision:
            review = service_call(
                review_services.node_review_decide,
                node=node,
                reviewer=request.user,
                decision=decision,
                body=body,
            )
        else:
            review = service_call(
                comment_services.node_mark_reviewed, node=node, reviewer=request.user
            )
        return Response(NodeReviewSerializer(review).data, status=status.HTTP_201_CREATED)


class NodeCompareApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(
        parameters=[
            OpenApiParameter("a", str, required=True, description="left node key"),
            OpenApiParameter("b", str, required=True, description="right node key"),
        ],
        responses=CompareSerializer,
    )
    def get(self, request, pk: int):
        a, b = request.query_params.get("a", ""), request.query_params.get("b", "")
        try:
            result = selectors.candidate_compare(campaign_id=pk, left=a, right=b)
        except Node.DoesNotExist as exc:
            raise ValidationError({"detail": str(exc)}) from exc
        left, right = result["left"], result["right"]
        diff = "".join(
            difflib.unified_diff(
                left.source.splitlines(keepends=True),
                right.source.splitlines(keepends=True),
                fromfile=left.key,
                tofile=right.key,
            )
        )
        stats = result["diff"]["stats"]
        return Response(
            {
                "left": NodeSerializer(left).data,
                "right": NodeSerializer(right).data,
                "unified_diff": diff,
                "added": stats["added"],
                "removed": stats["removed"],
                "cases": [
                    {
                        "case": c["case"],
                        "left_median_ms": c["left"].median_ms,
                        "right_median_ms": c["right"].median_ms if c["right"] else None,
                    }
                    for c in result["cases"]
                ],
            }
        )


class InboxApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(responses=InboxSerializer)
    def get(self, request):
        return Response(InboxSerializer(selectors.inbox_for(user=request.user)).data)


class PortfolioApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(responses=PortfolioRowSerializer(many=True))
    def get(self, request):
        return Response(PortfolioRowSerializer(selectors.portfolio(), many=True).data)


class SuiteRunListApi(WriteNeeds, generics.ListAPIView):
    """Imported benchmark-suite runs with their counts; POST imports one."""

    serializer_class = SuiteRunSerializer

    def get_queryset(self):
        return suite_selectors.suite_run_list()

    @extend_schema(request=SuiteRunImportSerializer, responses={201: SuiteRunDetailSerializer})
    def post(self, request):
        payload = SuiteRunImportSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        run = service_call(
            suite_services.suite_run_import,
            doc=payload.validated_data["document"],
            name=payload.validated_data["name"],
            imported_by=request.user,
        )
        run = suite_selectors.suite_run_list().prefetch_related("results").get(pk=run.pk)
        return Response(SuiteRunDetailSerializer(run).data, status=status.HTTP_201_CREATED)


class SuiteRunDetailApi(generics.RetrieveAPIView):
    """One suite run with every problem's result."""

    permission_classes = [ReadPortal]
    serializer_class = SuiteRunDetailSerializer

    def get_queryset(self):
        return suite_selectors.suite_run_list().prefetch_related("results")
