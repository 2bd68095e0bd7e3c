"""Pages for registry."""

from django.views.generic import TemplateView

from apps.accounts.permissions import PortalPermissionRequiredMixin


class IndexView(PortalPermissionRequiredMixin, TemplateView):
    template_name = "registry/index.html"
