"""Log axes on the latency charts (issue 12: a reviewer read "5, 2, 0.1, 5" on one: Plotly
labels a log axis's minor ticks with their leading digit only). Every log axis is ticked at
1-2-5 values that cover the data and labelled as the plain numbers they are."""

from apps.campaigns.charts import latency_box_figure, latency_ecdf_figure, log_axis
from apps.registry.figures import latency_figure


def _series(samples):
    return [
        {
            "case": "c1",
            "weight": 1.0,
            "runs": [
                {"name": "candidate", "samples_ms": samples, "median_ms": samples[0]},
                {"name": "compile", "samples_ms": [s * 2 for s in samples], "median_ms": 1},
            ],
        }
    ]


def test_a_log_axis_reads_as_numbers_that_cover_the_data():
    axis = log_axis("ms", [0.0123, 0.0456])
    assert axis["type"] == "log" and axis["tickmode"] == "array"
    assert axis["ticktext"] == ["0.01", "0.02", "0.05"]
    assert axis["tickvals"] == [0.01, 0.02, 0.05]
    # a wide range keeps to decades, a narrow one still gets a label
    assert log_axis("ms", [0.001, 5000])["ticktext"] == ["0.001", "0.01", "0.1", "1", "10", "100",
                                                        "1000"]  # fmt: skip
    assert log_axis("ms", [0.031, 0.0312])["ticktext"] == ["0.031"]
    assert "tickvals" not in log_axis("ms", [])  # nothing timed: Plotly's own
    # every tick is inside the drawn range, also where it lies just outside the data
    for data in ([0.142, 0.205], [0.0123, 0.0456], [3.2, 48]):
        axis = log_axis("ms", data)
        lo, hi = (10**x for x in axis["range"])
        assert lo <= min(axis["tickvals"]) and max(axis["tickvals"]) <= hi, data


def test_every_latency_chart_uses_it():
    samples = [0.021, 0.024, 0.03]
    box = latency_box_figure(_series(samples))["layout"]["yaxis"]
    ecdf = latency_ecdf_figure(_series(samples))["layout"]["xaxis"]
    registry = latency_figure({"default": samples})["layout"]["yaxis"]
    for axis in (box, ecdf, registry):
        assert axis["ticktext"] and all(not t.isdigit() or int(t) >= 1 for t in axis["ticktext"])
        assert min(axis["tickvals"]) <= 0.021 * 1.25 and max(axis["tickvals"]) >= 0.03 / 1.25
    assert box["ticktext"] == ["0.02", "0.05"]
