"""REST API for knowledge. Viewers read; curators (and admins) write. Every queryset starts
from `entries_visible`, so restricted entries stay hidden here as on the pages; writes go
through the services."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import NotFound
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.permissions import ReadPortal, portal_permission
from apps.knowledge.models import Entry
from apps.knowledge.selectors.entries import entries_visible, entry_versions
from apps.knowledge.selectors.exports import knowledge_export_files
from apps.knowledge.selectors.retrieval import knowledge_retrieve
from apps.knowledge.selectors.search import entry_search
from apps.knowledge.serializers import (
    BulkRetireSerializer,
    CurateSerializer,
    EntryCreateSerializer,
    EntryDetailSerializer,
    EntryFilterSerializer,
    EntrySerializer,
    EntryWriteSerializer,
    ImportResultSerializer,
    ImportSerializer,
    MarkdownFileSerializer,
    RetrievedSerializer,
    RetrieveQuerySerializer,
    RevertSerializer,
    VersionSerializer,
)
from apps.knowledge.services.entries import (
    knowledge_entries_retire,
    knowledge_entry_create,
    knowledge_entry_curate,
    knowledge_entry_revert,
    knowledge_entry_revise,
)
from apps.knowledge.services.imports import knowledge_import
from kernelevolve_site.api import service_call

CurateKnowledge = portal_permission("curate_knowledge")
FILTERS = ("kind", "status", "platform", "family", "tag")


class KnowledgeApi:
    """Reads need `view_portal`; writes need `curate_knowledge`. Visibility is decided by the
    selector in `visible()`, the base of every lookup."""

    def get_permissions(self):
        if self.request.method in ("GET", "HEAD", "OPTIONS"):
            return [ReadPortal()]
        return [ReadPortal(), CurateKnowledge()]

    def visible(self):
        return entries_visible(user=self.request.user)

    def entry(self, pk: int) -> Entry:
        try:
            return self.visible().get(pk=pk)
        except Entry.DoesNotExist as exc:
            raise NotFound("No such entry.") from exc


@extend_schema(
    parameters=[
        OpenApiParameter("q", str, description="full-text search (all terms)"),
        *[OpenApiParameter(name, str) for name in FILTERS],
    ]
)
class EntryListApi(KnowledgeApi, generics.ListAPIView):
    serializer_class = EntrySerializer

    def get_queryset(self):
        params = EntryFilterSerializer(data=self.request.query_params)
        params.is_valid(raise_exception=True)
        filters = dict(params.validated_data)
        return entry_search(user=self.request.user, text=filters.pop("q"), **filters)

    @extend_schema(request=EntryCreateSerializer, responses={201: EntryDetailSerializer})
    def post(self, request):
        payload = EntryCreateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        entry = service_call(knowledge_entry_create, by=request.user, **payload.validated_data)
        return Response(EntryDetailSerializer(entry).data, status=status.HTTP_201_CREATED)


class EntryDetailApi(KnowledgeApi, APIView):
    @extend_schema(responses=EntryDetailSerializer)
    def get(self, request, pk: int):
        return Response(EntryDetailSerializer(self.entry(pk)).data)

    @extend_schema(request=EntryWriteSerializer, responses=EntryDetailSerializer)
    def patch(self, request, pk: int):
        payload = EntryWriteSerializer(data=request.data, partial=True)
        payload.is_valid(raise_exception=True)
        changes = dict(payload.validated_data)
        reason = changes.pop("reason", "")
        entry = service_call(
            knowledge_entry_revise, entry=self.entry(pk), by=request.user, reason=reason, **changes
        )
        return Response(EntryDetailSerializer(entry).data)


class EntryVersionsApi(KnowledgeApi, generics.ListAPIView):
    serializer_class = VersionSerializer

    def get_queryset(self):
        return entry_versions(entry=self.entry(self.kwargs["pk"]))


class EntryRevertApi(KnowledgeApi, APIView):
    @extend_schema(request=RevertSerializer, responses=EntryDetailSerializer)
    def post(self, request, pk: int):
        payload = RevertSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        entry = service_call(
            knowledge_entry_revert,
            entry=self.entry(pk),
            by=request.user,
            number=payload.validated_data["version"],
            reason=payload.validated_data["reason"],
        )
        return Response(EntryDetailSerializer(entry).data)


class EntryCurateApi(KnowledgeApi, APIView):
    @extend_schema(request=CurateSerializer, responses=EntryDetailSerializer)
    def post(self, request, pk: int):
        payload = CurateSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        entry = service_call(
            knowledge_entry_curate, entry=self.entry(pk), by=request.user, **payload.validated_data
        )
        return Response(EntryDetailSerializer(entry).data)


class BulkRetireApi(KnowledgeApi, APIView):
    @extend_schema(request=BulkRetireSerializer, responses=EntrySerializer(many=True))
    def post(self, request):
        payload = BulkRetireSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        entries = list(self.visible().filter(pk__in=payload.validated_data["ids"]))
        retired = service_call(
            knowledge_entries_retire,
            entries=entries,
            by=request.user,
            reason=payload.validated_data["reason"],
        )
        return Response(EntrySerializer(retired, many=True).data)


class RetrieveApi(KnowledgeApi, APIView):
    """What a generator would get for this query if the caller owned the campaign (a read)."""

    def get_permissions(self):
        return [ReadPortal()]

    @extend_schema(request=RetrieveQuerySerializer, responses=RetrievedSerializer(many=True))
    def post(self, request):
        payload = RetrieveQuerySerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        query = dict(payload.validated_data)
        limit = query.pop("limit")
        found = knowledge_retrieve(user=request.user, query=query, limit=limit)
        return Response(RetrievedSerializer(found, many=True).data)


class ExportApi(KnowledgeApi, APIView):
    @extend_schema(responses=MarkdownFileSerializer(many=True))
    def get(self, request):
        files = knowledge_export_files(user=request.user)
        return Response([{"name": name, "content": text} for name, text in files])


class ImportApi(KnowledgeApi, APIView):
    @extend_schema(request=ImportSerializer, responses=ImportResultSerializer)
    def post(self, request):
        payload = ImportSerializer(data=request.data)
        payload.is_valid(raise_exception=True)
        files = [(f["name"], f["content"]) for f in payload.validated_data["files"]]
        result = knowledge_import(files=files, by=request.user)
        return Response(result.as_dict())
