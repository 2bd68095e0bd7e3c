"""API routes for campaigns."""

urlpatterns: list = []
