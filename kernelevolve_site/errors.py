"""Error pages that say what was wrong: 403 and 404 pages, JSON under /api/, and the same 404
page under DEBUG (`make run`), where Django would show its technical page listing every route."""

from django.conf import settings
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.urls import Resolver404, resolve

API_PREFIX = "/api/"


def permission_denied(request, exception=None):
    message = str(exception) if exception and str(exception) else "You may not do this."
    return render(request, "403.html", {"message": message}, status=403)


def page_not_found(request, exception=None):
    """A 404 that says what was not found: JSON for the API, the portal's page for people."""
    message = ""
    if isinstance(exception, Http404) and not isinstance(exception, Resolver404):
        message = str(exception)
    if request.path.startswith(API_PREFIX):
        return JsonResponse({"detail": message or "Not found."}, status=404)
    context = {"message": message or f"There is no page at {request.path}.", "path": request.path}
    response = render(request, "404.html", context, status=404)
    response.portal_not_found = True
    return response


class NotFoundPageMiddleware:
    """Under DEBUG, Django answers a 404 with its technical page (every route of the site, the
    settings module) instead of handler404: answer with the portal's page (or JSON under /api/)
    there too. Without DEBUG, handler404 does the same and this does nothing."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            settings.DEBUG
            and response.status_code == 404
            and not getattr(response, "portal_not_found", False)
            and not _resolves(request.path_info)
        ):
            return page_not_found(request)
        return response

    def process_exception(self, request, exception):
        if settings.DEBUG and isinstance(exception, Http404):
            return page_not_found(request, exception)
        return None


def _resolves(path: str) -> bool:
    try:
        resolve(path)
    except Resolver404:
        return False
    return True
