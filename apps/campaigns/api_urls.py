"""API routes for campaigns."""

from django.urls import path

from apps.campaigns import api

urlpatterns = [
    path("problems/", api.ProblemListApi.as_view(), name="problems"),
    path("campaigns/", api.CampaignListApi.as_view(), name="campaigns"),
    path("campaigns/<int:pk>/", api.CampaignDetailApi.as_view(), name="campaign"),
    path("campaigns/<int:pk>/actions/", api.CampaignActionApi.as_view(), name="campaign-action"),
    path("campaigns/<int:pk>/nodes/", api.NodeListApi.as_view(), name="nodes"),
    path("campaigns/<int:pk>/nodes/<str:key>/", api.NodeDetailApi.as_view(), name="node"),
    path(
        "campaigns/<int:pk>/nodes/<str:key>/continue/",
        api.NodeContinueApi.as_view(),
        name="node-continue",
    ),
]
