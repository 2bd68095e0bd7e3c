"""Markdown bodies are rendered through an allow-list: script and event handlers are inert."""

import pytest
from django.test import Client

from apps.knowledge.rendering import markdown_render, snapshot_diff

ATTACK = """# Title

<script>alert('x')</script>
<img src=x onerror="alert(1)">
[click](javascript:alert(2))
<a href="https://example.org" onclick="alert(3)">ok link</a>
<iframe src="https://evil.example"></iframe>
<p style="position:fixed">styled</p>

```python
x = "<b>not bold</b>"
```
"""


def test_markdown_is_sanitised():
    html = str(markdown_render(ATTACK))
    assert "<h1>Title</h1>" in html
    for bad in ("<script", "onerror", "javascript:", "onclick", "<iframe", "style=", "<img"):
        assert bad not in html
    assert 'href="https://example.org"' in html and 'rel="noopener noreferrer nofollow"' in html
    assert "&lt;b&gt;not bold&lt;/b&gt;" in html


@pytest.mark.django_db
def test_entry_page_and_preview_render_it_inert(make_entry, people):
    entry = make_entry(title="<script>alert('t')</script>", body=ATTACK)
    client = Client()
    client.force_login(people["curator"])
    page = client.get(f"/knowledge/{entry.pk}/").content.decode()
    assert "<script>alert" not in page and "onerror" not in page
    assert "&lt;script&gt;alert(&#x27;t&#x27;)&lt;/script&gt;" in page
    preview = client.post("/knowledge/preview/", {"body": ATTACK}).content.decode()
    assert "<script" not in preview and "onerror" not in preview and "<h1>Title</h1>" in preview
    history = client.get(f"/knowledge/{entry.pk}/history/").content.decode()
    assert "<script>alert" not in history


def test_snapshot_diff_lists_fields_and_body_lines():
    diff = snapshot_diff(
        {"title": "a", "body": "one\ntwo", "tags": ["x"]},
        {"title": "b", "body": "one\nthree", "tags": ["x"]},
    )
    assert diff["fields"] == [{"field": "title", "old": "a", "new": "b"}]
    assert ("-", "two") in diff["body"] and ("+", "three") in diff["body"]
