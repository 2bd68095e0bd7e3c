"""Forms for knowledge pages: the search filters and the entry editor (provenance as fields)."""

from django import forms
from django.contrib.auth.models import Group

from apps.campaigns.constants import Platform
from apps.knowledge.constants import (
    LABEL_MAX_LENGTH,
    SEARCH_TEXT_MAX_LENGTH,
    EntryKind,
    EntryStatus,
    Visibility,
)
from apps.knowledge.selectors.entries import group_has_member

PROVENANCE_FIELDS = (
    ("platform", "Platform it was observed on"),
    ("device", "Device"),
    ("compute_capability", "Compute capability"),
    ("driver", "Driver"),
    ("cuda", "CUDA"),
    ("torch", "torch"),
    ("triton", "Triton"),
    ("python", "Python"),
    ("benchmark_range", "Benchmark range"),
    ("source", "Source (document, campaign, commit)"),
)


def outside_group_warning(group: Group) -> str:
    return (
        f"You are not in {group.name}. Once saved, only members of {group.name}, curators and "
        "admins will see this entry, and generators will use it only for campaigns of "
        f"{group.name}'s members. Tick the box to confirm."
    )


def _blank(choices) -> list[tuple[str, str]]:
    return [("", "any"), *choices]


class SearchForm(forms.Form):
    q = forms.CharField(required=False, label="Search", max_length=SEARCH_TEXT_MAX_LENGTH)
    kind = forms.ChoiceField(required=False, choices=_blank(EntryKind.choices))
    platform = forms.ChoiceField(required=False, choices=_blank(Platform.choices))
    family = forms.CharField(required=False, max_length=LABEL_MAX_LENGTH)
    status = forms.ChoiceField(required=False, choices=_blank(EntryStatus.choices))
    tag = forms.CharField(required=False, max_length=LABEL_MAX_LENGTH)


class EntryForm(forms.Form):
    title = forms.CharField(max_length=200)
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 14}), help_text="Markdown")
    kind = forms.ChoiceField(choices=EntryKind.choices)
    tags = forms.CharField(required=False, help_text="comma-separated")
    families = forms.CharField(required=False, help_text="operator families, comma-separated")
    platforms = forms.CharField(required=False, help_text="interpret, cuda; empty: all")
    expires_on = forms.DateField(required=False, widget=forms.DateInput(attrs={"type": "date"}))
    visibility = forms.ChoiceField(choices=Visibility.choices)
    group = forms.ModelChoiceField(
        queryset=Group.objects.order_by("name"), required=False, to_field_name="name"
    )
    reason = forms.CharField(max_length=500, help_text="why this change (kept in the history)")
    confirm_group = forms.BooleanField(
        required=False, label="Restrict it to this group although I am not in it"
    )

    def __init__(self, *args, editor=None, entry=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.editor, self.entry = editor, entry
        self.group_to_confirm = None  # set by clean(): the page shows the warning and the tick
        for key, label in PROVENANCE_FIELDS:
            self.fields[f"prov_{key}"] = forms.CharField(required=False, label=label)

    def outside_group(self, visibility: str, group) -> Group | None:
        """The group this form would newly restrict the entry to when the editor is not in it
        (None otherwise): saving that needs the editor's tick."""
        if visibility != Visibility.RESTRICTED or group is None or self.editor is None:
            return None
        entry = self.entry
        if entry is not None and entry.visibility == Visibility.RESTRICTED:
            if entry.group_id == group.pk:
                return None  # already restricted to it: nothing new to confirm
        return None if group_has_member(group=group, user=self.editor) else group

    def clean(self):
        data = super().clean()
        group = self.outside_group(data.get("visibility", ""), data.get("group"))
        self.group_to_confirm = group
        if group is not None and not data.get("confirm_group"):
            self.add_error("confirm_group", "Confirm the group you are not in, or choose another.")
        return data

    @classmethod
    def initial_for(cls, entry) -> dict:
        initial = {
            "title": entry.title,
            "body": entry.body,
            "kind": entry.kind,
            "tags": ", ".join(entry.tag_list),
            "families": ", ".join(entry.family_list),
            "platforms": ", ".join(entry.platform_list),
            "expires_on": entry.expires_on,
            "visibility": entry.visibility,
            "group": entry.group.name if entry.group_id else None,
        }
        for key, _ in PROVENANCE_FIELDS:
            initial[f"prov_{key}"] = (entry.provenance or {}).get(key, "")
        return initial

    def entry_fields(self, *, provenance: dict | None = None) -> dict:
        """Cleaned data as service keyword arguments (other provenance keys are kept)."""
        data = self.cleaned_data
        prov = dict(provenance or {})
        for key, _ in PROVENANCE_FIELDS:
            prov[key] = data[f"prov_{key}"].strip()
        return {
            "title": data["title"],
            "body": data["body"],
            "kind": data["kind"],
            "tags": data["tags"],
            "families": data["families"],
            "platforms": data["platforms"],
            "expires_on": data["expires_on"],
            "visibility": data["visibility"],
            "group": data["group"],
            "provenance": prov,
        }


class ImportForm(forms.Form):
    files = forms.FileField(
        widget=forms.ClearableFileInput(attrs={"allow_multiple_selected": True}),
        help_text="Markdown files with front matter (.md)",
    )
