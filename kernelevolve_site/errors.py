"""Error pages that say what was wrong."""

from django.shortcuts import render


def permission_denied(request, exception=None):
    message = str(exception) if exception and str(exception) else "You may not do this."
    return render(request, "403.html", {"message": message}, status=403)
