"""Pages for campaigns: list, author, live detail with the graph, candidate review, compare,
comments, inbox, portfolio and exports. Views validate, call one service or selector, render."""

import csv

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views import View

from apps.accounts.permissions import PortalPermissionRequiredMixin, is_portal_admin
from apps.campaigns import charts, insight, insight_charts, selectors
from apps.campaigns.constants import NodeStatus
from apps.campaigns.forms import (
    REVIEW_FILTER_CHOICES,
    CampaignFilterForm,
    CampaignForm,
    CandidateFilterForm,
    CommentForm,
    ContinueForm,
    ReviewForm,
    SuiteResultFilterForm,
    SuiteRunImportForm,
)
from apps.campaigns.models import Campaign, Comment, Node, ReviewDecision
from apps.campaigns.review import pygments_css
from apps.campaigns.selectors import suites as suite_selectors
from apps.campaigns.services import campaigns as campaign_services
from apps.campaigns.services import comments as comment_services
from apps.campaigns.services import review as review_services
from apps.campaigns.services import suites as suite_services
from apps.campaigns.services.previews import REFERENCE_TIMEOUT_S, campaign_preview
from apps.campaigns.services.problems import workload_from_upload

LIST_PAGE_SIZE = 25


def _form_errors(form, exc: ValidationError) -> None:
    """A service's ValidationError shown next to the field it names (or above the form)."""
    renames = {
        "name": "problem_name",
        "workload": "workload_file",
        "source": "problem_file",
        "incumbent_source": "incumbent_file",
    }
    if not hasattr(exc, "error_dict"):
        form.add_error(None, exc.messages)
        return
    for field, errors in exc.message_dict.items():
        field = renames.get(field, field)
        form.add_error(field if field in form.fields else None, errors)


LIST_COLUMNS = [
    ("#", "created"),
    ("Campaign", "name"),
    ("Problem", "problem"),
    ("Platform", None),
    ("Status", "status"),
    ("Progress", "evaluated"),
    ("Best", "best"),
    ("Device-s", "device"),
    ("Outcome", None),
    ("Author", None),
]


def _headers(query, sort: str, columns=LIST_COLUMNS) -> list[dict]:
    """Column headers; a sortable one links to the same filters sorted by it (again: reversed)."""
    headers = []
    for label, key in columns:
        if key is None:
            headers.append({"label": label})
            continue
        q = query.copy()
        q["sort"] = f"-{key}" if sort == key else key
        state = "asc" if sort == key else "desc" if sort == f"-{key}" else ""
        headers.append({"label": label, "href": f"?{q.urlencode()}", "state": state})
    return headers


class CampaignListView(PortalPermissionRequiredMixin, View):
    def get(self, request):
        filters = CampaignFilterForm(request.GET)
        filters.is_valid()
        params = {k: v for k, v in filters.cleaned_data.items() if v}
        sort = params.get("sort", "-created")
        page = Paginator(selectors.campaign_search(**params), LIST_PAGE_SIZE).get_page(
            request.GET.get("page")
        )
        query = request.GET.copy()
        query.pop("page", None)
        context = {
            "filters": filters,
            "page": page,
            "campaigns": page.object_list,
            "sort": sort,
            "query": query.urlencode(),
            "problems": selectors.problem_list().values_list("name", flat=True),
            "headers": _headers(query, sort),
        }
        if request.htmx:
            return render(request, "campaigns/partials/campaign_table.html", context)
        return render(request, "campaigns/list.html", context)


class CampaignCreateView(PortalPermissionRequiredMixin, View):
    portal_permission = "author_campaign"
    CAMPAIGN_FIELDS = (
        "name",
        "platform",
        "generators",
        "policy",
        "budget_candidates",
        "budget_device_seconds",
        "budget_wall_seconds",
        "baseline",
        "regression_tolerance",
    )

    def get(self, request):
        # A link may preset the problem and platform (an interpret campaign's "time it on cuda").
        initial = {k: request.GET[k] for k in ("problem", "platform") if request.GET.get(k)}
        context = {
            "form": CampaignForm(initial=initial),
            "reference_timeout_s": REFERENCE_TIMEOUT_S,
        }
        return render(request, "campaigns/create.html", context)

    def post(self, request):
        form = CampaignForm(request.POST, request.FILES)
        context = {"form": form, "reference_timeout_s": REFERENCE_TIMEOUT_S}
        workload = None
        if form.is_valid():
            data = form.cleaned_data
            try:
                workload = self._workload(data)
                result = self._author(request, data, workload, context)
            except ValidationError as exc:
                _form_errors(form, exc)
            else:
                if result is not None:
                    return redirect("campaigns:detail", pk=result.pk)
                # A preview: the uploads travel on as text, the files need not be picked again.
                form.carry_uploads(workload=workload)
                return render(request, "campaigns/create.html", context)
        elif not any(form.has_error(f) for f in ("problem", "workload_file", "trace_file")):
            # Another field is in error: a good workload still travels, a bad one says why.
            try:
                workload = self._workload(form.cleaned_data)
            except ValidationError as exc:
                _form_errors(form, exc)
        form.carry_uploads(workload=workload)
        return render(request, "campaigns/create.html", context, status=400)

    @staticmethod
    def _workload(data: dict) -> dict | None:
        """The uploaded workload or trace, else the one carried from the last submit."""
        if data.get("problem"):
            return None
        workload = workload_from_upload(
            workload_text=data.get("workload_text", ""), trace_text=data.get("trace_text", "")
        )
        return workload if workload is not None else data.get("carried_workload")

    def _author(self, request, data: dict, workload, context: dict) -> Campaign | None:
        kwargs = {k: data[k] for k in self.CAMPAIGN_FIELDS}
        kwargs["incumbent_source"] = data.get("incumbent_text", "")
        kwargs["incumbent_name"] = data.get("incumbent_filename") or ""
        field = "trace_file" if data["trace_text"] else "workload_file"
        if "preview" in request.POST:
            preview = campaign_preview(
                platform=data["platform"],
                problem=data.get("problem"),
                source=data["upload_source"],
                workload=workload,
                workload_field=field,
            )
            context["preview"] = {**preview, "figure": charts.weights_figure(preview["cases"])}
            return None
        if data.get("problem"):
            return campaign_services.campaign_create(
                problem=data["problem"], created_by=request.user, **kwargs
            )
        return campaign_services.campaign_create_from_upload(
            created_by=request.user,
            problem_name=data["problem_name"],
            problem_source=data["upload_source"],
            workload=workload,
            workload_field=field,
            **kwargs,
        )


class CampaignDetailView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int):
        campaign = get_object_or_404(selectors.campaign_list(), pk=pk)
        context = {
            "campaign": campaign,
            "worker_notice": selectors.campaign_worker_notice(campaign=campaign),
            "best_rule": selectors.campaign_best_rule(campaign=campaign),
            **selectors.campaign_node_table(campaign=campaign),
        }
        if request.htmx:
            return render(request, "campaigns/partials/live.html", context)
        context["charts"] = selectors.campaign_charts(campaign=campaign)
        return render(request, "campaigns/detail.html", context)


class CampaignChartsView(PortalPermissionRequiredMixin, View):
    """The funnel, best-fitness and device-seconds charts (re-fetched as events arrive)."""

    def get(self, request, pk: int):
        campaign = get_object_or_404(selectors.campaigns_for_reading(), pk=pk)
        context = {"campaign": campaign, "charts": selectors.campaign_charts(campaign=campaign)}
        return render(request, "campaigns/partials/charts.html", context)


class CampaignGraphView(PortalPermissionRequiredMixin, View):
    """One page of the search graph as Plotly JSON; `next` is the cursor of the following page.

    The selector lays out the whole graph and pages only the drawing (as the API's graph does),
    so each page carries its parents' coordinates and the browser merges pages without knowing
    the layout."""

    def get(self, request, pk: int):
        campaign = get_object_or_404(Campaign.objects.only("id", "best_node"), pk=pk)
        try:
            after = int(request.GET.get("after") or 0)
        except ValueError:
            after = 0
        page = selectors.campaign_graph_page(campaign=campaign, after=after)
        if page["next"] is not None:
            page["next_url"] = f"{request.path}?after={page['next']}"
        return JsonResponse(page)


ACTIONS = {
    "pause": (campaign_services.campaign_pause, "paused"),
    "resume": (campaign_services.campaign_resume, "resumed"),
    "cancel": (campaign_services.campaign_cancel, "cancelled"),
}


class CampaignActionView(PortalPermissionRequiredMixin, View):
    portal_permission = "control_campaign"

    def post(self, request, pk: int, action: str):
        campaign = get_object_or_404(selectors.campaigns_for_reading(), pk=pk)
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
            campaign = selectors.campaign_get(pk=pk)
            context = {
                "campaign": campaign,
                "action_error": error,
                "worker_notice": selectors.campaign_worker_notice(campaign=campaign),
                "best_rule": selectors.campaign_best_rule(campaign=campaign),
            }
            return render(request, "campaigns/partials/progress.html", context)
        if error:
            messages.error(request, error)
        else:
            messages.success(request, f"Campaign {done}.")
        return redirect("campaigns:detail", pk=pk)


class CampaignExportView(PortalPermissionRequiredMixin, View):
    """A campaign's nodes and per-case measurements as CSV or JSON."""

    def get(self, request, pk: int, fmt: str):
        campaign = get_object_or_404(selectors.campaigns_for_reading(), pk=pk)
        rows = selectors.campaign_export_rows(campaign=campaign)
        filename = f"campaign-{campaign.pk}-nodes.{fmt}"
        if fmt == "json":
            response = JsonResponse({"campaign": campaign.pk, "rows": rows})
        else:
            response = HttpResponse(content_type="text/csv")
            columns = list(rows[0]) if rows else ["node"]
            writer = csv.DictWriter(response, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
        response["Content-Disposition"] = f'attachment; filename="{filename}"'
        return response


def _candidate(pk: int, key: str):
    try:
        return selectors.candidate_review(campaign_id=pk, key=key)
    except Node.DoesNotExist as exc:
        raise Http404(f"campaign {pk} has no candidate {key}") from exc


class HighlightCssView(View):
    """The source highlighting's style sheet: a file, since the CSP allows no inline <style>."""

    def get(self, request):
        response = HttpResponse(pygments_css(), content_type="text/css")
        response["Cache-Control"] = "max-age=86400"
        return response


class NodeDetailView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int, key: str):
        review = _candidate(pk, key)
        comment_services.mentions_mark_read(node=review.node, user=request.user)
        context = {
            "review": review,
            "node": review.node,
            "campaign": review.campaign,
            **_comments_context(request, node=review.node, pk=pk, threads=review.threads),
            "continue_form": ContinueForm(
                initial={
                    "budget_candidates": review.campaign.budget_candidates,
                    "platform": review.campaign.platform,
                }
            ),
            "latency_box": charts.latency_box_figure(review.latency),
            "latency_ecdf": charts.latency_ecdf_figure(review.latency),
            **_review_context(request, node=review.node),
            # An accepted candidate says why it is, or is not, the campaign's best.
            "best_rule": selectors.campaign_best_rule(campaign=review.campaign, about=key)
            if review.node.status == NodeStatus.ACCEPTED
            else None,
        }
        return render(request, "campaigns/node.html", context)


def _mention_notice(result) -> str:
    """What the author hears about their @mentions: who was told, and names that match nobody."""
    if result is None:
        return ""
    parts = []
    if result.unknown:
        names = ", ".join(f"@{n}" for n in result.unknown)
        user = "user" if len(result.unknown) == 1 else "users"
        parts.append(f"No {user} named {names}: nobody was notified for {names}.")
    if result.notified:
        parts.append("Notified " + ", ".join(f"@{n}" for n in result.notified) + ".")
    return " ".join(parts)


def _comments_context(
    request, *, node: Node, pk: int, threads=None, form=None, error="", notice=""
) -> dict:
    """What the comment section needs (the page and every comment action render it)."""
    if threads is None:
        threads = selectors.node_comment_threads(node=node)
    by_line: dict = {}
    for thread in threads:
        if thread.line:
            by_line.setdefault(thread.line, []).append(thread)
    return {
        "node": node,
        "campaign_pk": pk,
        "threads": threads,
        "threads_by_line": sorted(by_line.items()),
        "comment_count": sum(1 + len(t.thread_replies) for t in threads),
        "comment_form": form or CommentForm(),
        "comment_error": error,
        "comment_notice": notice,
        "comment_admin": is_portal_admin(request.user),
    }


def _comments_answer(request, *, node: Node, pk: int, form=None, error="", notice="", anchor=""):
    """htmx: the comment section (422 with the error in it, which htmx swaps in too); a plain
    form post: back to the candidate with the error or notice as a message."""
    if request.htmx:
        context = _comments_context(
            request, node=node, pk=pk, form=form if error else None, error=error, notice=notice
        )
        context["notice_oob"] = True
        return render(
            request, "campaigns/partials/comments.html", context, status=422 if error else 200
        )
    if error:
        messages.error(request, error)
    elif notice:
        messages.warning(request, notice)
    return redirect(reverse("campaigns:node", args=[pk, node.key]) + f"#{anchor or 'comments'}")


def _comment_node(pk: int, key: str) -> Node:
    return get_object_or_404(Node.objects.only("id", "source", "key"), campaign_id=pk, key=key)


class NodeCommentView(PortalPermissionRequiredMixin, View):
    """A new comment, on the candidate or one of its lines, or a reply to a thread."""

    portal_permission = "comment_candidate"

    def post(self, request, pk: int, key: str):
        node = _comment_node(pk, key)
        form = CommentForm(request.POST)
        error = notice = anchor = ""
        if form.is_valid():
            try:
                comment = comment_services.comment_create(
                    node=node, author=request.user, **form.cleaned_data
                )
            except ValidationError as exc:
                error = " ".join(exc.messages)
            else:
                notice = _mention_notice(comment.mention_result)
                anchor = f"comment-{comment.pk}"
        else:
            error = " ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
        return _comments_answer(
            request, node=node, pk=pk, form=form, error=error, notice=notice, anchor=anchor
        )


class NodeCommentActionView(PortalPermissionRequiredMixin, View):
    """Edit or delete a comment (its author or an admin), resolve or reopen its thread."""

    portal_permission = "comment_candidate"

    def post(self, request, pk: int, key: str, comment_id: int, action: str):
        node = _comment_node(pk, key)
        comment = get_object_or_404(
            Comment.objects.select_related("author"), pk=comment_id, node=node
        )
        error = notice = ""
        try:
            if action == "edit":
                edited = comment_services.comment_edit(
                    comment=comment, by=request.user, body=request.POST.get("body", "")
                )
                notice = _mention_notice(edited.mention_result)
            elif action == "delete":
                comment_services.comment_delete(comment=comment, by=request.user)
            else:
                resolved = request.POST.get("resolved", "1") not in ("0", "false", "")
                comment_services.comment_resolve(
                    comment=comment, by=request.user, resolved=resolved
                )
        except (ValidationError, PermissionDenied) as exc:
            error = " ".join(getattr(exc, "messages", None) or [str(exc)])
        anchor = "comments" if action == "delete" else f"comment-{comment.parent_id or comment.pk}"
        return _comments_answer(
            request, node=node, pk=pk, error=error, notice=notice, anchor=anchor
        )


def _review_context(request, *, node: Node, form=None) -> dict:
    """The candidate page's review box: every reviewer's decision, this user's, the form, and
    (accepted candidates, users who may freeze) the artifact frozen from it, if any."""
    decisions = selectors.node_review_decisions(node=node)
    mine = next((r for r in decisions if r.reviewer_id == request.user.pk), None)
    # Only who may freeze sees the button, or the link to what was frozen instead.
    may_freeze = node.status == NodeStatus.ACCEPTED and request.user.has_perm(
        "accounts.create_artifact"
    )
    return {
        "decisions": decisions,
        "my_review": mine,
        "reviewed": mine is not None,
        "changes_requested_by": [
            r.reviewer.username for r in decisions if r.decision == ReviewDecision.CHANGES_REQUESTED
        ],
        "review_form": form or ReviewForm(),
        "frozen": selectors.node_frozen_artifact(node=node) if may_freeze else None,
    }


class NodeReviewView(PortalPermissionRequiredMixin, View):
    """Approve a candidate or request changes (with a comment); no decision marks it reviewed."""

    portal_permission = "comment_candidate"

    def post(self, request, pk: int, key: str):
        node = get_object_or_404(Node.objects.only("id", "key", "status"), campaign_id=pk, key=key)
        form = ReviewForm(request.POST)
        if not form.is_valid():
            errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
            messages.error(request, f"Not recorded: {errors}")
            return redirect(reverse("campaigns:node", args=[pk, key]) + "#reviews")
        decision = form.cleaned_data["decision"]
        try:
            if decision:
                review_services.node_review_decide(
                    node=node,
                    reviewer=request.user,
                    decision=decision,
                    body=form.cleaned_data["body"],
                )
                done = dict(ReviewDecision.choices)[decision].lower()
                messages.success(request, f"Candidate {key}: {done} by you.")
            else:
                comment_services.node_mark_reviewed(node=node, reviewer=request.user)
                messages.success(request, f"Candidate {key} marked reviewed.")
        except ValidationError as exc:
            messages.error(request, "Not recorded: " + " ".join(exc.messages))
        return redirect(reverse("campaigns:node", args=[pk, key]) + "#reviews")


REVIEW_LIST_COLUMNS = [
    ("Candidate", "candidate"),
    ("Round", None),
    ("Generator", None),
    ("Fitness", "fitness"),
    ("Approvals", "approvals"),
    ("Changes asked", "changes"),
    ("Decisions", None),
]
FREEZE_LIST_COLUMNS = [
    ("Candidate", "candidate"),
    ("Campaign", "campaign"),
    ("Problem", "problem"),
    ("Platform", "platform"),
    ("Fitness", "fitness"),
    ("Reviews", "approvals"),
    ("Evaluated", "evaluated"),
    ("", None),
]


def _filters(request) -> tuple[dict, str, object]:
    """The list's filters from the query string (bad values dropped), its sort and the query
    without the page number (what sort links and pages keep)."""
    form = CandidateFilterForm(request.GET)
    form.is_valid()
    params = {k: v for k, v in form.cleaned_data.items() if v}
    query = request.GET.copy()
    query.pop("page", None)
    return params, params.get("sort", "-fitness"), query


class CampaignReviewListView(PortalPermissionRequiredMixin, View):
    """A campaign's accepted candidates and who approved or asked changes of each."""

    def get(self, request, pk: int):
        campaign = get_object_or_404(selectors.campaign_list(), pk=pk)
        params, sort, query = _filters(request)
        result = selectors.campaign_review_list(
            campaign=campaign, review=params.get("review", ""), sort=sort
        )
        page = Paginator(result["rows"], selectors.FREEZE_LIST_SIZE).get_page(
            request.GET.get("page")
        )
        state = params.get("review", "")
        tabs = []
        for value, label in REVIEW_FILTER_CHOICES:
            q = query.copy()
            q["review"] = value
            tabs.append(
                {
                    "state": value or "all",
                    "label": "All" if not value else label[0].upper() + label[1:],
                    "count": result["counts"][value or "all"],
                    "href": f"?{q.urlencode()}",
                    "current": state == value,
                }
            )
        context = {
            "campaign": campaign,
            "review_filter": state,
            "tabs": tabs,
            "headers": _headers(query, sort, REVIEW_LIST_COLUMNS),
            "counts": result["counts"],
            "page": page,
            "rows": page.object_list,
            "query": query.urlencode(),
        }
        return render(request, "campaigns/reviews.html", context)


class FreezeListView(PortalPermissionRequiredMixin, View):
    """Accepted candidates not frozen yet, across campaigns: sortable by fitness and the other
    columns, filtered by platform, problem, review state and a search."""

    def get(self, request):
        params, sort, query = _filters(request)
        page = Paginator(
            selectors.freeze_candidates(**params), selectors.FREEZE_LIST_SIZE
        ).get_page(request.GET.get("page"))
        context = {
            "filters": CandidateFilterForm(request.GET),
            "page": page,
            "rows": page.object_list,
            "query": query.urlencode(),
            "problems": selectors.problem_list().values_list("name", flat=True),
            "headers": _headers(query, sort, FREEZE_LIST_COLUMNS),
        }
        if request.htmx:
            return render(request, "campaigns/partials/freeze_table.html", context)
        return render(request, "campaigns/freeze_list.html", context)


class NodeCompareView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int):
        campaign = get_object_or_404(selectors.campaigns_for_reading(), pk=pk)
        left, right = request.GET.get("a", ""), request.GET.get("b", "")
        keys = list(campaign.nodes.order_by("id").values_list("key", flat=True)[:5000])
        context = {"campaign": campaign, "keys": keys, "a": left, "b": right}
        if left and right:
            try:
                context["compare"] = selectors.candidate_compare(
                    campaign_id=pk, left=left, right=right
                )
            except Node.DoesNotExist as exc:
                context["compare_error"] = str(exc)
        return render(request, "campaigns/compare.html", context)


class CampaignInsightView(PortalPermissionRequiredMixin, View):
    """Search insight: parameter importance, parallel coordinates, slices and history."""

    def get(self, request, pk: int):
        campaign = get_object_or_404(selectors.campaign_list(), pk=pk)
        found = insight.campaign_insight(campaign=campaign)
        figures = insight_charts.insight_figures(found, baseline=campaign.baseline)
        context = {"campaign": campaign, "insight": found, "figures": figures}
        return render(request, "campaigns/insight.html", context)


class NodeContinueView(PortalPermissionRequiredMixin, View):
    portal_permission = "control_campaign"

    def post(self, request, pk: int, key: str):
        node = selectors.node_get(campaign_id=pk, key=key)
        form = ContinueForm(request.POST)
        if not form.is_valid():
            errors = "; ".join(f"{k}: {' '.join(v)}" for k, v in form.errors.items())
            messages.error(request, f"Not continued: {errors}")
            return redirect("campaigns:node", pk=pk, key=key)
        try:
            campaign = campaign_services.campaign_continue_from_node(
                node=node, created_by=request.user, **form.cleaned_data
            )
        except ValidationError as exc:
            messages.error(request, " ".join(exc.messages))
            return redirect("campaigns:node", pk=pk, key=key)
        return redirect("campaigns:detail", pk=campaign.pk)


class InboxView(PortalPermissionRequiredMixin, View):
    def get(self, request):
        return render(request, "campaigns/inbox.html", selectors.inbox_for(user=request.user))


class InboxUnreadView(PortalPermissionRequiredMixin, View):
    """The inbox link's unread badge (every page asks for it once loaded, and again now and
    then; the pages themselves do not count, so their query counts stay as they are)."""

    def get(self, request):
        context = {"unread": selectors.inbox_unread_count(user=request.user)}
        return render(request, "campaigns/partials/inbox_unread.html", context)


class MentionSuggestView(PortalPermissionRequiredMixin, View):
    """Usernames for @-autocomplete in comment and review boxes: `?q=<what follows the @>`."""

    def get(self, request):
        return JsonResponse({"users": selectors.mention_suggestions(prefix=request.GET.get("q"))})


class InboxReadAllView(PortalPermissionRequiredMixin, View):
    """Mark every mention of this user read."""

    def post(self, request):
        count = review_services.mentions_mark_all_read(user=request.user)
        messages.success(request, f"{count} mention{'s' if count != 1 else ''} marked read.")
        return redirect("campaigns:inbox")


class PortfolioView(PortalPermissionRequiredMixin, View):
    def get(self, request):
        rows = selectors.portfolio()
        context = {"rows": rows, "figure": charts.portfolio_figure(rows)}
        return render(request, "campaigns/portfolio.html", context)


def _suite_list(request, form=None, status=200):
    context = {"runs": suite_selectors.suite_run_list(), "form": form or SuiteRunImportForm()}
    return render(request, "campaigns/suite_list.html", context, status=status)


class SuiteRunListView(PortalPermissionRequiredMixin, View):
    """Imported benchmark-suite runs with their counts; the import form for authors."""

    def get(self, request):
        return _suite_list(request)


class SuiteRunImportView(PortalPermissionRequiredMixin, View):
    """Import a suite run from its JSON file; a refused file shows why and saves nothing."""

    portal_permission = "author_campaign"

    def post(self, request):
        form = SuiteRunImportForm(request.POST, request.FILES)
        if form.is_valid():
            try:
                run = suite_services.suite_run_import(
                    doc=form.cleaned_data["file"],
                    name=form.cleaned_data["name"],
                    imported_by=request.user,
                )
            except ValidationError as exc:
                for field, errors in exc.message_dict.items():
                    form.add_error("file" if field == "document" else field, errors)
            else:
                messages.success(request, f"Imported {run.name}: {run.results.count()} problems.")
                return redirect("campaigns:suite-detail", pk=run.pk)
        return _suite_list(request, form, status=422)


class SuiteRunDetailView(PortalPermissionRequiredMixin, View):
    """One suite run: where it ran, the per-family summary and chart, and every problem's
    result, filtered by family and outcome (htmx swaps the table; a plain GET works too)."""

    def get(self, request, pk: int):
        run = get_object_or_404(suite_selectors.suite_run_list(), pk=pk)
        filters = SuiteResultFilterForm(
            request.GET, families=suite_selectors.suite_run_families(run=run)
        )
        params = filters.cleaned_data if filters.is_valid() else {}
        context = {
            "run": run,
            "filters": filters,
            "results": suite_selectors.suite_results(
                run=run, family=params.get("family"), outcome=params.get("outcome")
            ),
        }
        if request.htmx:
            return render(request, "campaigns/partials/suite_results.html", context)
        summary = suite_selectors.suite_run_summary(run=run)
        context["summary"] = summary
        context["figure"] = (
            charts.suite_speedup_figure(summary.speedups, run.baseline)
            if summary.cuda
            else charts.suite_outcome_figure(summary.families, summary.no_template)
        )
        return render(request, "campaigns/suite_detail.html", context)
