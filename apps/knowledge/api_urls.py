"""API routes for knowledge."""

from django.urls import path

from apps.knowledge import api

urlpatterns = [
    path("knowledge/entries/", api.EntryListApi.as_view(), name="knowledge-entries"),
    path("knowledge/entries/<int:pk>/", api.EntryDetailApi.as_view(), name="knowledge-entry"),
    path(
        "knowledge/entries/<int:pk>/versions/",
        api.EntryVersionsApi.as_view(),
        name="knowledge-versions",
    ),
    path(
        "knowledge/entries/<int:pk>/revert/", api.EntryRevertApi.as_view(), name="knowledge-revert"
    ),
    path(
        "knowledge/entries/<int:pk>/curate/", api.EntryCurateApi.as_view(), name="knowledge-curate"
    ),
    path("knowledge/retire/", api.BulkRetireApi.as_view(), name="knowledge-retire"),
    path("knowledge/retrieve/", api.RetrieveApi.as_view(), name="knowledge-retrieve"),
    path("knowledge/export/", api.ExportApi.as_view(), name="knowledge-export"),
    path("knowledge/import/", api.ImportApi.as_view(), name="knowledge-import"),
]
