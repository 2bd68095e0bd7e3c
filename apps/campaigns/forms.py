"""Forms for campaign pages: they validate input; services do the work."""

from django import forms

from apps.campaigns.constants import Platform, Policy
from apps.campaigns.models import Problem


class CampaignForm(forms.Form):
    problem = forms.ModelChoiceField(queryset=Problem.objects.order_by("name"))
    name = forms.CharField(required=False, max_length=200)
    platform = forms.ChoiceField(choices=Platform.choices, initial=Platform.INTERPRET)
    generators = forms.MultipleChoiceField(
        choices=[("template", "template"), ("llm", "llm")],
        initial=["template"],
        widget=forms.CheckboxSelectMultiple,
    )
    policy = forms.ChoiceField(choices=Policy.choices)
    budget_candidates = forms.IntegerField(min_value=1, max_value=5000, initial=12)
    budget_device_seconds = forms.FloatField(min_value=1, initial=600)
    budget_wall_seconds = forms.FloatField(min_value=10, initial=1800)
