"""REST API of the registry: artifacts and their promotion, regions and rollback, the signed
manifest and public key for runtime clients, runtime reports, alarms. Writes go through
services; refusals answer 400 (409 when a gate blocked a promotion) with the reason."""

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.permissions import ReadPortal, portal_permission
from apps.campaigns.models import Node
from apps.registry import selectors, services, signing
from apps.registry import serializers as S
from apps.registry.constants import NEXT_STAGE
from apps.registry.models import Artifact, Region
from kernelevolve_site.api import service_call

CreateArtifact = portal_permission("create_artifact")
ApprovePromotion = portal_permission("approve_promotion")
RollbackArtifact = portal_permission("rollback_artifact")


def _call(fn, **kwargs):
    # A blocked promotion is answered by the view itself (409 with the gates' states).
    return service_call(fn, passthrough=(services.PromotionBlocked,), **kwargs)


def artifact_detail(artifact: Artifact) -> dict:
    """The artifact with its next promotion's gates and the approvals that still hold."""
    target = NEXT_STAGE.get(artifact.stage)
    approvals = selectors.current_approvals(artifact=artifact, stage=target) if target else []
    return {
        **S.ArtifactSerializer(artifact).data,
        "gates": [g.to_dict() for g in selectors.artifact_gates(artifact=artifact)],
        "approvals": S.ApprovalSerializer(approvals, many=True).data,
    }


class PublicKeyApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(responses=S.PublicKeySerializer)
    def get(self, request):
        return Response(
            {
                "algorithm": "Ed25519",
                "key_id": signing.key_id(),
                "public_key": signing.public_key_b64(),
                "public_key_pem": signing.public_key_pem(),
            }
        )


class ManifestApi(APIView):
    """The signed stage manifest of a platform; send If-None-Match to get 304 when unchanged."""

    permission_classes = [ReadPortal]

    @extend_schema(
        parameters=[OpenApiParameter("platform", str, default="interpret")],
        responses={200: S.ManifestSerializer, 304: None},
    )
    def get(self, request):
        platform = request.query_params.get("platform", "interpret")
        if platform not in ("interpret", "cuda"):
            raise ValidationError({"platform": "must be interpret or cuda"})
        manifest, etag = services.manifest_issue(platform=platform)
        if request.headers.get("If-None-Match") == etag:
            return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": etag})
        return Response(manifest, headers={"ETag": etag, "Cache-Control": "no-cache"})


class ArtifactListApi(generics.ListAPIView):
    serializer_class = S.ArtifactSerializer

    def get_permissions(self):
        if self.request.method == "POST":
            return [ReadPortal(), CreateArtifact()]
        return [ReadPortal()]

    def get_queryset(self):
        stage = self.request.query_params.get("stage")
        return selectors.artifact_list(stage=stage)

    @extend_schema(request=S.ArtifactCreateSerializer, responses={201: S.ArtifactDetailSerializer})
    def post(self, request):
        payload = S.ArtifactCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        node = get_object_or_404(Node, pk=data["node"])
        artifact = _call(
            services.artifact_create,
            node=node,
            by=request.user,
            dtypes=data.get("dtypes"),
            constants=data.get("constants"),
        )
        return Response(artifact_detail(artifact), status=status.HTTP_201_CREATED)


class ArtifactDetailApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(responses=S.ArtifactDetailSerializer)
    def get(self, request, pk: int):
        return Response(artifact_detail(get_object_or_404(selectors.artifact_list(), pk=pk)))


class _ArtifactAction(APIView):
    permission_classes = [ReadPortal, ApprovePromotion]
    request_serializer = S.ReasonSerializer

    def run(self, artifact, user, data):
        raise NotImplementedError

    def post(self, request, pk: int):
        artifact = get_object_or_404(Artifact, pk=pk)
        payload = self.request_serializer(data=request.data)
        payload.is_valid(raise_exception=True)
        try:
            _call(self.run, artifact=artifact, user=request.user, data=payload.validated_data)
        except services.PromotionBlocked as exc:
            body = {
                "detail": exc.messages[0],
                "status": exc.status,
                "gates": [g.to_dict() for g in exc.gates],
                "artifact": artifact_detail(Artifact.objects.get(pk=pk)),
            }
            return Response(body, status=status.HTTP_409_CONFLICT)
        return Response(artifact_detail(Artifact.objects.get(pk=pk)))


class ArtifactApproveApi(_ArtifactAction):
    @extend_schema(request=S.ReasonSerializer, responses=S.ArtifactDetailSerializer)
    def post(self, request, pk: int):
        return super().post(request, pk)

    def run(self, artifact, user, data):
        services.artifact_approve(artifact=artifact, by=user, reason=data["reason"])


class ArtifactPromoteApi(_ArtifactAction):
    request_serializer = S.PromoteSerializer

    @extend_schema(
        request=S.PromoteSerializer,
        responses={200: S.ArtifactDetailSerializer, 409: OpenApiTypes.OBJECT},
    )
    def post(self, request, pk: int):
        return super().post(request, pk)

    def run(self, artifact, user, data):
        services.artifact_promote(
            artifact=artifact,
            by=user,
            reason=data["reason"],
            canary_percent=data.get("canary_percent"),
        )


class ArtifactAbortApi(_ArtifactAction):
    @extend_schema(request=S.ReasonSerializer, responses=S.ArtifactDetailSerializer)
    def post(self, request, pk: int):
        return super().post(request, pk)

    def run(self, artifact, user, data):
        services.artifact_abort(artifact=artifact, by=user, reason=data["reason"])


class ArtifactRecheckApi(_ArtifactAction):
    @extend_schema(request=None, responses=S.ArtifactDetailSerializer)
    def post(self, request, pk: int):
        return super().post(request, pk)

    def run(self, artifact, user, data):
        services.artifact_recheck(artifact=artifact, by=user)


class ArtifactNarrowApi(APIView):
    permission_classes = [ReadPortal, CreateArtifact]

    @extend_schema(request=S.NarrowSerializer, responses={201: S.ArtifactDetailSerializer})
    def post(self, request, pk: int):
        artifact = get_object_or_404(Artifact, pk=pk)
        payload = S.NarrowSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        new = _call(
            services.artifact_narrow,
            artifact=artifact,
            by=request.user,
            dtypes=payload.validated_data.get("dtypes"),
            constants=payload.validated_data.get("constants"),
        )
        return Response(artifact_detail(new), status=status.HTTP_201_CREATED)


class RegionListApi(generics.ListAPIView):
    permission_classes = [ReadPortal]
    serializer_class = S.RegionSerializer

    def get_queryset(self):
        return selectors.region_list(
            operator=self.request.query_params.get("operator"),
            platform=self.request.query_params.get("platform"),
        )


class RegionDetailApi(generics.RetrieveAPIView):
    permission_classes = [ReadPortal]
    serializer_class = S.RegionSerializer

    def get_queryset(self):
        return selectors.region_list()


class RegionEventsApi(generics.ListAPIView):
    """The region's history, newest first (append-only)."""

    permission_classes = [ReadPortal]
    serializer_class = S.EventSerializer

    def get_queryset(self):
        region = get_object_or_404(Region, pk=self.kwargs["pk"])
        return region.events.order_by("-id")


class RegionRollbackApi(APIView):
    """One call: re-point the region's default to the previous (or a chosen earlier) artifact."""

    permission_classes = [ReadPortal, RollbackArtifact]

    @extend_schema(request=S.RollbackSerializer, responses=S.RegionSerializer)
    def post(self, request, pk: int):
        region = get_object_or_404(Region, pk=pk)
        payload = S.RollbackSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        data = payload.validated_data
        to = None
        if data.get("to_artifact"):
            to = get_object_or_404(Artifact, pk=data["to_artifact"], region=region)
        region = _call(
            services.region_rollback,
            region=region,
            by=request.user,
            reason=data["reason"],
            to=to,
            to_reference=data["to_reference"],
        )
        return Response(S.RegionSerializer(region).data)


class RuntimeReportApi(APIView):
    """Batched metrics from a dispatch client (calls, fallbacks, shadow results, latency).

    Only runtime service accounts (and admins) may report: a report can abort an artifact."""

    permission_classes = [ReadPortal, portal_permission("report_runtime")]

    @extend_schema(
        request=S.RuntimeReportSerializer, responses={201: S.RuntimeReportAnswerSerializer}
    )
    def post(self, request):
        payload = S.RuntimeReportSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        report = services.runtime_report_ingest(payload=payload.validated_data, by=request.user)
        return Response(
            {"id": report.pk, "received_at": report.received_at}, status=status.HTTP_201_CREATED
        )


class AlarmListApi(generics.ListAPIView):
    permission_classes = [ReadPortal]
    serializer_class = S.AlarmSerializer

    def get_queryset(self):
        return selectors.alarm_open_list(operator=self.request.query_params.get("operator"))


class OperatorTrafficApi(APIView):
    """What a traffic replay needs: the operator's reference and the workload it serves."""

    permission_classes = [ReadPortal]

    @extend_schema(responses=S.TrafficSerializer)
    def get(self, request, operator: str):
        region = selectors.region_list(operator=operator).select_related("problem").first()
        if region is None or region.problem is None:
            raise ValidationError({"operator": f"no region serves {operator!r}"})
        artifact = region.artifacts.select_related("campaign").order_by("-id").first()
        workload = artifact.campaign.workload if artifact else region.problem.smoke_workload
        return Response(
            {"operator": operator, "problem_source": region.problem.source, "workload": workload}
        )
