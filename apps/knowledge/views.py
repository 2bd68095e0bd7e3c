"""Pages for knowledge: search, entry, edit with preview, history and diffs, curation queue,
bulk retire, import and export. Views validate, call one selector or service, and render."""

import io
import zipfile

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views import View

from apps.accounts.permissions import PortalPermissionRequiredMixin, has_portal_permission
from apps.knowledge.constants import SEARCH_PAGE_SIZE, EntryKind, EntryStatus
from apps.knowledge.forms import (
    PROVENANCE_FIELDS,
    EntryForm,
    ImportForm,
    SearchForm,
    outside_group_warning,
)
from apps.knowledge.markdown_files import entry_markdown
from apps.knowledge.models import Entry, EntryVersion
from apps.knowledge.rendering import markdown_render, snapshot_diff
from apps.knowledge.selectors.entries import (
    curation_queue,
    entries_visible,
    entry_get,
    entry_labels,
    entry_version_pair,
    entry_versions,
)
from apps.knowledge.selectors.exports import knowledge_export_files
from apps.knowledge.selectors.retrieval import entry_warning
from apps.knowledge.selectors.search import entry_search, search_terms
from apps.knowledge.services.entries import (
    knowledge_entries_retire,
    knowledge_entry_create,
    knowledge_entry_curate,
    knowledge_entry_revert,
    knowledge_entry_revise,
)
from apps.knowledge.services.imports import knowledge_import


def _entry_or_404(request, pk: int) -> Entry:
    try:
        return entry_get(user=request.user, pk=pk)
    except Entry.DoesNotExist as exc:
        raise Http404("No such entry") from exc


def _errors(exc: ValidationError) -> str:
    return " ".join(exc.messages)


class CurateMixin(PortalPermissionRequiredMixin):
    portal_permission = "curate_knowledge"


class IndexView(PortalPermissionRequiredMixin, View):
    def get(self, request):
        form = SearchForm(request.GET or None)
        filters = form.cleaned_data if form.is_valid() else {}
        text = filters.get("q", "")
        entries = entry_search(
            user=request.user,
            text=filters.get("q", ""),
            **{k: filters.get(k, "") for k in ("kind", "platform", "family", "status", "tag")},
        )
        context = {
            "form": form,
            "entries": list(entries[:SEARCH_PAGE_SIZE]),
            "searched": bool(filters and any(filters.values())),
            "nothing_to_search": bool(text.strip()) and not search_terms(text),
            "labels": entry_labels(user=request.user),
            "can_curate": has_portal_permission(request.user, "curate_knowledge"),
        }
        if request.htmx:
            return render(request, "knowledge/partials/results.html", context)
        return render(request, "knowledge/index.html", context)


class EntryDetailView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int):
        entry = _entry_or_404(request, pk)
        provenance = dict(entry.provenance or {})
        rows = [
            (label, provenance.pop(key)) for key, label in PROVENANCE_FIELDS if key in provenance
        ]
        rows += sorted(provenance.items())
        context = {
            "entry": entry,
            "body_html": markdown_render(entry.body),
            "provenance_rows": rows,
            "warning": entry_warning(entry),
            # Only the columns the lists show: a node's report is ~150 kB of JSON, a
            # campaign's engine state can be megabytes.
            "campaigns": entry.evidence_campaigns.only("id", "name"),
            "nodes": entry.evidence_nodes.only("id", "campaign_id", "key", "status", "failed_gate"),
            "can_curate": has_portal_permission(request.user, "curate_knowledge"),
        }
        return render(request, "knowledge/entry.html", context)


def _edit_context(form: EntryForm, **context) -> dict:
    group = form.group_to_confirm
    return {
        "form": form,
        "outside_group": group,
        "group_warning": outside_group_warning(group) if group else "",
        **context,
    }


class EntryCreateView(CurateMixin, View):
    def get(self, request):
        form = EntryForm(initial={"kind": EntryKind.PATTERN, "reason": "Written by a curator"})
        return render(request, "knowledge/edit.html", _edit_context(form))

    def post(self, request):
        form = EntryForm(request.POST, editor=request.user)
        if form.is_valid():
            try:
                entry = knowledge_entry_create(
                    by=request.user, reason=form.cleaned_data["reason"], **form.entry_fields()
                )
            except ValidationError as exc:
                form.add_error(None, _errors(exc))
            else:
                messages.success(request, "Entry created.")
                return redirect(entry)
        return render(request, "knowledge/edit.html", _edit_context(form), status=400)


class EntryEditView(CurateMixin, View):
    def get(self, request, pk: int):
        entry = _entry_or_404(request, pk)
        form = EntryForm(initial=EntryForm.initial_for(entry))
        context = _edit_context(form, entry=entry, preview=markdown_render(entry.body))
        return render(request, "knowledge/edit.html", context)

    def post(self, request, pk: int):
        entry = _entry_or_404(request, pk)
        form = EntryForm(request.POST, editor=request.user, entry=entry)
        if form.is_valid():
            try:
                entry = knowledge_entry_revise(
                    entry=entry,
                    by=request.user,
                    reason=form.cleaned_data["reason"],
                    **form.entry_fields(provenance=entry.provenance),
                )
            except ValidationError as exc:
                form.add_error(None, _errors(exc))
            else:
                messages.success(request, f"Saved as version {entry.version}.")
                return redirect(entry)
        preview = markdown_render(request.POST.get("body", ""))
        context = _edit_context(form, entry=entry, preview=preview)
        return render(request, "knowledge/edit.html", context, status=400)


class GroupCheckView(CurateMixin, View):
    """The edit page's warning, fetched when visibility or group changes: restricting an entry
    to a group the editor is not in needs a tick before the form can be saved."""

    def get(self, request):
        pk = request.GET.get("entry", "")
        entry = _entry_or_404(request, int(pk)) if pk.isdigit() else None
        form = EntryForm(editor=request.user, entry=entry)
        try:
            group = form.fields["group"].clean(request.GET.get("group", ""))
        except ValidationError:
            group = None
        form.group_to_confirm = form.outside_group(request.GET.get("visibility", ""), group)
        return render(request, "knowledge/partials/group_warning.html", _edit_context(form))


class PreviewView(CurateMixin, View):
    def post(self, request):
        html = markdown_render(request.POST.get("body", ""))
        return render(request, "knowledge/partials/preview.html", {"preview": html})


class HistoryView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int):
        entry = _entry_or_404(request, pk)
        versions = list(entry_versions(entry=entry))
        rows = []
        for i, version in enumerate(versions):
            previous = versions[i + 1].snapshot if i + 1 < len(versions) else None
            rows.append({"version": version, "diff": snapshot_diff(previous, version.snapshot)})
        context = {
            "entry": entry,
            "rows": rows,
            "can_curate": has_portal_permission(request.user, "curate_knowledge"),
        }
        return render(request, "knowledge/history.html", context)


class VersionView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int, number: int):
        entry = _entry_or_404(request, pk)
        try:
            version, previous = entry_version_pair(entry=entry, number=number)
        except EntryVersion.DoesNotExist as exc:
            raise Http404("No such version") from exc
        context = {
            "entry": entry,
            "version": version,
            "previous": previous,
            "diff": snapshot_diff(previous.snapshot if previous else None, version.snapshot),
            "body_html": markdown_render(version.snapshot.get("body", "")),
            "can_curate": has_portal_permission(request.user, "curate_knowledge"),
        }
        return render(request, "knowledge/version.html", context)


class RevertView(CurateMixin, View):
    def post(self, request, pk: int, number: int):
        entry = _entry_or_404(request, pk)
        try:
            entry = knowledge_entry_revert(
                entry=entry, by=request.user, number=number, reason=request.POST.get("reason", "")
            )
        except ValidationError as exc:
            messages.error(request, _errors(exc))
        else:
            done = f"Reverted to version {number} (now version {entry.version})."
            messages.success(request, done)
        return redirect("knowledge:history", pk=pk)


class CurateView(CurateMixin, View):
    def post(self, request, pk: int):
        entry = _entry_or_404(request, pk)
        action = request.POST.get("action", "")
        error = ""
        try:
            entry = knowledge_entry_curate(
                entry=entry, by=request.user, action=action, reason=request.POST.get("reason", "")
            )
        except ValidationError as exc:
            error = _errors(exc)
        if request.htmx:
            context = {"entry": entry, "error": error, "done": action if not error else ""}
            return render(request, "knowledge/partials/queue_row.html", context)
        if error:
            messages.error(request, error)
        else:
            messages.success(request, f"{entry.title}: {EntryStatus(entry.status).label}.")
        return redirect(request.POST.get("next") or entry.get_absolute_url())


class CurationQueueView(CurateMixin, View):
    def get(self, request):
        return render(request, "knowledge/curation.html", curation_queue(user=request.user))


class BulkRetireView(CurateMixin, View):
    def post(self, request):
        ids = [int(i) for i in request.POST.getlist("entry") if i.isdigit()]
        entries = entries_visible(user=request.user).filter(pk__in=ids)
        try:
            retired = knowledge_entries_retire(
                entries=list(entries), by=request.user, reason=request.POST.get("reason", "")
            )
        except ValidationError as exc:
            messages.error(request, _errors(exc))
        else:
            messages.success(request, f"Retired {len(retired)} of {len(ids)} selected entries.")
        return redirect(request.POST.get("next") or "knowledge:index")


class EntryMarkdownView(PortalPermissionRequiredMixin, View):
    def get(self, request, pk: int):
        entry = _entry_or_404(request, pk)
        response = HttpResponse(entry_markdown(entry), content_type="text/markdown; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{entry.slug}.md"'
        return response


class ExportView(PortalPermissionRequiredMixin, View):
    def get(self, request):
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, text in knowledge_export_files(user=request.user):
                archive.writestr(f"knowledge/{name}", text)
        response = HttpResponse(buffer.getvalue(), content_type="application/zip")
        response["Content-Disposition"] = 'attachment; filename="knowledge.zip"'
        return response


class ImportView(CurateMixin, View):
    def get(self, request):
        return render(request, "knowledge/import.html", {"form": ImportForm()})

    def post(self, request):
        form = ImportForm(request.POST, request.FILES)
        uploads = request.FILES.getlist("files")
        if not uploads:
            return render(request, "knowledge/import.html", {"form": form}, status=400)
        files = [(f.name, f.read().decode("utf-8", errors="replace")) for f in uploads]
        result = knowledge_import(files=files, by=request.user)
        return render(request, "knowledge/import.html", {"form": ImportForm(), "result": result})
