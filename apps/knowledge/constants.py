"""Choices and limits for the knowledge base (DESIGN.md §6)."""

from django.db import models


class EntryKind(models.TextChoices):
    HARDWARE_RULE = "hardware_rule", "Hardware rule"
    COMPILER_BEHAVIOUR = "compiler_behaviour", "Compiler behaviour"
    PATTERN = "pattern", "Pattern that worked"
    FAILED_APPROACH = "failed_approach", "Failed approach"
    CONSTRAINT = "constraint", "Constraint / anti-cheat rule"


class EntryStatus(models.TextChoices):
    DRAFT = "draft", "Draft"
    ACTIVE = "active", "Active"
    NEEDS_REVALIDATION = "needs_revalidation", "Needs revalidation"
    RETIRED = "retired", "Retired"
    REJECTED = "rejected", "Rejected"


class Visibility(models.TextChoices):
    PUBLIC = "public", "Public"
    RESTRICTED = "restricted", "Restricted to a group"


class EntryOrigin(models.TextChoices):
    STARTER = "starter", "Starter set"
    MANUAL = "manual", "Written by a curator"
    CAMPAIGN = "campaign", "Campaign finding"
    IMPORT = "import", "Imported file"


# Statuses a search page shows when no status filter is chosen.
DEFAULT_LISTED_STATUSES = (
    EntryStatus.ACTIVE,
    EntryStatus.NEEDS_REVALIDATION,
    EntryStatus.DRAFT,
)

# Curator actions on an entry's status: action -> (allowed from, new status).
CURATION_ACTIONS = {
    "accept": ((EntryStatus.DRAFT,), EntryStatus.ACTIVE),
    "reject": ((EntryStatus.DRAFT,), EntryStatus.REJECTED),
    "revalidated": ((EntryStatus.NEEDS_REVALIDATION,), EntryStatus.ACTIVE),
    "retire": (
        (EntryStatus.DRAFT, EntryStatus.ACTIVE, EntryStatus.NEEDS_REVALIDATION),
        EntryStatus.RETIRED,
    ),
    "reactivate": ((EntryStatus.RETIRED, EntryStatus.REJECTED), EntryStatus.ACTIVE),
}

# Provenance keys compared with the current toolchain fingerprint, and how many leading version
# components count (None: the whole value). Triton 3.6.0 -> 3.9.0 flags an entry; a driver patch
# release (580.159.04 -> 580.163.01) does not.
FINGERPRINT_KEYS = {
    "triton": 2,
    "torch": 2,
    "cuda": 2,
    "driver": 1,
    "compute_capability": None,
    "device": None,
}

# Content fields each version snapshots (the same ones a revert restores).
VERSIONED_FIELDS = (
    "title",
    "body",
    "kind",
    "tags",
    "families",
    "platforms",
    "status",
    "status_note",
    "expires_on",
    "visibility",
    "group",
    "provenance",
)

# Retrieval for generators: how many entries a prompt gets and how much of each body.
RETRIEVAL_LIMIT = 5
RETRIEVAL_BODY_CHARS = 1200
# Query terms kept from a retrieval query (problem name, family, feedback, source identifiers).
RETRIEVAL_MAX_TERMS = 40
# Bounds on query input (API and pages): a label filter becomes a LIKE pattern, which SQLite
# refuses past 50,000 bytes, and search text is split into terms.
LABEL_MAX_LENGTH = 100
SEARCH_TEXT_MAX_LENGTH = 500
RETRIEVAL_SOURCE_MAX_LENGTH = 1 << 20
RETRIEVAL_FEEDBACK_MAX_CHARS = 16_384
# Extra score for entries specific to the query's family or platform, and for kinds that
# matter most in a mode (repair prompts want failed approaches and constraints first).
FAMILY_BOOST = 1.0
# Weight of the relevance to gate feedback alone (repairs), on top of the whole query's.
FEEDBACK_WEIGHT = 1.5
PLATFORM_BOOST = 0.5
MODE_KIND_BOOST = {
    "repair": {EntryKind.FAILED_APPROACH: 0.6, EntryKind.CONSTRAINT: 0.6},
    "seed": {EntryKind.PATTERN: 0.4, EntryKind.HARDWARE_RULE: 0.3},
    "mutation": {EntryKind.PATTERN: 0.4, EntryKind.FAILED_APPROACH: 0.3},
}

SEARCH_PAGE_SIZE = 50
STARTER_DIR_NAME = "starter"
# Negative-evidence drafts per campaign (the most frequent gate/rule groups first).
MAX_FAILURE_DRAFTS = 5
