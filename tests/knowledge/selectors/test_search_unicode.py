"""Search keeps Unicode letters (issue 12, defect 7: `ünïcødé` found nothing though a title held
it, and `✓` matched every entry). Runs on SQLite (FTS5) and PostgreSQL (tsvector) alike."""

import unicodedata

import pytest

from apps.knowledge.selectors.search import entry_search, search_terms

pytestmark = pytest.mark.django_db


def titles(entries) -> list[str]:
    return [e.title for e in entries]


def test_terms_keep_letters_of_any_script_and_drop_symbols():
    assert search_terms("ünïcødé") == ["ünïcødé"]
    assert search_terms("ÜNÏCØDÉ, हिन्दी!") == ["ünïcødé", "हिन्दी"]
    assert search_terms("ＴＭＡ ﬁnal") == ["tma", "final"]  # NFKC: full-width, ligature
    assert search_terms('tl.dot_fp32 "x" OR y*') == ["tl", "dot", "fp32", "x", "or", "y"]
    assert search_terms("✓") == [] and search_terms("✓ -- ★ \u0301") == []


def test_a_title_with_accents_is_found_as_typed(make_entry, people):
    make_entry(title="Notes on ünïcødé kernels", body="Names with accents.")
    make_entry(title="Plain ASCII note", body="Nothing special.")
    viewer = people["viewer"]
    assert titles(entry_search(user=viewer, text="ünïcødé")) == ["Notes on ünïcødé kernels"]
    assert titles(entry_search(user=viewer, text="ÜNÏCØDÉ")) == ["Notes on ünïcødé kernels"]
    decomposed = unicodedata.normalize("NFD", "ünïcødé")
    assert titles(entry_search(user=viewer, text=decomposed)) == ["Notes on ünïcødé kernels"]


def test_text_typed_decomposed_is_found_composed(make_entry, people):
    make_entry(title=unicodedata.normalize("NFD", "Réduction en fp32"), body="Précision.")
    [entry] = entry_search(user=people["viewer"], text="réduction")
    assert entry.title == "Réduction en fp32"  # stored NFC


def test_a_query_of_symbols_matches_nothing(make_entry, people):
    make_entry(title="Checked ✓ note")
    make_entry(title="Another note")
    assert list(entry_search(user=people["viewer"], text="✓")) == []
    assert list(entry_search(user=people["viewer"], text=" ★ ✓ ")) == []
    assert len(entry_search(user=people["viewer"], text="")) == 2
