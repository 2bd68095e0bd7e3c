"""Forms of the registry pages (the API has its serializers)."""

from django import forms


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
