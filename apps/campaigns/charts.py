"""Plotly figures of campaigns and candidates, built in Python as plain JSON-able dicts.

Pages and the API serve these dicts; static/js/charts.js hands them to Plotly.react. They are
plain dicts rather than plotly.graph_objects because validating 2,000-node figures costs more
than the page budget. No figure invents data: when what it needs is missing, it is `None` and
the caller shows `empty_reason(...)` instead.
"""

import math
import zlib
from collections import defaultdict

# Where a node got to, bottom to top: one lane per gate it failed, then accepted, pending, and
# cancelled (unevaluated when its campaign ended) on top.
LANES = [
    ("static", "rejected at static"),
    ("compile", "failed to compile"),
    ("correctness", "incorrect"),
    ("performance", "slower / not significant"),
    ("accepted", "accepted"),
    ("pending", "pending or evaluating"),
    ("cancelled", "cancelled unevaluated"),
]
LANE_INDEX = {key: i for i, (key, _) in enumerate(LANES)}
LANE_COLOURS = {
    "static": "#8e44ad",
    "compile": "#c0392b",
    "correctness": "#e67e22",
    "performance": "#7f8c8d",
    "accepted": "#1a7f37",
    "pending": "#9aa3b2",
    "cancelled": "#c9ced6",
}
EDGE_STYLES = {
    "seed": ("#2357d9", "solid"),
    "mutation": ("#5b6475", "solid"),
    "repair": ("#c62828", "dot"),
    "crossover": ("#8e44ad", "dash"),
    "alternative": ("#a15c00", "dashdot"),
}
FONT = {"family": "system-ui, sans-serif", "size": 12}


def _layout(**extra) -> dict:
    base = {
        "margin": {"l": 60, "r": 20, "t": 30, "b": 45},
        "font": FONT,
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "legend": {"orientation": "h", "y": -0.18},
        "hovermode": "closest",
    }
    base.update(extra)
    return base


def node_lane(status: str, failed_gate: str) -> str:
    """The lane of a node: the gate that stopped it, accepted, pending, or cancelled."""
    if status == "accepted":
        return "accepted"
    if status in ("pending", "evaluating"):
        return "pending"
    if status == "cancelled":
        return "cancelled"
    if failed_gate == "fitness":
        return "performance"
    return failed_gate if failed_gate in LANE_INDEX else "static"


def node_position(n: dict) -> tuple[float, float]:
    """x = round, y = lane; a pure function of the node, so pages of the graph are independent.

    Inside a lane, a timed node sits higher the fitter it is; others are spread by a hash of
    their key (deterministic, so a node does not jump between refreshes).
    """
    lane = node_lane(n["status"], n["failed_gate"])
    h = zlib.crc32(n["key"].encode())
    dx = ((h & 0xFFFF) / 0xFFFF - 0.5) * 0.7
    if n.get("fitness"):
        dy = max(-0.4, min(0.4, 0.4 * math.log2(n["fitness"])))
    else:
        dy = ((h >> 16) / 0xFFFF - 0.5) * 0.7
    return round(n["round"] + dx, 3), round(LANE_INDEX[lane] + dy, 3)


def graph_figure(
    *, nodes: list[dict], edges: list[dict], node_url: str, revision: str, rounds: int
) -> dict:
    """One page of the search graph; the browser concatenates pages trace by trace (by name).

    `nodes`: dicts with key, round, status, failed_gate, fitness, generator. `edges`: the
    in-edges of those nodes, dicts with kind, `child` and `parent` (node dicts, parent None for a
    seed). `node_url` has a `{key}` slot. `rounds`: the campaign's last round, for the x range.
    """
    traces = []
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for e in edges:
        if e["parent"] is not None:
            by_kind[e["kind"]].append(e)
    for kind in EDGE_STYLES:
        members = by_kind.get(kind) or []
        colour, dash = EDGE_STYLES[kind]
        xs: list = []
        ys: list = []
        for e in members:
            (x0, y0), (x1, y1) = node_position(e["parent"]), node_position(e["child"])
            xs += [x0, x1, None]
            ys += [y0, y1, None]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{kind} edge",
                "x": xs,
                "y": ys,
                "hoverinfo": "skip",
                "line": {"color": colour, "dash": dash, "width": 1},
                "opacity": 0.45,
            }
        )
    by_lane: dict[str, list[dict]] = defaultdict(list)
    for n in nodes:
        by_lane[node_lane(n["status"], n["failed_gate"])].append(n)
    for lane, label in LANES:
        members = by_lane.get(lane) or []
        points = [node_position(n) for n in members]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": label,
                "x": [p[0] for p in points],
                "y": [p[1] for p in points],
                "customdata": [node_url.replace("{key}", n["key"]) for n in members],
                "text": [
                    f"{n['key']} · round {n['round']} · {n['generator']}<br>"
                    + (f"fitness {n['fitness']:.3f}×" if n["fitness"] else "no timing")
                    for n in members
                ],
                "hovertemplate": "%{text}<extra>" + label + "</extra>",
                "marker": {
                    "color": LANE_COLOURS[lane],
                    "size": [_marker_size(n["fitness"]) for n in members],
                    "line": {"width": 0.5, "color": "#ffffff"},
                },
            }
        )
    layout = _layout(
        uirevision=revision,
        height=460,
        xaxis={"title": {"text": "round"}, "range": [-0.6, rounds + 0.6]},
        yaxis={
            "title": {"text": ""},
            "tickvals": list(range(len(LANES))),
            "ticktext": [label for _, label in LANES],
            "range": [-0.6, len(LANES) - 0.4],
        },
        dragmode="pan",
        margin={"l": 170, "r": 20, "t": 20, "b": 45},
    )
    return {"data": traces, "layout": layout}


def _marker_size(fitness: float | None) -> float:
    if not fitness:
        return 7.0
    return round(max(6.0, min(22.0, 9.0 + 10.0 * math.log2(max(fitness, 0.25)))), 1)


def funnel_figure(funnel: dict) -> dict | None:
    """Generated -> rejected per gate -> accepted, with device-seconds per gate beside it."""
    if not funnel or not funnel.get("generated"):
        return None
    stages = [
        ("generated", "generated"),
        ("static_rejected", "static rejected"),
        ("compile_failed", "compile failed"),
        ("incorrect", "incorrect"),
        ("slower", "slower / not significant"),
        ("errored", "errored"),
        ("pending", "pending"),
        ("accepted", "accepted"),
        ("cancelled", "cancelled unevaluated"),
    ]
    colours = [
        "#2357d9",
        LANE_COLOURS["static"],
        LANE_COLOURS["compile"],
        LANE_COLOURS["correctness"],
        LANE_COLOURS["performance"],
        "#5b6475",
        LANE_COLOURS["pending"],
        LANE_COLOURS["accepted"],
        LANE_COLOURS["cancelled"],
    ]
    if not funnel.get("cancelled"):
        stages, colours = stages[:-1], colours[:-1]
    return {
        "data": [
            {
                "type": "bar",
                "orientation": "h",
                "y": [label for _, label in stages],
                "x": [funnel.get(key, 0) for key, _ in stages],
                "text": [str(funnel.get(key, 0)) for key, _ in stages],
                "textposition": "auto",
                "marker": {"color": colours},
                "hovertemplate": "%{y}: %{x}<extra></extra>",
            }
        ],
        "layout": _layout(
            height=300,
            yaxis={"autorange": "reversed"},
            xaxis={"title": {"text": "candidates"}},
            margin={"l": 170, "r": 20, "t": 20, "b": 45},
        ),
    }


def device_seconds_figure(funnel: dict) -> dict | None:
    """Device-seconds spent per gate (and on the baseline)."""
    by_gate = dict((funnel or {}).get("device_s_by_gate") or {})
    if funnel and funnel.get("baseline_device_s"):
        by_gate["baseline"] = funnel["baseline_device_s"]
    if not any(v for v in by_gate.values()):
        return None
    return {
        "data": [
            {
                "type": "bar",
                "x": list(by_gate),
                "y": [round(v, 4) for v in by_gate.values()],
                "marker": {"color": "#2357d9"},
                "hovertemplate": "%{x}: %{y:.3f} device-s<extra></extra>",
            }
        ],
        "layout": _layout(height=260, yaxis={"title": {"text": "device-seconds"}}),
    }


def fitness_over_time_figure(*, points: list[dict], baseline: str) -> dict | None:
    """Best weighted speedup so far against evaluation order, with the baseline at 1×.

    `points`: evaluated nodes in evaluation order, dicts with key, fitness, ci_low, ci_high.
    """
    timed = [p for p in points if p["fitness"]]
    if not timed:
        return None
    xs, best, best_keys = [], [], []
    current, current_key = None, ""
    for i, p in enumerate(points, start=1):
        if p["fitness"] and (current is None or p["fitness"] > current):
            current, current_key = p["fitness"], p["key"]
        xs.append(i)
        best.append(current)
        best_keys.append(current_key)
    return {
        "data": [
            {
                "type": "scatter",
                "mode": "markers",
                "name": "candidate",
                "x": [i for i, p in enumerate(points, start=1) if p["fitness"]],
                "y": [p["fitness"] for p in timed],
                "text": [p["key"] for p in timed],
                "error_y": {
                    "type": "data",
                    "symmetric": False,
                    "array": [
                        max(0.0, (p["ci_high"] or p["fitness"]) - p["fitness"]) for p in timed
                    ],
                    "arrayminus": [
                        max(0.0, p["fitness"] - (p["ci_low"] or p["fitness"])) for p in timed
                    ],
                    "thickness": 1,
                },
                "marker": {"color": "#9aa3b2", "size": 6},
                "hovertemplate": "%{text}: %{y:.3f}×<extra></extra>",
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": "best so far",
                "x": xs,
                "y": best,
                "text": best_keys,
                "line": {"shape": "hv", "color": "#1a7f37", "width": 2},
                "hovertemplate": "best %{text}: %{y:.3f}×<extra></extra>",
            },
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"baseline ({baseline})",
                "x": [1, max(len(points), 1)],
                "y": [1.0, 1.0],
                "line": {"dash": "dash", "color": "#c62828"},
                "hoverinfo": "skip",
            },
        ],
        "layout": _layout(
            height=300,
            xaxis={"title": {"text": "candidates evaluated"}},
            yaxis={"title": {"text": f"weighted speedup over {baseline}"}},
        ),
    }


def _samples(timing: dict | None) -> list[float]:
    if not timing:
        return []
    samples = timing.get("samples_ms")
    return [float(x) for x in samples] if isinstance(samples, list) else []


def latency_series(cases: list[dict]) -> list[dict]:
    """Per timed workload case: the candidate's and each baseline's samples and summary."""
    series = []
    for case in cases:
        timing = case.get("timing")
        if not timing or not timing.get("median_ms"):
            continue
        runs = [("candidate", timing)] + [
            (name, t) for name, t in sorted((case.get("baselines") or {}).items()) if t
        ]
        series.append(
            {
                "case": case["name"],
                "weight": case.get("weight", 0.0),
                "runs": [
                    {
                        "name": name,
                        "median_ms": t.get("median_ms"),
                        "ci95_ms": t.get("ci95_ms"),
                        "samples_ms": _samples(t),
                    }
                    for name, t in runs
                ],
            }
        )
    return series


RUN_COLOURS = {"candidate": "#2357d9", "eager": "#c62828", "compile": "#a15c00"}


def latency_box_figure(series: list[dict]) -> dict | None:
    """Box plots of the timed samples per case: candidate beside eager and torch.compile."""
    if not series:
        return None
    traces = []
    for run_name in _run_names(series):
        xs, ys = [], []
        for s in series:
            run = next((r for r in s["runs"] if r["name"] == run_name), None)
            if not run:
                continue
            samples = run["samples_ms"] or ([run["median_ms"]] if run["median_ms"] else [])
            xs += [s["case"]] * len(samples)
            ys += samples
        traces.append(
            {
                "type": "box",
                "name": run_name,
                "x": xs,
                "y": ys,
                "boxpoints": False,
                "marker": {"color": RUN_COLOURS.get(run_name, "#5b6475")},
            }
        )
    return {
        "data": traces,
        "layout": _layout(
            height=340, boxmode="group", yaxis={"title": {"text": "ms"}, "type": "log"}
        ),
    }


def latency_ecdf_figure(series: list[dict]) -> dict | None:
    """ECDF of the samples of the heaviest timed case (the one that matters most)."""
    with_samples = [s for s in series if any(r["samples_ms"] for r in s["runs"])]
    if not with_samples:
        return None
    case = max(with_samples, key=lambda s: s["weight"])
    traces = []
    for run in case["runs"]:
        xs = sorted(run["samples_ms"])
        if not xs:
            continue
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": run["name"],
                "x": xs,
                "y": [(i + 1) / len(xs) for i in range(len(xs))],
                "line": {"shape": "hv", "color": RUN_COLOURS.get(run["name"], "#5b6475")},
            }
        )
    return {
        "data": traces,
        "layout": _layout(
            height=300,
            title={"text": f"ECDF · {case['case']} (heaviest case)", "font": {"size": 13}},
            xaxis={"title": {"text": "ms"}, "type": "log"},
            yaxis={"title": {"text": "fraction of runs"}, "range": [0, 1.02]},
        ),
    }


def _run_names(series: list[dict]) -> list[str]:
    names: list[str] = []
    for s in series:
        for r in s["runs"]:
            if r["name"] not in names:
                names.append(r["name"])
    return names


def weights_figure(cases: list[dict]) -> dict | None:
    """Workload weights (call counts) per case, as imported from a trace or a workload file."""
    if not cases:
        return None
    total = sum(float(c.get("weight") or 0) for c in cases) or 1.0
    return {
        "data": [
            {
                "type": "bar",
                "x": [c["name"] for c in cases],
                "y": [float(c.get("weight") or 0) / total for c in cases],
                "marker": {"color": "#2357d9"},
                "hovertemplate": "%{x}: %{y:.1%} of calls<extra></extra>",
            }
        ],
        "layout": _layout(
            height=260, yaxis={"title": {"text": "share of calls"}, "tickformat": ".0%"}
        ),
    }


def portfolio_figure(rows: list[dict]) -> dict | None:
    """Accepted kernels vs no-safe-improvement outcomes per operator family and platform."""
    if not rows:
        return None
    labels = [f"{r['family'] or '—'} · {r['platform']}" for r in rows]
    return {
        "data": [
            {
                "type": "bar",
                "name": "improved",
                "x": labels,
                "y": [r["improved"] for r in rows],
                "marker": {"color": "#1a7f37"},
            },
            {
                "type": "bar",
                "name": "no safe improvement",
                "x": labels,
                "y": [r["no_safe_improvement"] for r in rows],
                "marker": {"color": "#7f8c8d"},
            },
            {
                "type": "bar",
                "name": "other / running",
                "x": labels,
                "y": [r["campaigns"] - r["improved"] - r["no_safe_improvement"] for r in rows],
                "marker": {"color": "#9aa3b2"},
            },
        ],  # fmt: skip
        "layout": _layout(height=300, barmode="stack", yaxis={"title": {"text": "campaigns"}}),
    }
