"""Page routes for campaigns."""

from django.urls import path

from apps.campaigns import views

app_name = "campaigns"
urlpatterns = [
    path("", views.CampaignListView.as_view(), name="list"),
    path("inbox/", views.InboxView.as_view(), name="inbox"),
]
