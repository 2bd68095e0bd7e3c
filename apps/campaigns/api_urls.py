"""API routes for campaigns."""

from django.urls import path

from apps.campaigns import api

urlpatterns = [
    path("problems/", api.ProblemListApi.as_view(), name="problems"),
    path("problems/preview/", api.WorkloadPreviewApi.as_view(), name="workload-preview"),
    path("campaigns/", api.CampaignListApi.as_view(), name="campaigns"),
    path("campaigns/upload/", api.CampaignUploadApi.as_view(), name="campaign-upload"),
    path("campaigns/<int:pk>/graph/", api.CampaignGraphApi.as_view(), name="campaign-graph"),
    path("campaigns/<int:pk>/charts/", api.CampaignChartsApi.as_view(), name="campaign-charts"),
    path("campaigns/<int:pk>/export/", api.CampaignExportApi.as_view(), name="campaign-export"),
    path("campaigns/<int:pk>/compare/", api.NodeCompareApi.as_view(), name="campaign-compare"),
    path(
        "campaigns/<int:pk>/nodes/<str:key>/comments/",
        api.NodeCommentListApi.as_view(),
        name="node-comments",
    ),
    path(
        "campaigns/<int:pk>/nodes/<str:key>/comments/<int:comment_id>/",
        api.NodeCommentApi.as_view(),
        name="node-comment",
    ),
    path(
        "campaigns/<int:pk>/nodes/<str:key>/comments/<int:comment_id>/resolve/",
        api.NodeCommentResolveApi.as_view(),
        name="node-comment-resolve",
    ),
    path(
        "campaigns/<int:pk>/nodes/<str:key>/review/",
        api.NodeReviewApi.as_view(),
        name="node-review",
    ),
    path("inbox/", api.InboxApi.as_view(), name="inbox"),
    path("suites/", api.SuiteRunListApi.as_view(), name="suites"),
    path("suites/<int:pk>/", api.SuiteRunDetailApi.as_view(), name="suite"),
    path("portfolio/", api.PortfolioApi.as_view(), name="portfolio"),
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
