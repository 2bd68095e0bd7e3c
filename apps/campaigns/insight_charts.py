"""Plotly figures of the search insight page (`apps.campaigns.insight`), as plain JSON-able
dicts like `apps.campaigns.charts`: parameter importance, parallel coordinates, one slice per
parameter, and fitness by candidate number. static/js/charts.js draws and themes them. A figure
with nothing to show is `None`; the page says why instead.
"""

from typing import TYPE_CHECKING

from apps.campaigns import charts
from apps.campaigns.constants import Baseline

if TYPE_CHECKING:  # the selector module composes the page from these figures: no cycle
    from apps.campaigns.insight import Insight, Parameter, Trial

ACCEPTED = {"name": "accepted", "color": charts.LANE_COLOURS["accepted"], "symbol": "circle"}
# Timed, then rejected (slower than the baseline, or a frequent case regressed): hollow grey.
REJECTED = {"name": "rejected after timing", "color": "#8a93a3", "symbol": "circle-open"}
BEST = "#2357d9"
BASELINE = "#c62828"
COLOURSCALE = "Viridis"


def value_label(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def importance_figure(parameters: "tuple[Parameter, ...]") -> dict | None:
    """Each parameter's share of the fitness variance (eta²), highest on top."""
    rated = [p for p in parameters if p.importance is not None]
    if not rated:
        return None
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "y": [p.name for p in rated],
                "x": [round(100 * p.importance, 1) for p in rated],
                "text": [f"{100 * p.importance:.0f}%" for p in rated],
                "textposition": "auto",
                "customdata": [len(p.values) for p in rated],
                "marker": {"color": BEST},
                "hovertemplate": (
                    "%{y}: %{x:.1f}% of the fitness variance<br>%{customdata} value(s)"
                    "<extra></extra>"
                ),
            }
        ],
        "layout": charts._layout(
            height=70 + 30 * len(rated),
            xaxis={"title": {"text": "share of fitness variance explained (%)"}, "range": [0, 100]},
            yaxis={"autorange": "reversed", "automargin": True},
            margin={"l": 110, "r": 20, "t": 10, "b": 50},
        ),
    }


# Plotly's Viridis, in 9 steps: a line's colour is its fitness's step (low dark, high yellow).
VIRIDIS = [
    "#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c",
    "#28ae80", "#5ec962", "#addc30", "#fde725",
]  # fmt: skip
AXIS_LINE = "#8a93a3"  # readable on both themes' panels


def _scaled(values: list[float]) -> list[float]:
    low, high = min(values), max(values)
    if high - low <= 0:
        return [0.5 for _ in values]
    return [(v - low) / (high - low) for v in values]


def _axis(label: str, values: list, ordered: tuple | None) -> dict:
    """An axis of the parallel coordinates: each trial's height on it (0 to 1) and value as
    text, and the ticks (height, text).

    `ordered`: the values spaced evenly by rank (categories, few-valued numbers); None for a
    continuous number, drawn to scale with its least, middle and greatest values marked."""
    if ordered is not None:
        step = 1 / (len(ordered) - 1) if len(ordered) > 1 else 0
        rank = {v: i for i, v in enumerate(ordered)}
        heights = [rank[v] * step if step else 0.5 for v in values]
        ticks = [(i * step if step else 0.5, value_label(v)) for i, v in enumerate(ordered)]
        return {
            "label": label,
            "heights": heights,
            "ticks": ticks,
            "labels": [value_label(v) for v in values],
        }
    low, high = min(values), max(values)
    ticks = [(0.0, low), (0.5, (low + high) / 2), (1.0, high)] if high > low else [(0.5, low)]
    return {
        "label": label,
        "heights": _scaled(values),
        "ticks": [(h, f"{v:.3g}") for h, v in ticks],
        "labels": [f"{v:.4g}" for v in values],
    }


def parallel_figure(insight: "Insight") -> dict | None:
    """One line per timed template candidate through every varied parameter to its fitness,
    coloured by fitness. Categories and few-valued numbers are spaced evenly by rank, labelled
    with their values; an axis says which were rejected after timing.

    Drawn as SVG lines rather than Plotly's `parcoords`: that trace renders through regl, which
    compiles its shaders with `new Function`, and the portal's Content-Security-Policy (no
    'unsafe-eval', settings.CONTENT_SECURITY_POLICY) leaves it showing "WebGL is not supported".
    """
    trials, varied = insight.timed, insight.varied
    if not varied or len(trials) < 2:
        return None
    axes = [
        _axis(p.name, [t.value(p.name) for t in trials], p.values if p.ordinal else None)
        for p in varied
    ]
    if insight.counts["timed_accepted"] and insight.counts["timed_rejected"]:
        verdicts = ["accepted" if t.accepted else "rejected" for t in trials]
        axes.append(_axis("verdict", verdicts, ("rejected", "accepted")))
    fitness = [t.fitness for t in trials]
    axes.append(_axis("fitness (×)", fitness, None))
    axes[-1]["ticks"] = [(h, f"{text}×") for h, text in axes[-1]["ticks"]]
    steps = [min(len(VIRIDIS) - 1, int(s * len(VIRIDIS))) for s in _scaled(fitness)]
    data = []
    # Fittest last, so drawn on top.
    for step, colour in enumerate(VIRIDIS):
        members = [i for i, s in enumerate(steps) if s == step]
        if not members:
            continue
        xs: list = []
        ys: list = []
        texts: list = []
        for i in members:
            t = trials[i]
            xs += [*range(len(axes)), None]
            ys += [a["heights"][i] for a in axes] + [None]
            # The candidate and this axis's value (its fitness and verdict are axes too):
            # the header repeated at every vertex was two thirds of the page (issue 12).
            texts += [f"{t.key}: {a['label']} = {a['labels'][i]}" for a in axes] + [""]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": xs,
                "y": ys,
                "text": texts,
                "hovertemplate": "%{text}<extra></extra>",
                "line": {"color": colour, "width": 1.5},
                "marker": {"color": colour, "size": 4},
                "opacity": 0.8,
                "showlegend": False,
            }
        )
    data.append(
        {  # the colour bar: one invisible point outside the plot carries the scale
            "type": "scatter",
            "mode": "markers",
            "x": [0],
            "y": [-10],
            "hoverinfo": "skip",
            "showlegend": False,
            "marker": {
                "color": [min(fitness), max(fitness)],
                "colorscale": COLOURSCALE,
                "showscale": True,
                "colorbar": {"title": {"text": "fitness"}, "thickness": 12, "ticksuffix": "×"},
            },
        }
    )
    shapes = [
        {
            "type": "line",
            "x0": x,
            "x1": x,
            "y0": 0,
            "y1": 1,
            "line": {"color": AXIS_LINE, "width": 1},
            "layer": "below",
        }
        for x in range(len(axes))
    ]
    annotations = []
    for x, a in enumerate(axes):
        annotations.append(
            {
                "name": f"axis {a['label']}",
                "x": x,
                "y": 1,
                "yshift": 14,
                "text": f"<b>{a['label']}</b>",
                "showarrow": False,
                "yanchor": "bottom",
            }
        )
        last = x == len(axes) - 1  # the fitness axis: its values to the right, clear of lines
        annotations += [
            {
                "x": x,
                "y": h,
                "xshift": 4 if last else -4,
                "text": text,
                "showarrow": False,
                "xanchor": "left" if last else "right",
                "font": {"size": 10},
            }
            for h, text in a["ticks"]
        ]
    return {
        "data": data,
        "layout": charts._layout(
            height=420,
            showlegend=False,
            shapes=shapes,
            annotations=annotations,
            xaxis={"visible": False, "range": [-0.6, len(axes) - 0.55], "fixedrange": True},
            yaxis={"visible": False, "range": [-0.05, 1.05], "fixedrange": True},
            margin={"l": 30, "r": 20, "t": 50, "b": 20},
        ),
    }


def slice_figure(p: "Parameter", trials: "tuple[Trial, ...]", *, baseline: str) -> dict:
    """The parameter's value against fitness, one point per timed candidate."""
    data = []
    for style, members in (
        (ACCEPTED, [t for t in trials if t.accepted]),
        (REJECTED, [t for t in trials if not t.accepted]),
    ):
        if not members:
            continue
        xs = [t.value(p.name) for t in members]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": style["name"],
                "x": [value_label(x) for x in xs] if p.ordinal else xs,
                "y": [t.fitness for t in members],
                "text": [t.key for t in members],
                "marker": {
                    "color": style["color"],
                    "symbol": style["symbol"],
                    "size": 8,
                    "opacity": 0.85,
                    "line": {"width": 1.5, "color": style["color"]},
                },
                "hovertemplate": (
                    f"%{{text}}: {p.name} %{{x}}, %{{y:.3f}}×<extra>{style['name']}</extra>"
                ),
            }
        )
    xaxis = {"title": {"text": p.name}}
    if p.ordinal:
        xaxis |= {
            "type": "category",
            "categoryorder": "array",
            "categoryarray": [value_label(v) for v in p.values],
        }
    return {
        "data": data,
        "layout": charts._layout(
            height=250,
            showlegend=False,
            xaxis=xaxis,
            yaxis={"title": {"text": f"speedup over {_peer(baseline)}"}},
            margin={"l": 55, "r": 25, "t": 10, "b": 45},
        ),
    }


def slice_figures(insight: "Insight", *, baseline: str) -> list[dict]:
    """{name, script_id, figure} per varied parameter, most important first."""
    if len(insight.timed) < 2:
        return []
    return [
        {
            "name": p.name,
            "script_id": f"figure-slice-{i}",
            "figure": slice_figure(p, insight.timed, baseline=baseline),
        }
        for i, p in enumerate(insight.varied, start=1)
    ]


def history_figure(
    trials: "tuple[Trial, ...]", *, best_path: tuple = (), baseline: str
) -> dict | None:
    """Fitness of each timed candidate by its number in evaluation order, accepted and rejected
    apart, with the campaign's best so far (`insight.best_path`: number, key, fitness) as a step
    line and the baseline at 1×."""
    timed = [t for t in trials if t.fitness is not None]
    if not timed:
        return None
    data = []
    for style, members in (
        (ACCEPTED, [t for t in timed if t.accepted]),
        (REJECTED, [t for t in timed if not t.accepted]),
    ):
        if not members:
            continue
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": style["name"],
                "x": [t.number for t in members],
                "y": [t.fitness for t in members],
                "text": [f"{t.key} · {t.generator}" for t in members],
                "marker": {
                    "color": style["color"],
                    "symbol": style["symbol"],
                    "size": 8,
                    "line": {"width": 1.5, "color": style["color"]},
                },
                "hovertemplate": f"#%{{x}} %{{text}}: %{{y:.3f}}×<extra>{style['name']}</extra>",
            }
        )
    if best_path:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "campaign's best so far",
                "x": [number for number, _, _ in best_path],
                "y": [fitness for _, _, fitness in best_path],
                "text": [key for _, key, _ in best_path],
                "line": {"shape": "hv", "color": BEST, "width": 2},
                "hovertemplate": "best after #%{x}: %{text}, %{y:.3f}×<extra></extra>",
            }
        )
    data.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"baseline ({_peer(baseline)})",
            "x": [1, max(trials[-1].number, 1)],
            "y": [1.0, 1.0],
            "line": {"dash": "dash", "color": BASELINE, "width": 1},
            "hoverinfo": "skip",
        }
    )
    return {
        "data": data,
        "layout": charts._layout(
            height=320,
            xaxis={
                "title": {"text": "candidate number (evaluation order)"},
                **charts.count_axis(max(trials[-1].number, 1)),
            },
            yaxis={"title": {"text": f"weighted speedup over {_peer(baseline)}"}},
        ),
    }


def insight_figures(insight: "Insight", *, baseline: str) -> dict:
    """Every figure of the page (None or [] where there is nothing to draw)."""
    return {
        "importance": importance_figure(insight.parameters),
        "parallel": parallel_figure(insight),
        "slices": slice_figures(insight, baseline=baseline),
        "history": history_figure(insight.trials, best_path=insight.best_path, baseline=baseline),
    }


def _peer(baseline: str) -> str:
    """What a campaign's speedups are over, in an axis title."""
    return "the best peer per case" if baseline == Baseline.BEST else baseline
