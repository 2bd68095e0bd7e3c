"""Page routes for registry."""

from django.urls import path

from apps.registry import views

app_name = "registry"
urlpatterns = [
    path("", views.IndexView.as_view(), name="index"),
]
