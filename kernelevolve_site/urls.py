"""URL routes: pages per app, the REST API under /api/, its schema and docs, health."""

from django.conf import settings
from django.contrib import admin
from django.contrib.auth.decorators import login_not_required, login_required
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from kernelevolve_site import views
from kernelevolve_site.api import ApiRootView

api_patterns = [
    path("", ApiRootView.as_view(), name="root"),
    path("", include("apps.accounts.api_urls")),
    path("", include("apps.campaigns.api_urls")),
    path("", include("apps.registry.api_urls")),
    path("", include("apps.knowledge.api_urls")),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # The docs page is for people: anonymous ones are sent to the login page (the schema, for
    # programs, answers 401 through SPECTACULAR_SETTINGS["SERVE_PERMISSIONS"]). The split view
    # serves its init script as a file, as the CSP requires.
    path(
        "docs/",
        login_required(SpectacularSwaggerSplitView.as_view(url_name="api:schema")),
        name="docs",
    ),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("healthz", views.healthz, name="healthz"),
    # Browsers ask for /favicon.ico whatever the page links: send them to the icon.
    path(
        "favicon.ico",
        login_not_required(
            RedirectView.as_view(url=settings.STATIC_URL + "img/favicon.svg", permanent=True)
        ),
    ),
    path("accounts/", include("apps.accounts.urls")),
    path("campaigns/", include("apps.campaigns.urls")),
    path("registry/", include("apps.registry.urls")),
    path("knowledge/", include("apps.knowledge.urls")),
    path("api/", include((api_patterns, "api"))),
    path("admin/", admin.site.urls),
]

handler403 = "kernelevolve_site.errors.permission_denied"
handler404 = "kernelevolve_site.errors.page_not_found"
