"""Plotly figures for the registry pages, built in Python and rendered as JSON."""

from apps.campaigns.charts import log_axis
from apps.registry.constants import Path

COLOURS = {Path.DEFAULT: "#2357d9", Path.CANARY: "#e0a030", Path.FALLBACK: "#8a93a3"}


def latency_figure(latency: dict[str, list[float]]) -> dict | None:
    """Latency distributions per serving path (default vs canary, and the fallback)."""
    traces = []
    for path in (Path.DEFAULT, Path.CANARY, Path.FALLBACK):
        samples = latency.get(path) or []
        if not samples:
            continue
        traces.append(
            {
                "type": "violin",
                "name": f"{Path(path).label} ({len(samples)})",
                "y": samples,
                "box": {"visible": True},
                "meanline": {"visible": True},
                "points": False,
                "line": {"color": COLOURS[path]},
            }
        )
    if not traces:
        return None
    return {
        "data": traces,
        "layout": {
            "height": 300,
            "margin": {"l": 50, "r": 10, "t": 30, "b": 40},
            "title": {"text": "Latency per call (ms)", "font": {"size": 13}},
            "yaxis": log_axis("ms", [y for t in traces for y in t["y"]]),
            "showlegend": False,
            "paper_bgcolor": "rgba(0,0,0,0)",
            "plot_bgcolor": "rgba(0,0,0,0)",
        },
    }
