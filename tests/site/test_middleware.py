"""The Content-Security-Policy: on every page, scripts and style sheets from the site only, and
no template that the policy would break (inline scripts, styles or on* handlers)."""

import re
from pathlib import Path

import pytest

from apps.accounts.services import user_upsert

TEMPLATES = Path(__file__).resolve().parent.parent.parent / "templates"


def _directives(header: str) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in header.split("; ")}


@pytest.mark.django_db
def test_pages_carry_a_strict_content_security_policy(client):
    login = client.get("/accounts/login/")
    policy = _directives(login["Content-Security-Policy"])
    assert policy["script-src"] == ["'self'"] and policy["style-src"] == ["'self'"]
    assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'none'"]
    client.force_login(user_upsert(username="csp-viewer", password="pw", roles=["viewer"]))
    for url in ["/campaigns/", "/registry/", "/knowledge/", "/api/docs/"]:
        assert "script-src 'self';" in client.get(url)["Content-Security-Policy"], url


def test_no_template_needs_inline_script_or_style():
    inline_script = re.compile(r"<script(?![^>]*\bsrc=)(?![^>]*application/json)[^>]*>", re.I)
    handler = re.compile(r"\son[a-z]+\s*=", re.I)
    for path in TEMPLATES.rglob("*.html"):
        text = path.read_text()
        assert not inline_script.search(text), f"{path}: inline <script>"
        assert "<style" not in text, f"{path}: inline <style>"
        assert not handler.search(text), f"{path}: an on* handler attribute"
