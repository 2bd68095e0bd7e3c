"""Page routes for knowledge."""

from django.urls import path

from apps.knowledge import views

app_name = "knowledge"
urlpatterns = [
    path("", views.IndexView.as_view(), name="index"),
    path("new/", views.EntryCreateView.as_view(), name="create"),
    path("preview/", views.PreviewView.as_view(), name="preview"),
    path("group-check/", views.GroupCheckView.as_view(), name="group-check"),
    path("curation/", views.CurationQueueView.as_view(), name="curation"),
    path("retire/", views.BulkRetireView.as_view(), name="bulk-retire"),
    path("export/", views.ExportView.as_view(), name="export"),
    path("import/", views.ImportView.as_view(), name="import"),
    path("<int:pk>/", views.EntryDetailView.as_view(), name="entry"),
    path("<int:pk>/edit/", views.EntryEditView.as_view(), name="edit"),
    path("<int:pk>/history/", views.HistoryView.as_view(), name="history"),
    path("<int:pk>/versions/<int:number>/", views.VersionView.as_view(), name="version"),
    path("<int:pk>/versions/<int:number>/revert/", views.RevertView.as_view(), name="revert"),
    path("<int:pk>/curate/", views.CurateView.as_view(), name="curate"),
    path("<int:pk>/markdown/", views.EntryMarkdownView.as_view(), name="markdown"),
]
