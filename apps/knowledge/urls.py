"""Page routes for knowledge."""

from django.urls import path

from apps.knowledge import views

app_name = "knowledge"
urlpatterns = [
    path("", views.IndexView.as_view(), name="index"),
]
