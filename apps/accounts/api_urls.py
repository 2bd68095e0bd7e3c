"""API routes for accounts."""

from django.urls import path

from apps.accounts import api

urlpatterns = [
    path("me/", api.MeApi.as_view(), name="me"),
    path("auth/token/", api.TokenApi.as_view(), name="token"),
    path("team/", api.TeamApi.as_view(), name="team"),
]
