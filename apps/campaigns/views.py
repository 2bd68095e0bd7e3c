"""Pages for campaigns: list, author, live detail, candidate, inbox."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.shortcuts import get_object_or_404, redirect, render
from django.views import View
from django.views.generic import TemplateView

from apps.accounts.permissions import PortalPermissionRequiredMixin
from apps.campaigns import selectors
from apps.campaigns.forms import CampaignForm
from apps.campaigns.models import Campaign
from apps.campaigns.services import campaigns as campaign_services


class CampaignListView(PortalPermissionRequiredMixin, TemplateView):
    template_name = "campaigns/list.html"

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), "campaigns": selectors.campaign_list()[:200]}


class CampaignCreateView(PortalPermissionRequiredMixin, View):
    portal_permission = "author_campaign"

    def get(self, request):
        return render(request, "campaigns/create.html", {"form": CampaignForm()})

    def post(self, request):
        form = CampaignForm(request.POST)
        if form.is_valid():
            try:
                campaign = campaign_services.campaign_create(
                    created_by=request.user, **form.cleaned_data
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errors)
            else:
                return redirect("campaigns:detail", pk=campaign.pk)
        return render(request, "campaigns/create.html", {"form": form}, status=400)


class CampaignDetailView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int):
        campaign = get_object_or_404(selectors.campaign_list(), pk=pk)
        context = {"campaign": campaign, "nodes": selectors.campaign_nodes(campaign=campaign)}
        if request.htmx:
            return render(request, "campaigns/partials/live.html", context)
        return render(request, "campaigns/detail.html", context)


ACTIONS = {
    "pause": (campaign_services.campaign_pause, "paused"),
    "resume": (campaign_services.campaign_resume, "resumed"),
    "cancel": (campaign_services.campaign_cancel, "cancelled"),
}


class CampaignActionView(PortalPermissionRequiredMixin, View):
    portal_permission = "control_campaign"

    def post(self, request, pk: int, action: str):
        campaign = get_object_or_404(Campaign, pk=pk)
        if action not in ACTIONS:
            messages.error(request, f"unknown action {action!r}")
            return redirect("campaigns:detail", pk=pk)
        kwargs = {"by": request.user} if action == "cancel" else {}
        service, done = ACTIONS[action]
        error = ""
        try:
            service(campaign=campaign, **kwargs)
        except ValidationError as exc:
            error = " ".join(exc.messages)
        if request.htmx:
            context = {"campaign": selectors.campaign_get(pk=pk), "action_error": error}
            return render(request, "campaigns/partials/progress.html", context)
        if error:
            messages.error(request, error)
        else:
            messages.success(request, f"Campaign {done}.")
        return redirect("campaigns:detail", pk=pk)


class NodeDetailView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int, key: str):
        node = selectors.node_get(campaign_id=pk, key=key)
        return render(request, "campaigns/node.html", {"node": node, "campaign": node.campaign})


class NodeContinueView(PortalPermissionRequiredMixin, View):
    portal_permission = "author_campaign"

    def post(self, request, pk: int, key: str):
        node = selectors.node_get(campaign_id=pk, key=key)
        try:
            campaign = campaign_services.campaign_continue_from_node(
                node=node, created_by=request.user
            )
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect("campaigns:node", pk=pk, key=key)
        return redirect("campaigns:detail", pk=campaign.pk)


class InboxView(PortalPermissionRequiredMixin, TemplateView):
    template_name = "campaigns/inbox.html"
