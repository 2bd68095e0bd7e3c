"""Models of the knowledge base: entries with provenance and visibility, and their versions.

Tags, operator families and platforms are stored as comma-wrapped labels (``,tma,hopper,``) so
that one ``contains`` lookup filters them on SQLite and PostgreSQL alike; the ``*_list``
properties give them back as lists.
"""

import unicodedata

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.urls import reverse

from apps.knowledge.constants import EntryKind, EntryOrigin, EntryStatus, Visibility


def labels_join(values) -> str:
    """`["TMA", "hopper "]` -> `",tma,hopper,"` (lower-case, unique, order kept); "" when empty."""
    seen: list[str] = []
    for value in values or []:
        label = unicodedata.normalize("NFC", str(value)).strip().lower().replace(",", " ")
        if label and label not in seen:
            seen.append(label)
    return f",{','.join(seen)}," if seen else ""


def labels_split(stored: str) -> list[str]:
    return [label for label in (stored or "").split(",") if label]


class Entry(models.Model):
    """A short, searchable note: a hardware rule, compiler behaviour, pattern, failed approach or
    constraint, with the provenance it was observed under, a status and a visibility."""

    slug = models.SlugField(max_length=120, unique=True)
    title = models.CharField(max_length=200)
    body = models.TextField(help_text="Markdown; rendered with an allow-list sanitiser.")
    kind = models.CharField(max_length=30, choices=EntryKind, db_index=True)
    tags = models.CharField(max_length=500, blank=True)
    families = models.CharField(max_length=300, blank=True)
    platforms = models.CharField(max_length=100, blank=True)
    status = models.CharField(
        max_length=30, choices=EntryStatus, default=EntryStatus.ACTIVE, db_index=True
    )
    # Why the status is what it is: the fingerprint change that flagged it, a rejection reason.
    status_note = models.TextField(blank=True)
    expires_on = models.DateField(null=True, blank=True)
    visibility = models.CharField(max_length=20, choices=Visibility, default=Visibility.PUBLIC)
    group = models.ForeignKey(
        Group, null=True, blank=True, on_delete=models.PROTECT, related_name="knowledge_entries"
    )
    # device, compute_capability, driver, cuda, torch, triton, python, benchmark_range, source.
    provenance = models.JSONField(default=dict, blank=True)
    evidence_campaigns = models.ManyToManyField(
        "campaigns.Campaign", blank=True, related_name="knowledge_entries"
    )
    evidence_nodes = models.ManyToManyField(
        "campaigns.Node", blank=True, related_name="knowledge_entries"
    )
    origin = models.CharField(max_length=20, choices=EntryOrigin, default=EntryOrigin.MANUAL)
    # A campaign finding's identity, so that ending a campaign twice drafts it once.
    source_campaign = models.ForeignKey(
        "campaigns.Campaign",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="knowledge_drafts",
    )
    finding_key = models.CharField(max_length=120, blank=True)
    version = models.PositiveIntegerField(default=1)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["title"]
        verbose_name_plural = "entries"
        constraints = [
            models.UniqueConstraint(
                fields=["source_campaign", "finding_key"],
                condition=models.Q(source_campaign__isnull=False),
                name="knowledge_finding_once_per_campaign",
            ),
            models.CheckConstraint(
                condition=models.Q(visibility="public", group__isnull=True)
                | models.Q(visibility="restricted", group__isnull=False),
                name="knowledge_restricted_has_group",
            ),
        ]

    def __str__(self) -> str:
        return self.title

    def get_absolute_url(self) -> str:
        return reverse("knowledge:entry", args=[self.pk])

    @property
    def tag_list(self) -> list[str]:
        return labels_split(self.tags)

    @property
    def family_list(self) -> list[str]:
        return labels_split(self.families)

    @property
    def platform_list(self) -> list[str]:
        return labels_split(self.platforms)


class EntryVersion(models.Model):
    """One saved state of an entry: every edit, status change and revert adds one, with its
    author and reason; `snapshot` holds the versioned fields (constants.VERSIONED_FIELDS)."""

    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    snapshot = models.JSONField()
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reason = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["entry", "-number"]
        constraints = [
            models.UniqueConstraint(fields=["entry", "number"], name="knowledge_version_unique")
        ]

    def __str__(self) -> str:
        return f"{self.entry_id} v{self.number}"
