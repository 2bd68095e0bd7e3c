"""Page routes for campaigns."""

from django.urls import path, re_path

from apps.campaigns import views

app_name = "campaigns"
urlpatterns = [
    path("", views.CampaignListView.as_view(), name="list"),
    path("new/", views.CampaignCreateView.as_view(), name="create"),
    path("inbox/", views.InboxView.as_view(), name="inbox"),
    path("inbox/unread/", views.InboxUnreadView.as_view(), name="inbox-unread"),
    path("inbox/read/", views.InboxReadAllView.as_view(), name="inbox-read"),
    path("mentions/", views.MentionSuggestView.as_view(), name="mention-suggest"),
    path("to-freeze/", views.FreezeListView.as_view(), name="freeze-list"),
    path("portfolio/", views.PortfolioView.as_view(), name="portfolio"),
    path("suites/", views.SuiteRunListView.as_view(), name="suite-list"),
    path("suites/import/", views.SuiteRunImportView.as_view(), name="suite-import"),
    path("suites/<int:pk>/", views.SuiteRunDetailView.as_view(), name="suite-detail"),
    path("highlight.css", views.HighlightCssView.as_view(), name="highlight-css"),
    path("<int:pk>/", views.CampaignDetailView.as_view(), name="detail"),
    path("<int:pk>/graph.json", views.CampaignGraphView.as_view(), name="graph"),
    path("<int:pk>/reviews/", views.CampaignReviewListView.as_view(), name="reviews"),
    path("<int:pk>/charts/", views.CampaignChartsView.as_view(), name="charts"),
    path("<int:pk>/compare/", views.NodeCompareView.as_view(), name="compare"),
    path("<int:pk>/insight/", views.CampaignInsightView.as_view(), name="insight"),
    re_path(
        r"^(?P<pk>\d+)/export\.(?P<fmt>csv|json)$",
        views.CampaignExportView.as_view(),
        name="export",
    ),
    path("<int:pk>/nodes/<str:key>/", views.NodeDetailView.as_view(), name="node"),
    path("<int:pk>/nodes/<str:key>/comments/", views.NodeCommentView.as_view(), name="comment"),
    path(
        "<int:pk>/nodes/<str:key>/comments/<int:comment_id>/edit/",
        views.NodeCommentActionView.as_view(),
        {"action": "edit"},
        name="comment-edit",
    ),
    path(
        "<int:pk>/nodes/<str:key>/comments/<int:comment_id>/delete/",
        views.NodeCommentActionView.as_view(),
        {"action": "delete"},
        name="comment-delete",
    ),
    path(
        "<int:pk>/nodes/<str:key>/comments/<int:comment_id>/resolve/",
        views.NodeCommentActionView.as_view(),
        {"action": "resolve"},
        name="comment-resolve",
    ),
    path("<int:pk>/nodes/<str:key>/review/", views.NodeReviewView.as_view(), name="review"),
    path("<int:pk>/nodes/<str:key>/continue/", views.NodeContinueView.as_view(), name="continue"),
    path("<int:pk>/<str:action>/", views.CampaignActionView.as_view(), name="action"),
]
