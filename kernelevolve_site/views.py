"""Site-level views: home and health."""

from django.contrib.auth.decorators import login_not_required
from django.http import JsonResponse
from django.shortcuts import redirect
from django.views.decorators.cache import never_cache

from kernelevolve_site.health import health_report


def home(request):
    return redirect("campaigns:list")


@login_not_required
@never_cache
def healthz(request):
    """Machine-readable health: 200 when everything answers, 503 naming what is down."""
    report = health_report()
    return JsonResponse(report, status=200 if report["status"] == "ok" else 503)
