"""Page routes for campaigns."""

from django.urls import path

from apps.campaigns import views

app_name = "campaigns"
urlpatterns = [
    path("", views.CampaignListView.as_view(), name="list"),
    path("new/", views.CampaignCreateView.as_view(), name="create"),
    path("inbox/", views.InboxView.as_view(), name="inbox"),
    path("<int:pk>/", views.CampaignDetailView.as_view(), name="detail"),
    path("<int:pk>/<str:action>/", views.CampaignActionView.as_view(), name="action"),
    path("<int:pk>/nodes/<str:key>/", views.NodeDetailView.as_view(), name="node"),
    path("<int:pk>/nodes/<str:key>/continue/", views.NodeContinueView.as_view(), name="continue"),
]
