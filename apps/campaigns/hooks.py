"""What the apps above ``campaigns`` plug into it (issue 13: dependencies go one way).

``campaigns`` is the base of the portal: ``knowledge`` and ``registry`` import it, never the
other way. Where a campaign needs something of theirs, they hand it over when Django starts
(their ``AppConfig.ready``):

- ``retriever_register(factory)``: the knowledge retriever a campaign's search uses;
  ``factory(user=, fingerprint=, platform=)`` returns ``retrieve(query) -> list[dict]``;
- ``campaign_finished``: a signal sent (``campaign_id=``) after a campaign's end is committed;
- ``inbox_register(source)``: a section of a user's inbox; ``source(user=)`` returns
  ``{name: items}`` to merge into it.
"""

from __future__ import annotations

from collections.abc import Callable

from django.dispatch import Signal

campaign_finished = Signal()

_retriever: list[Callable] = []
_inbox: list[Callable] = []


def retriever_register(factory: Callable) -> None:
    _retriever[:] = [factory]


def retriever_for(*, user, fingerprint: dict | None, platform: str) -> Callable | None:
    """The search's ``retrieve`` for a campaign's owner, or None when no app provides one."""
    if not _retriever:
        return None
    return _retriever[0](user=user, fingerprint=fingerprint, platform=platform)


def inbox_register(source: Callable) -> None:
    if source not in _inbox:
        _inbox.append(source)


def inbox_sections(*, user) -> dict:
    """Every registered app's inbox sections for ``user``, merged."""
    out: dict = {}
    for source in _inbox:
        out.update(source(user=user))
    return out
