"""Account pages: login, logout, profile (API token), team."""

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.shortcuts import redirect, render
from django.utils.decorators import method_decorator
from django.views import View
from django.views.generic import TemplateView
from rest_framework.authtoken.models import Token

from apps.accounts import selectors, services
from apps.accounts.login_limits import (
    client_address,
    login_failure_record,
    login_wait_seconds,
    too_many_message,
)
from apps.accounts.permissions import PortalPermissionRequiredMixin


@method_decorator(login_not_required, name="dispatch")
class LoginView(auth_views.LoginView):
    """Django's login page, with failed attempts limited per username and address: past the
    limit it answers 429 with Retry-After and says how long to wait (apps.accounts.login_limits)."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def post(self, request, *args, **kwargs):
        wait = login_wait_seconds(
            username=request.POST.get("username", ""), address=client_address(request)
        )
        if wait:
            # Unbound: binding would check the password, which is what the limit withholds.
            form = self.get_form_class()(
                request, initial={"username": request.POST.get("username")}
            )
            response = self.render_to_response(
                self.get_context_data(form=form, limited=too_many_message(wait)), status=429
            )
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        login_failure_record(
            username=self.request.POST.get("username", ""), address=client_address(self.request)
        )
        return super().form_invalid(form)


class LogoutView(auth_views.LogoutView):
    pass


class ProfileView(View):
    def get(self, request):
        token = Token.objects.filter(user=request.user).first()
        return render(
            request,
            "accounts/profile.html",
            {"token": token, "roles": selectors.user_roles(user=request.user)},
        )

    def post(self, request):
        token = services.api_token_issue(user=request.user)
        messages.success(request, "A new API token was issued; the old one no longer works.")
        request.session["new_token"] = token.key
        return redirect("profile")


class TeamView(PortalPermissionRequiredMixin, TemplateView):
    portal_permission = "manage_team"
    template_name = "accounts/team.html"

    def get_context_data(self, **kwargs):
        users = [(u, selectors.user_roles(user=u)) for u in selectors.team_list()]
        return {**super().get_context_data(**kwargs), "members": users}
