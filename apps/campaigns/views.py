"""Pages for campaigns."""

from django.views.generic import TemplateView

from apps.accounts.permissions import PortalPermissionRequiredMixin


class CampaignListView(PortalPermissionRequiredMixin, TemplateView):
    template_name = "campaigns/list.html"


class InboxView(PortalPermissionRequiredMixin, TemplateView):
    template_name = "campaigns/inbox.html"
