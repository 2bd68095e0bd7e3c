"""Forms of the registry pages (the API has its serializers)."""

from django import forms

from apps.campaigns.constants import Platform
from apps.registry.constants import Stage


class ReasonForm(forms.Form):
    reason = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))


class PromoteForm(ReasonForm):
    canary_percent = forms.FloatField(required=False, min_value=0.01, max_value=100)


class RollbackForm(forms.Form):
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 2}))
    target = forms.CharField(required=False, help_text="'previous', 'reference' or an artifact id")


class NarrowForm(forms.Form):
    dtypes = forms.MultipleChoiceField(
        required=False,
        choices=[(d, d) for d in ("float32", "float16", "bfloat16", "float64")],
        widget=forms.CheckboxSelectMultiple,
    )


class FreezeListFilterForm(forms.Form):
    """The freeze list's query string: filters and sort (kept in the URL; bad values dropped)."""

    operator = forms.CharField(required=False)
    platform = forms.ChoiceField(
        required=False,
        choices=[("", "any platform"), *Platform.choices],
        widget=forms.Select(attrs={"aria-label": "Platform"}),
    )
    stage = forms.ChoiceField(
        required=False,
        choices=[("", "any stage"), *Stage.choices],
        widget=forms.Select(attrs={"aria-label": "Stage"}),
    )
    sort = forms.CharField(required=False)
