"""Forms for campaign pages: they validate input; services do the work."""

import json

from django import forms

from apps.campaigns.constants import (
    Baseline,
    CampaignStatus,
    Outcome,
    Platform,
    Policy,
    SuiteOutcome,
)
from apps.campaigns.models import Problem, ReviewDecision
from kernelevolve_site.parsers import JSONBoundsError, JSONTooDeep, json_loads_bounded

MAX_UPLOAD_BYTES = 1 << 20


def _read_text(upload, field: str) -> str:
    if upload is None:
        return ""
    if upload.size > MAX_UPLOAD_BYTES:
        raise forms.ValidationError({field: f"at most {MAX_UPLOAD_BYTES >> 10} KiB"})
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise forms.ValidationError({field: "not UTF-8 text"}) from exc


class CampaignForm(forms.Form):
    """Author a campaign: a catalog problem, or an uploaded one with its workload or trace.

    After a preview or any error the uploads travel on as text in hidden fields
    (`problem_source`, `workload_json`, with their file names), so the user does not pick the
    files again; an upload that was itself in error is dropped, and a workload given once is
    never silently replaced by none (`workload_expected`, `no_workload`).
    """

    problem = forms.ModelChoiceField(
        queryset=Problem.objects.order_by("name"),
        required=False,
        empty_label="— upload a problem instead —",
        help_text="A problem from the catalog (with its production workload).",
    )
    problem_file = forms.FileField(
        required=False,
        label="Problem file",
        help_text="KernelBench format: class Model, get_inputs(), get_init_inputs().",
    )
    problem_name = forms.SlugField(required=False, max_length=100, label="Problem name")
    problem_source = forms.CharField(required=False, widget=forms.HiddenInput)
    problem_filename = forms.CharField(required=False, widget=forms.HiddenInput)
    workload_file = forms.FileField(
        required=False,
        label="Workload JSON",
        help_text='{"cases": [{"name", "overrides", "dtype", "weight"}]}',
    )
    trace_file = forms.FileField(
        required=False,
        label="Trace (CSV or JSON)",
        help_text="Rows of module constants (e.g. batch_size, dim), dtype and a call count.",
    )
    workload_json = forms.CharField(required=False, widget=forms.HiddenInput)
    workload_filename = forms.CharField(required=False, widget=forms.HiddenInput)
    workload_expected = forms.CharField(required=False, widget=forms.HiddenInput)
    no_workload = forms.BooleanField(
        required=False,
        label="Run without a workload",
        help_text="Drop the workload given before and run the module's own sizes (one case).",
    )
    name = forms.CharField(required=False, max_length=200)
    platform = forms.ChoiceField(choices=Platform.choices, initial=Platform.INTERPRET)
    generators = forms.MultipleChoiceField(
        choices=[("template", "template"), ("llm", "llm"), ("cute", "cute (CuTe DSL, cuda only)")],
        initial=["template"],
        widget=forms.CheckboxSelectMultiple,
    )
    policy = forms.ChoiceField(choices=Policy.choices)
    budget_candidates = forms.IntegerField(min_value=1, max_value=5000, initial=12)
    budget_device_seconds = forms.FloatField(min_value=1, initial=600)
    budget_wall_seconds = forms.FloatField(min_value=10, initial=1800)
    # The peer most users already have (issue 11); eager is timed beside it in every case.
    baseline = forms.ChoiceField(choices=Baseline.choices, initial=Baseline.COMPILE)
    incumbent_file = forms.FileField(
        required=False,
        label="Incumbent kernel",
        help_text="The kernel you serve today (class ModelNew, the candidate format): the judge "
        "with baseline Incumbent, one of the peers with Best peer per case. Timed on cuda only.",
    )
    incumbent_source = forms.CharField(required=False, strip=False, widget=forms.HiddenInput)
    incumbent_filename = forms.CharField(required=False, widget=forms.HiddenInput)
    regression_tolerance = forms.FloatField(min_value=0, max_value=1, initial=0.02)

    UPLOAD_FIELDS = ("problem_file", "problem_name", "workload_file", "trace_file")

    def clean(self):
        data = super().clean()
        problem_upload = data.get("problem_file")
        source = _read_text(problem_upload, "problem_file")
        if not source and not data.get("problem"):
            # A kept upload stands until a file replaces it; picking a catalog problem drops it.
            source = data.get("problem_source", "")
        data["upload_source"] = source
        data["upload_filename"] = (
            problem_upload.name if problem_upload else source and data.get("problem_filename", "")
        )
        data["workload_text"] = _read_text(data.get("workload_file"), "workload_file")
        if data["workload_text"].strip():
            try:
                json_loads_bounded(data["workload_text"])
            except JSONTooDeep as exc:
                # The service reports other JSON errors with their line; this one it would crash on.
                self.add_error("workload_file", f"not a usable workload: {exc}")
            except JSONBoundsError:
                pass
        data["trace_text"] = _read_text(data.get("trace_file"), "trace_file")
        incumbent = data.get("incumbent_file")
        if incumbent is not None:
            data["incumbent_text"] = _read_text(incumbent, "incumbent_file")
            data["incumbent_filename"] = incumbent.name
        else:  # the one kept from the last submit, if any
            data["incumbent_text"] = data.get("incumbent_source") or ""
        picked = data.get("trace_file") or data.get("workload_file")
        data["workload_given"] = bool(data["workload_text"].strip() or data["trace_text"].strip())
        data["workload_filename"] = (
            picked.name if picked and data["workload_given"] else data.get("workload_filename", "")
        )
        if data.get("problem") and source:
            self.add_error("problem_file", "pick a catalog problem or upload one, not both")
        elif not data.get("problem") and not source:
            self.add_error("problem", "pick a catalog problem or upload a problem file")
        if source and not data.get("problem_name"):
            stem = data["upload_filename"].rsplit(".", 1)[0]
            if not stem:
                self.add_error("problem_name", "name the uploaded problem")
            data["problem_name"] = stem.replace("_", "-").lower()
        carried = data.get("workload_json") or ""
        if data.get("no_workload"):
            carried = ""
        if carried and not data["workload_given"]:
            try:
                data["carried_workload"] = json_loads_bounded(carried)
            except JSONBoundsError:
                self.add_error("workload_file", "the previewed workload was damaged; upload again")
        expected = data.get("workload_expected") or ""
        if (
            not data.get("problem")
            and expected
            and not data["workload_given"]
            and not carried
            and not data.get("no_workload")
        ):
            # A workload was given before but could not be kept: never run without it silently.
            self.add_error(
                "workload_file",
                f"the workload or trace you gave before ({expected}) was not kept: pick it again, "
                "or tick “Run without a workload”",
            )
        return data

    def carry_uploads(self, *, workload: dict | None = None) -> None:
        """Keep what was uploaded for the next submit (after a preview or an error).

        The problem travels as text unless it was itself in error; the workload travels as the
        validated workload (`workload`, from the view's call to the upload service). A workload
        that was given but is in error cannot travel: it is remembered by name, so a start
        without it is refused until it is picked again or dropped on purpose.
        """
        cleaned = getattr(self, "cleaned_data", {}) or {}
        data = self.data.copy()
        source = cleaned.get("upload_source", "")
        keep_source = source and not cleaned.get("problem") and not self.has_error("problem_file")
        data["problem_source"] = source if keep_source else ""
        data["problem_filename"] = cleaned.get("upload_filename", "") if keep_source else ""
        if keep_source and not data.get("problem_name"):
            data["problem_name"] = cleaned.get("problem_name", "")
        if cleaned.get("problem") or (
            cleaned.get("no_workload") and not cleaned.get("workload_given")
        ):
            # A catalog problem runs its own workload: nothing uploaded is kept for it.
            workload = None
        elif workload is None and not cleaned.get("workload_given"):
            workload = cleaned.get("carried_workload")
        name = cleaned.get("workload_filename", "")
        in_error = self.has_error("workload_file") or self.has_error("trace_file")
        data["workload_json"] = json.dumps(workload) if workload and not in_error else ""
        data["workload_filename"] = name if workload and not in_error else ""
        given_before = cleaned.get("workload_given") or data.get("workload_expected")
        dropped = cleaned.get("problem") or cleaned.get("no_workload")
        data["workload_expected"] = (
            name or data.get("workload_expected") or "your workload"
            if given_before and not data["workload_json"] and not dropped
            else ""
        )
        if "no_workload" in data and data["workload_json"]:
            del data["no_workload"]
        keep_incumbent = not self.has_error("incumbent_file")
        data["incumbent_source"] = cleaned.get("incumbent_text", "") if keep_incumbent else ""
        data["incumbent_filename"] = (
            cleaned.get("incumbent_filename", "") if data["incumbent_source"] else ""
        )
        self.data = data

    @property
    def carried(self) -> dict:
        """What the page says is kept from the last submit."""
        return {
            "problem": self["problem_source"].value()
            and (self["problem_filename"].value() or "the uploaded problem"),
            "workload": self["workload_json"].value()
            and (self["workload_filename"].value() or "its workload"),
            "expected": self["workload_expected"].value(),
            "incumbent": self["incumbent_source"].value()
            and (self["incumbent_filename"].value() or "the uploaded incumbent"),
        }


class CampaignFilterForm(forms.Form):
    """The campaign list's query string: filters, search and sort (kept in the URL)."""

    q = forms.CharField(required=False, label="Search")
    status = forms.ChoiceField(
        required=False, choices=[("", "any status"), *CampaignStatus.choices]
    )
    platform = forms.ChoiceField(required=False, choices=[("", "any platform"), *Platform.choices])
    outcome = forms.ChoiceField(
        required=False, choices=[("", "any outcome"), ("none", "no outcome yet"), *Outcome.choices]
    )
    problem = forms.CharField(required=False)
    sort = forms.CharField(required=False)


class CommentForm(forms.Form):
    body = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=10_000)
    line = forms.IntegerField(required=False, min_value=1)
    parent = forms.IntegerField(required=False, widget=forms.HiddenInput)


class ContinueForm(forms.Form):
    """A new campaign warm-started from a candidate: its budget and platform, asked (and so
    confirmed) before it starts."""

    budget_candidates = forms.IntegerField(min_value=1, max_value=5000, label="Budget (candidates)")
    platform = forms.ChoiceField(choices=Platform.choices)


class ReviewForm(forms.Form):
    """A reviewer's decision on a candidate, with what they have to say (required to request
    changes: the service says so). No decision: the candidate is only marked reviewed."""

    decision = forms.ChoiceField(
        required=False, choices=[("", "reviewed"), *ReviewDecision.choices]
    )
    body = forms.CharField(
        required=False,
        max_length=10_000,
        label="Review comment",
        widget=forms.Textarea(
            attrs={"rows": 3, "placeholder": "What you checked, or what should change"}
        ),
    )


REVIEW_FILTER_CHOICES = [
    ("", "any review"),
    ("awaiting", "awaiting a decision"),
    ("approved", "approved, no changes asked"),
    ("changes", "changes requested"),
]


class CandidateFilterForm(forms.Form):
    """The freeze list's and review list's query string: filters and sort (kept in the URL)."""

    q = forms.CharField(required=False, label="Search")
    platform = forms.ChoiceField(required=False, choices=[("", "any platform"), *Platform.choices])
    problem = forms.CharField(required=False)
    review = forms.ChoiceField(required=False, choices=REVIEW_FILTER_CHOICES)
    sort = forms.CharField(required=False)


# A suite run keeps every candidate's timings: a 100-problem cuda run is some hundreds of KiB.
MAX_SUITE_UPLOAD_BYTES = 8 << 20


class SuiteRunImportForm(forms.Form):
    """Import a run of ``scripts/bench_kernelbench.py``: its JSON file and a name."""

    name = forms.CharField(max_length=200, help_text="How the run is listed, e.g. kb1-h100.")
    file = forms.FileField(
        label="Run file", help_text="The JSON that bench_kernelbench.py --out wrote."
    )

    def clean_file(self) -> dict:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_SUITE_UPLOAD_BYTES:
            raise forms.ValidationError(f"at most {MAX_SUITE_UPLOAD_BYTES >> 20} MiB")
        try:
            return json_loads_bounded(upload.read().decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise forms.ValidationError("not UTF-8 text") from exc
        except JSONBoundsError as exc:
            raise forms.ValidationError(f"not JSON: {exc}") from exc


class SuiteResultFilterForm(forms.Form):
    """The per-problem table's filters: a family (the run's own) and an outcome."""

    family = forms.ChoiceField(required=False)
    outcome = forms.ChoiceField(
        required=False, choices=[("", "any outcome"), *SuiteOutcome.choices]
    )

    def __init__(self, *args, families: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["family"].choices = [("", "any family"), *((f, f) for f in families)]
        self.fields["family"].widget.attrs["aria-label"] = "Family"
        self.fields["outcome"].widget.attrs["aria-label"] = "Outcome"
