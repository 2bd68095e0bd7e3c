"""``json_data`` writes exactly what Django's ``json_script`` writes (the chart pages embed their
figures with it; it is ~7x faster on the insight page's half a megabyte), so a page's charts and
its escaping of ``</script>`` in user text are unchanged."""

import datetime

from django.utils.html import json_script

from apps.campaigns.templatetags.json_data import json_data


def test_json_data_is_byte_for_byte_json_script():
    value = {
        "text": ["</script><script>alert(1)</script>", "a & b < c > d", "ünïcødé ✓", "\u2028"],
        "numbers": [1, 2.5, None, True],
        "when": datetime.datetime(2026, 12, 1, 20, 0, tzinfo=datetime.UTC),
    }
    for element_id in ("figure-x", 'odd"id<&>'):
        assert str(json_data(value, element_id)) == str(json_script(value, element_id))
    assert "</script><script>" not in str(json_data(value, "figure-x"))
