"""Pages for knowledge."""

from django.views.generic import TemplateView

from apps.accounts.permissions import PortalPermissionRequiredMixin


class IndexView(PortalPermissionRequiredMixin, TemplateView):
    template_name = "knowledge/index.html"
