"""API routes for the registry (under /api/registry/)."""

from django.urls import path

from apps.registry import api

urlpatterns = [
    path("registry/public-key/", api.PublicKeyApi.as_view(), name="registry-public-key"),
    path("registry/manifest/", api.ManifestApi.as_view(), name="registry-manifest"),
    path("registry/artifacts/", api.ArtifactListApi.as_view(), name="registry-artifacts"),
    path("registry/artifacts/<int:pk>/", api.ArtifactDetailApi.as_view(), name="registry-artifact"),
    path(
        "registry/artifacts/<int:pk>/approve/",
        api.ArtifactApproveApi.as_view(),
        name="registry-approve",
    ),
    path(
        "registry/artifacts/<int:pk>/promote/",
        api.ArtifactPromoteApi.as_view(),
        name="registry-promote",
    ),
    path(
        "registry/artifacts/<int:pk>/abort/", api.ArtifactAbortApi.as_view(), name="registry-abort"
    ),
    path(
        "registry/artifacts/<int:pk>/recheck/",
        api.ArtifactRecheckApi.as_view(),
        name="registry-recheck",
    ),
    path(
        "registry/artifacts/<int:pk>/narrow/",
        api.ArtifactNarrowApi.as_view(),
        name="registry-narrow",
    ),
    path("registry/regions/", api.RegionListApi.as_view(), name="registry-regions"),
    path("registry/regions/<int:pk>/", api.RegionDetailApi.as_view(), name="registry-region"),
    path(
        "registry/regions/<int:pk>/events/",
        api.RegionEventsApi.as_view(),
        name="registry-region-events",
    ),
    path(
        "registry/regions/<int:pk>/rollback/",
        api.RegionRollbackApi.as_view(),
        name="registry-rollback",
    ),
    path("registry/runtime/reports/", api.RuntimeReportApi.as_view(), name="registry-reports"),
    path("registry/alarms/", api.AlarmListApi.as_view(), name="registry-alarms"),
    path(
        "registry/operators/<str:operator>/traffic/",
        api.OperatorTrafficApi.as_view(),
        name="registry-traffic",
    ),
]
