"""Fixtures for knowledge tests: users per role, a partner group, entries, a finished campaign."""

import pytest


@pytest.fixture
def people(db):
    """viewer, engineer, curator, admin; `insider` (viewer) and `partner_curator` (curator) are
    also in the `hopper-partners` group that restricted entries are shown to."""
    from django.contrib.auth.models import Group

    from apps.accounts.services import user_upsert

    users = {
        name: user_upsert(username=name, password=f"{name}-pw", roles=[role])
        for name, role in [
            ("viewer", "viewer"),
            ("engineer", "engineer"),
            ("curator", "curator"),
            ("admin", "admin"),
            ("insider", "viewer"),
            ("partner_curator", "curator"),
        ]
    }
    partners = Group.objects.create(name="hopper-partners")
    users["insider"].groups.add(partners)
    users["partner_curator"].groups.add(partners)
    users["group"] = partners
    return users


@pytest.fixture
def make_entry(db):
    from apps.knowledge.services.entries import knowledge_entry_create

    def make(**fields):
        defaults = {
            "by": None,
            "title": "Row softmax in one pass",
            "body": "Load the row once, reduce in float32.",
            "kind": "pattern",
        }
        return knowledge_entry_create(**{**defaults, **fields})

    return make


@pytest.fixture
def secret(make_entry, people):
    """A restricted hardware note only the partner group may see."""
    return make_entry(
        title="Proprietary Hopper TMA descriptor trick",
        body="Unreleased: prefetch TMA descriptors for softmax rows.",
        kind="hardware_rule",
        tags=["tma", "softmax"],
        families=["softmax"],
        platforms=["cuda"],
        visibility="restricted",
        group=people["group"],
    )


@pytest.fixture
def starter(db):
    from apps.knowledge.services.imports import knowledge_starter_load

    result = knowledge_starter_load()
    assert not result.errors
    return result
