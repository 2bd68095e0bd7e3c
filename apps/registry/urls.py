"""Page routes for registry."""

from django.urls import path

from apps.registry import views

app_name = "registry"
urlpatterns = [
    path("", views.IndexView.as_view(), name="index"),
    path("artifacts/", views.FreezeListView.as_view(), name="freeze-list"),
    path("artifacts/new/", views.ArtifactCreateView.as_view(), name="artifact-create"),
    path("artifacts/<int:pk>/", views.ArtifactView.as_view(), name="artifact"),
    path("artifacts/<int:pk>/narrow/", views.ArtifactNarrowView.as_view(), name="narrow"),
    path(
        "artifacts/<int:pk>/<str:action>/",
        views.ArtifactActionView.as_view(),
        name="artifact-action",
    ),
    path("regions/<int:pk>/rollback/", views.RegionRollbackView.as_view(), name="rollback"),
    path("alarms/<int:pk>/resolve/", views.AlarmResolveView.as_view(), name="alarm-resolve"),
    path("<str:operator>/", views.OperatorView.as_view(), name="operator"),
]
