"""Plotly figures of campaigns and candidates, built in Python as plain JSON-able dicts.

Pages and the API serve these dicts; static/js/charts.js hands them to Plotly.react. They are
plain dicts rather than plotly.graph_objects because validating 2,000-node figures costs more
than the page budget. No figure invents data: when what it needs is missing, it is `None` and
the caller shows `empty_reason(...)` instead.
"""

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable

from apps.campaigns.constants import Backend, Baseline

# The search graph: one group per way a node ended (key, legend label, marker symbol), each in
# the funnel's colour for it. Rejected nodes share a symbol and their colour says the gate.
GRAPH_GROUPS = [
    ("accepted", "accepted", "circle"),
    ("static", "rejected · static", "x"),
    ("compile", "rejected · compile", "x"),
    ("correctness", "rejected · correctness", "x"),
    ("performance", "rejected · not faster", "x"),
    ("pending", "pending or evaluating", "circle-open"),
    ("cancelled", "cancelled unevaluated", "square-open"),
]
GROUP_KEYS = {key for key, _, _ in GRAPH_GROUPS}
LANE_COLOURS = {
    "static": "#8e44ad",
    "compile": "#c0392b",
    "correctness": "#e67e22",
    "performance": "#7f8c8d",
    "accepted": "#1a7f37",
    "pending": "#9aa3b2",
    "cancelled": "#c9ced6",
}
# Mid-tone lines that read on the light and the dark theme alike. A seed has no parent: no line.
EDGE_STYLES = {
    "mutation": ("#8a93a6", "solid"),
    "repair": ("#d9534f", "dot"),
    "crossover": ("#9b59b6", "dash"),
    "alternative": ("#c98a1b", "dashdot"),
}
BEST_COLOUR = "#e0a800"
# The graph is SVG (`scatter`) at every size. WebGL (`scattergl`) cannot draw on these pages:
# its regl renderer compiles shaders' glue with `new Function`, which the Content-Security-Policy
# (no 'unsafe-eval', settings.CONTENT_SECURITY_POLICY) refuses, and Plotly then shows "WebGL is
# not supported". SVG draws 2,000 nodes well inside the budget (docs/benchmarks.md, Portal):
# markers are one trace per status, and each edge kind one path with `None` between edges.
GRAPH_TRACE = "scatter"
FONT = {"family": "system-ui, sans-serif", "size": 12}


def _layout(**extra) -> dict:
    base = {
        "margin": {"l": 60, "r": 20, "t": 30, "b": 45},
        "font": FONT,
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        # At the foot of the figure, below the x axis's title: placed under the plot area
        # (yref "paper", y -0.18) it was drawn over that title on every chart with both.
        "legend": {"orientation": "h", "x": 0, "yref": "container", "y": 0, "yanchor": "bottom"},
        "hovermode": "closest",
    }
    base.update(extra)
    # Margins grow to fit tick labels and titles (rotated category names were clipped).
    for axis in ("xaxis", "yaxis"):
        base[axis] = {"automargin": True, **base.get(axis, {})}
    return base


def count_axis(largest: float) -> dict:
    """Ticks for an axis that counts (candidates, campaigns): whole numbers only, at most about
    eight of them, from 0. Left to itself Plotly ticks small counts at 0.5, 1.5 and so on."""
    for exponent in range(16):
        for mantissa in (1, 2, 5):
            step = mantissa * 10**exponent
            if largest / step <= 8:
                return {"tickmode": "linear", "tick0": 0, "dtick": step, "tickformat": ",d"}
    return {"tickformat": ",d"}


def log_axis(title: str, values: Iterable[float]) -> dict:
    """A log axis ticked at 1-2-5 values that cover ``values``, labelled as plain numbers
    (``0.02``, ``0.05``, ``0.1``). Left to itself Plotly labels the minor ticks of a log axis
    with their leading digit only, so an axis read "5, 2, 0.1, 5"."""
    axis = {"title": {"text": title}, "type": "log"}
    positive = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not positive:
        return axis
    lo, hi = min(positive), max(positive)
    ticks = [
        m * 10.0**e
        for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1)
        for m in (1, 2, 5)
    ]
    ticks = [t for t in ticks if lo / 1.25 <= t <= hi * 1.25]
    if len(ticks) > 9:  # a wide range: decades only
        ticks = [t for t in ticks if f"{t:g}".lstrip("0.").startswith("1")]
    if len(ticks) < 2:  # a narrow one: its ends, to two significant digits
        ticks = sorted({float(f"{lo:.2g}"), float(f"{hi:.2g}")})
    # The range holds every tick (Plotly's own would drop those just outside the data).
    ends = (math.log10(min(lo, ticks[0])), math.log10(max(hi, ticks[-1])))
    pad = 0.03 * max(ends[1] - ends[0], 0.1)
    return {
        **axis,
        "tickmode": "array",
        "tickvals": ticks,
        "ticktext": [f"{t:g}" for t in ticks],
        "range": [ends[0] - pad, ends[1] + pad],
    }


def node_group(status: str, failed_gate: str) -> str:
    """How a node ended: the gate that stopped it, accepted, pending, or cancelled."""
    if status == "accepted":
        return "accepted"
    if status in ("pending", "evaluating"):
        return "pending"
    if status == "cancelled":
        return "cancelled"
    if failed_gate == "fitness":
        return "performance"
    return failed_gate if failed_gate in GROUP_KEYS else "static"


def graph_layout(
    *, rounds: dict[Hashable, int], edges: Iterable[tuple[Hashable, Hashable]]
) -> dict[Hashable, tuple[int, float]]:
    """A layered drawing of the search graph: node -> (x, y), x its round, y its lane.

    `rounds`: node -> round, in creation order (ties keep it, so the output is a function of
    the input). `edges`: (parent, child) pairs; only those from an earlier round place a node.

    Rounds are placed first to last. A node's wanted height is the mean height of its parents
    (the barycenter heuristic of layered drawing, which removes most crossings between two
    rounds); a round is ordered by it, parentless nodes after the others, and spread to one
    lane apart with the least total movement from where they want to be. Nothing of a later
    round moves an earlier one, so on a live campaign only the round being filled changes.
    """
    parents: dict[Hashable, list] = defaultdict(list)
    for parent, child in edges:
        if parent in rounds and child in rounds and rounds[parent] < rounds[child]:
            parents[child].append(parent)
    layers: dict[int, list] = defaultdict(list)
    for node, r in rounds.items():
        layers[r].append(node)
    positions: dict[Hashable, tuple[int, float]] = {}
    for r in sorted(layers):
        wanted = {}
        for node in layers[r]:
            ys = [positions[p][1] for p in parents.get(node, ())]
            wanted[node] = sum(ys) / len(ys) if ys else None
        order = sorted(
            range(len(layers[r])),
            key=lambda i: (wanted[layers[r][i]] is None, wanted[layers[r][i]] or 0.0, i),
        )
        nodes = [layers[r][i] for i in order]
        targets: list[float] = []
        for i, node in enumerate(nodes):
            want = wanted[node]
            if want is None:  # a seed: centred when the round is all seeds, else after the rest
                want = targets[-1] + 1 if targets else i - (len(nodes) - 1) / 2
            targets.append(want)
        for node, y in zip(nodes, _spread(targets), strict=True):
            positions[node] = (r, round(y, 3))
    return positions


def _spread(targets: list[float]) -> list[float]:
    """Heights in the given order, each at least 1 above the one before, as close as possible
    (least squares) to `targets`: with z_i = y_i - i that is an isotonic regression of
    t_i - i, solved by pooling adjacent violators."""
    blocks: list[list[float]] = []  # [sum, count] of pooled z targets
    for i, t in enumerate(targets):
        blocks.append([t - i, 1])
        while len(blocks) > 1 and blocks[-2][0] * blocks[-1][1] > blocks[-1][0] * blocks[-2][1]:
            total, count = blocks.pop()
            blocks[-1][0] += total
            blocks[-1][1] += count
    heights: list[float] = []
    for total, count in blocks:
        z = total / count
        heights += [z + len(heights) + k for k in range(int(count))]
    return heights


def graph_figure(
    *,
    nodes: list[dict],
    edges: list[dict],
    node_url: str,
    revision: str,
    rounds: int,
    whole: tuple[list[dict], list[dict]] | None = None,
    best_key: str = "",
) -> dict:
    """One page of the search graph; the browser concatenates pages trace by trace.

    `nodes`: dicts with key, round, status, failed_gate, fitness, generator. `edges`: the
    in-edges of those nodes, dicts with kind, `child` and `parent` (node dicts, parent None for a
    seed). `node_url` has a `{key}` slot. `rounds`: the campaign's last round, for the x range.
    `whole`: every node and in-edge of the graph (same shapes) when this is one page of it: the
    layout, axes and legend come from the whole graph, so every page is drawn in the same frame
    and carries its own parents' coordinates. Without it the page is laid out on its own.
    `best_key`: the campaign's best node, marked with a ring and a label.
    """
    all_nodes, all_edges = whole if whole is not None else (nodes, edges)
    known = {n["key"]: n for n in all_nodes}
    for e in all_edges:
        if e["parent"] is not None:
            known.setdefault(e["parent"]["key"], e["parent"])
    pairs = [(e["parent"]["key"], e["child"]["key"]) for e in all_edges if e["parent"] is not None]
    positions = graph_layout(rounds={k: n["round"] for k, n in known.items()}, edges=pairs)
    present_groups = {node_group(n["status"], n["failed_gate"]) for n in all_nodes}
    present_kinds = {e["kind"] for e in all_edges if e["parent"] is not None}

    columns = [x for x, _ in positions.values()]
    first_round, last_round = min(columns, default=0), max([rounds, *columns])
    heights = [y for _, y in positions.values()] or [0.0]
    low, high = min(heights), max(heights)
    height = int(max(340, min(760, 150 + 16 * (high - low + 1))))
    # Markers no wider than a lane or a round's column (about 1,100 px wide), so that a dense
    # graph stays a graph of points rather than a carpet.
    span = last_round - first_round + 1
    largest = max(5.0, min(16.0, 1100 / span, (height - 150) / (high - low + 1)))

    traces = []
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for e in edges:
        if e["parent"] is not None and e["parent"]["key"] in positions:
            by_kind[e["kind"]].append(e)
    # Edges first, so nodes are drawn over them; the legend lists nodes first (legendrank).
    for rank, (edge_kind, (colour, dash)) in enumerate(EDGE_STYLES.items()):
        xs: list = []
        ys: list = []
        for e in by_kind.get(edge_kind, ()):
            (x0, y0), (x1, y1) = positions[e["parent"]["key"]], positions[e["child"]["key"]]
            xs += [x0, x1, None]
            ys += [y0, y1, None]
        traces.append(
            {
                "type": GRAPH_TRACE,
                "mode": "lines",
                "name": f"{edge_kind} edge",
                "legendrank": 2000 + rank,
                "showlegend": edge_kind in present_kinds,
                "x": xs,
                "y": ys,
                "hoverinfo": "skip",
                "line": {"color": colour, "dash": dash, "width": 1},
                "opacity": 0.55,
            }
        )
    by_group: dict[str, list[dict]] = defaultdict(list)
    for n in nodes:
        by_group[node_group(n["status"], n["failed_gate"])].append(n)
    for rank, (group, label, symbol) in enumerate(GRAPH_GROUPS):
        members = by_group.get(group) or []
        colour = LANE_COLOURS[group]
        traces.append(
            {
                "type": GRAPH_TRACE,
                "mode": "markers",
                "name": label,
                "legendrank": 1000 + rank,
                "showlegend": group in present_groups,
                "x": [positions[n["key"]][0] for n in members],
                "y": [positions[n["key"]][1] for n in members],
                "customdata": [node_url.replace("{key}", n["key"]) for n in members],
                "text": [_hover(n, label) for n in members],
                "hovertemplate": "%{text}<extra></extra>",
                "marker": {
                    "color": colour,
                    "symbol": symbol,
                    "size": [_marker_size(n["fitness"], largest) for n in members],
                    "line": {"width": 1.5, "color": colour},
                },
            }
        )

    layout = _layout(
        uirevision=revision,
        height=height,
        xaxis={
            "title": {"text": "round"},
            "range": [first_round - 0.5, last_round + 0.5],
            "tickmode": "linear",
            "tick0": 0,
            "dtick": max(1, math.ceil(span / 25)),
            "zeroline": False,
        },
        # Lanes have no meaning beyond keeping nodes apart: no ticks. First lane on top.
        yaxis={
            "range": [high + 0.8, low - 0.8],
            "showticklabels": False,
            "showgrid": False,
            "zeroline": False,
            "title": {"text": ""},
        },
        legend={
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "y": 1.02,
            "yanchor": "bottom",
            "itemclick": "toggle",
        },
        dragmode="pan",
        # Room above the legend for Plotly's toolbar, which shows over the top right on hover.
        margin={"l": 20, "r": 20, "t": 58, "b": 45},
    )
    best = known.get(best_key) if best_key else None
    if best is not None and best["key"] in positions:
        x, y = positions[best["key"]]
        fitness = f" · {best['fitness']:.3f}×" if best.get("fitness") else ""
        layout["shapes"] = [
            {
                "type": "circle",
                "xref": "x",
                "yref": "y",
                "xsizemode": "pixel",
                "ysizemode": "pixel",
                "xanchor": x,
                "yanchor": y,
                "x0": -11,
                "x1": 11,
                "y0": -11,
                "y1": 11,
                "line": {"color": BEST_COLOUR, "width": 2.5},
            }
        ]
        layout["annotations"] = [
            {
                "x": x,
                "y": y,
                "text": f"★ best {best['key']}{fitness}",
                "showarrow": True,
                "arrowcolor": BEST_COLOUR,
                "arrowhead": 0,
                "ax": 0,
                "ay": -30,
                "bgcolor": "rgba(224,168,0,0.18)",
                "bordercolor": BEST_COLOUR,
                "borderpad": 3,
            }
        ]
    return {"data": traces, "layout": layout}


def _hover(n: dict, label: str) -> str:
    """Hover text of a node: its key, how it ended, its fitness, and the gate that stopped it."""
    origin = f"round {n['round']} · {n['generator']}"
    if n.get("backend") in (Backend.CUTE, Backend.MIXED):
        origin += f" · {Backend(n['backend']).label}"
    lines = [f"<b>{n['key']}</b> · {label}", origin]
    lines.append(f"fitness {n['fitness']:.3f}×" if n.get("fitness") else "no timing")
    if n["status"] == "rejected" and n.get("failed_gate"):
        lines.append(f"failed gate: {n['failed_gate']}")
    return "<br>".join(lines)


def graph_page(
    *,
    rows: Iterable[dict],
    after: int,
    limit: int,
    node_url: str,
    revision: str,
    best_id: int | None,
) -> dict:
    """One page of the search graph (nodes with id > `after`, at most `limit`), laid out over
    the whole graph, plus the cursor of the next page.

    `rows`: every node of the campaign in id order, one row per in-edge: the node's columns
    (id, key, round, status, failed_gate, fitness, generator) with the edge's `in_edges__parent`
    (the parent's id, None for a seed) and `in_edges__kind`, as `Node...values()` gives them.
    """
    by_id: dict[int, dict] = {}
    in_edges: list[tuple[int, int | None, str | None]] = []
    for row in rows:
        parent, edge_kind = row.pop("in_edges__parent"), row.pop("in_edges__kind")
        by_id.setdefault(row["id"], row)
        in_edges.append((row["id"], parent, edge_kind))
    edges = [
        {"kind": k, "child": by_id[child], "parent": by_id.get(parent)}
        for child, parent, k in in_edges
        if k is not None
    ]
    ids = [i for i in by_id if i > after]
    page_ids = set(ids[:limit])
    page_nodes = [by_id[i] for i in ids[:limit]]
    figure = graph_figure(
        nodes=page_nodes,
        edges=[e for e in edges if e["child"]["id"] in page_ids],
        node_url=node_url,
        revision=revision,
        rounds=max((n["round"] for n in by_id.values()), default=0),
        whole=(list(by_id.values()), edges),
        best_key=by_id[best_id]["key"] if best_id in by_id else "",
    )
    return {
        "figure": figure,
        "count": len(page_nodes),
        "next": page_nodes[-1]["id"] if len(ids) > limit else None,
    }


def _marker_size(fitness: float | None, largest: float = 16.0) -> float:
    """Bigger the faster: 0.5x or untimed is the smallest, 2x and above `largest`."""
    if not fitness:
        return round(largest * 0.45, 1)
    share = 0.45 + 0.55 * max(0.0, min(1.0, (math.log2(fitness) + 1) / 2))
    return round(largest * share, 1)


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
            xaxis={
                "title": {"text": "candidates"},
                **count_axis(max(funnel.get(key, 0) or 0 for key, _ in stages)),
            },
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
            xaxis={"title": {"text": "candidates evaluated"}, **count_axis(len(points))},
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
        # ``best`` is a copy of the case's fastest peer, which is drawn under its own name.
        runs = [("candidate", timing)] + [
            (name, t)
            for name, t in sorted((case.get("baselines") or {}).items())
            if t and name != Baseline.BEST
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
            height=340, boxmode="group", yaxis=log_axis("ms", [y for t in traces for y in t["y"]])
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
            xaxis=log_axis("ms", [x for t in traces for x in t["x"]]),
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
        "layout": _layout(
            height=300,
            barmode="stack",
            yaxis={
                "title": {"text": "campaigns"},
                **count_axis(max(r["campaigns"] for r in rows)),
            },
        ),
    }


SUITE_COLOURS = {
    "accepted": "#1a7f37",
    "rejected": "#7f8c8d",
    "error": "#c0392b",
    "no_template": "#c9ced6",
    "claimed": "#2357d9",
}


def suite_speedup_figure(results: list, baseline: str) -> dict | None:
    """A cuda suite run: each accepted problem's best speedup over the baseline, with the line
    at 1.0 (the baseline's own speed)."""
    if not results:
        return None
    labels = [r.problem for r in results]
    return {
        "data": [
            {
                "type": "bar",
                "name": "accepted kernel",
                "x": labels,
                "y": [r.best_speedup for r in results],
                "marker": {"color": SUITE_COLOURS["accepted"]},
                "hovertemplate": "%{x}: %{y:.3f}x<extra></extra>",
            }
        ],
        "layout": _layout(
            height=360,
            showlegend=False,
            xaxis={"type": "category", "tickangle": -45},
            yaxis={"title": {"text": f"speedup over {baseline or 'the baseline'}"}},
            shapes=[
                {
                    "type": "line",
                    "xref": "paper",
                    "x0": 0,
                    "x1": 1,
                    "y0": 1.0,
                    "y1": 1.0,
                    "line": {"color": SUITE_COLOURS["error"], "dash": "dash", "width": 1.5},
                }
            ],
        ),
    }


def suite_outcome_figure(families: list, no_template: int) -> dict | None:
    """An interpret suite run: per family, the problems that ended accepted (correct on every
    gate), all rejected or with an error; the problems no template claims in their own bar."""
    if not families and not no_template:
        return None
    labels = [f.family for f in families] + (["no template"] if no_template else [])
    pad = [0] if no_template else []
    own = [0] * len(families) + ([no_template] if no_template else [])
    traces = [
        ("accepted", "accepted", [f.accepted for f in families] + pad),
        ("rejected", "all rejected", [f.rejected for f in families] + pad),
        ("error", "error", [f.errors for f in families] + pad),
        ("no_template", "no template", own),
    ]
    largest = max([f.claimed for f in families] + [no_template])
    return {
        "data": [
            {
                "type": "bar",
                "name": name,
                "x": labels,
                "y": ys,
                "marker": {"color": SUITE_COLOURS[key]},
            }
            for key, name, ys in traces
            if any(ys)
        ],
        "layout": _layout(
            height=320,
            barmode="stack",
            yaxis={"title": {"text": "problems"}, **count_axis(largest)},
        ),
    }
