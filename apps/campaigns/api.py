"""REST API for campaigns: problems, campaigns, actions, nodes. Writes go through services."""

from django.core.exceptions import ValidationError as DjangoValidationError
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.permissions import ReadPortal, portal_permission
from apps.campaigns import selectors
from apps.campaigns.models import Campaign
from apps.campaigns.serializers import (
    CampaignActionSerializer,
    CampaignCreateSerializer,
    CampaignSerializer,
    ContinueSerializer,
    NodeDetailSerializer,
    NodeSerializer,
    ProblemCreateSerializer,
    ProblemSerializer,
)
from apps.campaigns.services import campaigns as campaign_services
from apps.campaigns.services.problems import problem_create

AuthorCampaign = portal_permission("author_campaign")
ControlCampaign = portal_permission("control_campaign")


def _service_call(fn, **kwargs):
    """Run a service; its ValidationError becomes a 400 naming the field."""
    try:
        return fn(**kwargs)
    except DjangoValidationError as exc:
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        raise ValidationError(detail) from exc


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

    @extend_schema(request=ProblemCreateSerializer, responses={201: ProblemSerializer})
    def post(self, request):
        payload = ProblemCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        problem = _service_call(problem_create, created_by=request.user, **payload.validated_data)
        return Response(ProblemSerializer(problem).data, status=status.HTTP_201_CREATED)


class CampaignListApi(WriteNeeds, generics.ListAPIView):
    serializer_class = CampaignSerializer

    def get_queryset(self):
        qs = selectors.campaign_list()
        for field in ("status", "platform", "outcome"):
            if self.request.query_params.get(field):
                qs = qs.filter(**{field: self.request.query_params[field]})
        return qs

    @extend_schema(request=CampaignCreateSerializer, responses={201: CampaignSerializer})
    def post(self, request):
        payload = CampaignCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        campaign = _service_call(
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
        campaign = get_object_or_404(Campaign, pk=pk)
        kwargs = {"by": request.user} if action == "cancel" else {}
        campaign = _service_call(ACTIONS[action], campaign=campaign, **kwargs)
        return Response(CampaignSerializer(selectors.campaign_get(pk=campaign.pk)).data)


class NodeListApi(generics.ListAPIView):
    permission_classes = [ReadPortal]
    serializer_class = NodeSerializer

    def get_queryset(self):
        campaign = get_object_or_404(Campaign, pk=self.kwargs["pk"])
        return selectors.campaign_nodes(campaign=campaign).prefetch_related("in_edges__parent")


class NodeDetailApi(APIView):
    permission_classes = [ReadPortal]

    @extend_schema(responses=NodeDetailSerializer)
    def get(self, request, pk: int, key: str):
        return Response(NodeDetailSerializer(selectors.node_get(campaign_id=pk, key=key)).data)


class NodeContinueApi(APIView):
    permission_classes = [ReadPortal, AuthorCampaign]

    @extend_schema(request=ContinueSerializer, responses={201: CampaignSerializer})
    def post(self, request, pk: int, key: str):
        payload = ContinueSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        node = selectors.node_get(campaign_id=pk, key=key)
        campaign = _service_call(
            campaign_services.campaign_continue_from_node,
            node=node,
            created_by=request.user,
            **payload.validated_data,
        )
        return Response(CampaignSerializer(campaign).data, status=status.HTTP_201_CREATED)
