"""The search graph's layered layout (`charts.graph_layout`) and the pages drawn from it: a round
is a column, every node of a round has its own lane, children sit by their parents, and a page of
the graph carries the coordinates of parents drawn on earlier pages."""

import random
from itertools import combinations

import pytest

from apps.campaigns import charts


def _search(n_rounds: int = 12, width: int = 15, seed: int = 0):
    """A graph shaped like a search: a few seeds, then rounds whose nodes take one or two
    parents from the previous two rounds. Returns (rounds, edges) in creation order."""
    rng = random.Random(seed)
    rounds: dict[str, int] = {}
    edges: list[tuple[str, str]] = []
    layers: list[list[str]] = []
    for r in range(n_rounds):
        layer = [f"n{len(rounds) + i + 1}" for i in range(3 if r == 0 else width)]
        for key in layer:
            rounds[key] = r
            if r:
                pool = [k for earlier in layers[-2:] for k in earlier]
                for parent in rng.sample(pool, rng.choice((1, 1, 2))):
                    edges.append((parent, key))
        layers.append(layer)
    return rounds, edges


def _crossings(positions, edges) -> int:
    """Pairs of edges between the same two rounds that cross."""
    count = 0
    for (a, b), (c, d) in combinations(edges, 2):
        (xa, ya), (xb, yb) = positions[a], positions[b]
        (xc, yc), (xd, yd) = positions[c], positions[d]
        if (xa, xb) == (xc, xd) and (ya - yc) * (yb - yd) < 0:
            count += 1
    return count


def test_rounds_are_integer_columns_with_one_lane_per_node():
    rounds, edges = _search()
    positions = charts.graph_layout(rounds=rounds, edges=edges)
    assert set(positions) == set(rounds)
    for key, (x, _) in positions.items():
        assert isinstance(x, int) and x == rounds[key]
    by_round: dict[int, list[float]] = {}
    for x, y in positions.values():
        by_round.setdefault(x, []).append(y)
    for ys in by_round.values():
        ys.sort()
        assert all(b - a >= 1 - 1e-9 for a, b in zip(ys, ys[1:], strict=False)), ys
    for parent, child in edges:
        assert positions[parent][0] < positions[child][0]


def test_layout_is_deterministic_and_history_does_not_move():
    rounds, edges = _search(seed=3)
    first = charts.graph_layout(rounds=rounds, edges=edges)
    assert charts.graph_layout(rounds=dict(rounds), edges=list(edges)) == first
    # A live campaign adds a round: nothing already drawn moves.
    grown = dict(rounds)
    more = list(edges)
    for i in range(10):
        key = f"new{i}"
        grown[key] = max(rounds.values()) + 1
        more.append((f"n{len(rounds) - i}", key))
    after = charts.graph_layout(rounds=grown, edges=more)
    assert {k: after[k] for k in rounds} == first


def test_children_are_ordered_by_their_parents_which_removes_crossings():
    # Creation order puts c (child of b) above d (child of a): drawn in that order they cross.
    positions = charts.graph_layout(
        rounds={"a": 0, "b": 0, "c": 1, "d": 1}, edges=[("b", "c"), ("a", "d")]
    )
    assert positions["a"][1] < positions["b"][1] and positions["d"][1] < positions["c"][1]
    assert positions["d"][1] == positions["a"][1] and positions["c"][1] == positions["b"][1]

    rounds, edges = _search(seed=7)
    laid_out = charts.graph_layout(rounds=rounds, edges=edges)
    in_creation_order: dict[str, tuple[int, float]] = {}
    for r in set(rounds.values()):
        keys = [k for k in rounds if rounds[k] == r]
        in_creation_order.update({k: (r, float(i)) for i, k in enumerate(keys)})
    assert _crossings(laid_out, edges) < 0.6 * _crossings(in_creation_order, edges)


def test_seeds_of_a_later_round_go_after_the_children_and_edges_within_a_round_are_ignored():
    positions = charts.graph_layout(
        rounds={"a": 0, "b": 1, "s": 1, "t": 1}, edges=[("a", "b"), ("b", "t")]
    )
    assert positions["b"][1] == positions["a"][1]
    assert positions["b"][1] < positions["s"][1] < positions["t"][1]


def _node(i: int, rnd: int, status="accepted", failed_gate="", fitness=1.2):
    return {
        "id": i,
        "key": f"n{i}",
        "round": rnd,
        "status": status,
        "failed_gate": failed_gate,
        "fitness": fitness,
        "generator": "template",
    }


def _rows(nodes, parents):
    """What the graph view's query gives: one row per node and in-edge."""
    rows = []
    for n in nodes:
        ps = parents.get(n["id"]) or [(None, "seed")]
        for parent, kind in ps:
            rows.append({**n, "in_edges__parent": parent, "in_edges__kind": kind})
    return rows


def test_figure_marks_status_best_and_edges_from_parent_to_child():
    nodes = [
        _node(1, 0),
        _node(2, 0, "rejected", "compile", None),
        _node(3, 1, fitness=1.5),
        _node(4, 1, "rejected", "correctness", None),
        _node(5, 2, "pending", fitness=None),
    ]
    parents = {3: [(1, "mutation")], 4: [(2, "repair")], 5: [(3, "mutation"), (1, "crossover")]}
    page = charts.graph_page(
        rows=_rows(nodes, parents),
        after=0,
        limit=100,
        node_url="/n/{key}/",
        revision="r",
        best_id=3,
    )
    figure = page["figure"]
    assert page["count"] == 5 and page["next"] is None
    traces = {t["name"]: t for t in figure["data"]}
    markers = {name: t for name, t in traces.items() if t["mode"] == "markers"}
    symbols = {name: t["marker"]["symbol"] for name, t in markers.items() if t["x"]}
    assert symbols == {
        "accepted": "circle",
        "rejected · compile": "x",
        "rejected · correctness": "x",
        "pending or evaluating": "circle-open",
    }
    assert markers["accepted"]["customdata"] == ["/n/n1/", "/n/n3/"]
    rejected = markers["rejected · correctness"]
    assert rejected["customdata"] == ["/n/n4/"]
    assert "<b>n4</b>" in rejected["text"][0] and "failed gate: correctness" in rejected["text"][0]
    assert "fitness 1.500×" in markers["accepted"]["text"][1]
    # Legend entries only for what the graph has; above the plot, off the axis titles.
    assert not markers["cancelled unevaluated"]["showlegend"]
    legend = figure["layout"]["legend"]
    assert legend["y"] >= 1 and legend["yanchor"] == "bottom"
    # Integer round ticks; lanes have no ticks.
    xaxis, yaxis = figure["layout"]["xaxis"], figure["layout"]["yaxis"]
    assert xaxis["tickmode"] == "linear" and xaxis["dtick"] == 1 and xaxis["tick0"] == 0
    assert yaxis["showticklabels"] is False
    # Each edge runs from its parent's point to its child's.
    point = {
        url.split("/")[2]: (x, y)
        for t in markers.values()
        for url, x, y in zip(t["customdata"], t["x"], t["y"], strict=True)
    }
    drawn = set()
    for t in traces.values():
        if t["mode"] != "lines":
            continue
        xs, ys = t["x"], t["y"]
        for i in range(0, len(xs), 3):
            assert xs[i + 2] is None and xs[i] < xs[i + 1]
            drawn.add((t["name"], (xs[i], ys[i]), (xs[i + 1], ys[i + 1])))
    assert drawn == {
        ("mutation edge", point["n1"], point["n3"]),
        ("repair edge", point["n2"], point["n4"]),
        ("mutation edge", point["n3"], point["n5"]),
        ("crossover edge", point["n1"], point["n5"]),
    }
    assert figure["layout"]["annotations"][0]["text"].startswith("★ best n3 · 1.500×")
    shape = figure["layout"]["shapes"][0]
    assert (shape["xanchor"], shape["yanchor"]) == point["n3"]
    assert {t["type"] for t in figure["data"]} == {"scatter"}


def test_an_empty_campaign_has_an_empty_frame():
    page = charts.graph_page(
        rows=[], after=0, limit=100, node_url="{key}", revision="r", best_id=None
    )
    assert page["count"] == 0 and page["next"] is None
    assert all(not t["x"] and not t["showlegend"] for t in page["figure"]["data"])
    assert page["figure"]["layout"]["xaxis"]["range"] == [-0.5, 0.5]


def test_the_rounds_axis_starts_at_the_first_round():
    # The engine's first proposals are round 1 (round 0 is a warm start): no empty column.
    page = charts.graph_page(
        rows=_rows([_node(1, 1), _node(2, 1), _node(3, 2)], {3: [(1, "mutation")]}),
        after=0, limit=100, node_url="{key}", revision="r", best_id=None,
    )  # fmt: skip
    assert page["figure"]["layout"]["xaxis"]["range"] == [0.5, 2.5]


def test_pages_share_one_layout_and_carry_their_parents_coordinates():
    rounds, edges = _search(n_rounds=10, width=60, seed=5)  # 543 nodes
    ids = {key: i for i, key in enumerate(rounds, start=1)}
    nodes = [_node(ids[k], r, fitness=None) for k, r in rounds.items()]
    parents: dict[int, list] = {}
    for parent, child in edges:
        parents.setdefault(ids[child], []).append((ids[parent], "mutation"))
    rows = _rows(nodes, parents)
    whole = charts.graph_page(
        rows=[dict(r) for r in rows], after=0, limit=10_000, node_url="{key}", revision="r",
        best_id=None,
    )  # fmt: skip
    pages, after = [], 0
    while after is not None:
        page = charts.graph_page(
            rows=[dict(r) for r in rows], after=after, limit=200, node_url="{key}", revision="r",
            best_id=None,
        )  # fmt: skip
        pages.append(page)
        after = page["next"]
    assert [p["count"] for p in pages] == [200, 200, 143]
    # Same traces, types and frame on every page; concatenated they are the whole graph.
    for p in pages:
        assert [t["name"] for t in p["figure"]["data"]] == [
            t["name"] for t in whole["figure"]["data"]
        ]
        assert p["figure"]["layout"]["yaxis"] == whole["figure"]["layout"]["yaxis"]
    for i, trace in enumerate(whole["figure"]["data"]):
        for k in ("x", "y"):
            merged = [v for p in pages for v in p["figure"]["data"][i][k]]
            assert sorted(merged, key=str) == sorted(trace[k], key=str)
    # The last page's edges start at parents drawn on the first two pages, where they are.
    on_earlier_pages = {
        (x, y)
        for p in pages[:2]
        for t in p["figure"]["data"]
        if t["mode"] == "markers"
        for x, y in zip(t["x"], t["y"], strict=True)
    }
    line = pages[2]["figure"]["data"][0]
    starts = {(line["x"][i], line["y"][i]) for i in range(0, len(line["x"]), 3)}
    assert starts and starts <= on_earlier_pages | {
        (x, y)
        for t in pages[2]["figure"]["data"]
        if t["mode"] == "markers"
        for x, y in zip(t["x"], t["y"], strict=True)
    }
    assert starts & on_earlier_pages


@pytest.mark.django_db
def test_graph_endpoint_pages_are_laid_out_over_the_whole_graph(
    client, users, big, django_assert_max_num_queries, monkeypatch
):
    from apps.campaigns.selectors import graph as graph_selectors

    monkeypatch.setattr(graph_selectors, "GRAPH_PAGE_SIZE", 120)
    client.force_login(users["viewer"])
    figures, url = [], f"/campaigns/{big.pk}/graph.json"
    while url:
        # session, user, permissions, campaign, the graph (one query, every page)
        with django_assert_max_num_queries(6):
            data = client.get(url).json()
        figures.append(data["figure"])
        url = data.get("next_url")
    assert len(figures) == 3
    markers = [t for f in figures for t in f["data"] if t["mode"] == "markers"]
    assert sum(len(t["x"]) for t in markers) == 300
    points = {(x, y) for t in markers for x, y in zip(t["x"], t["y"], strict=True)}
    assert len(points) == 300, "one lane per node of a round"
    assert all(isinstance(x, int) for t in markers for x in t["x"])
    ends = {
        (t["x"][i + j], t["y"][i + j])
        for f in figures
        for t in f["data"]
        if t["mode"] == "lines"
        for i in range(0, len(t["x"]), 3)
        for j in (0, 1)
    }
    assert ends and ends <= points, "every edge starts and ends on a drawn node"
    best = big.best_node
    assert figures[0]["layout"]["annotations"][0]["text"].startswith(f"★ best {best.key}")


def _points(figure: dict) -> dict[str, tuple]:
    """Node URL -> (x, y) of every node drawn in a figure."""
    return {
        url: (x, y)
        for t in figure["data"]
        if t["mode"] == "markers"
        for url, x, y in zip(t["customdata"], t["x"], t["y"], strict=True)
    }


@pytest.mark.django_db
def test_api_and_page_graphs_give_the_same_coordinates_at_a_page_smaller_than_the_graph(
    client, users, big, monkeypatch
):
    from rest_framework.test import APIClient

    from apps.campaigns.selectors import graph as graph_selectors

    monkeypatch.setattr(graph_selectors, "GRAPH_PAGE_SIZE", 120)
    client.force_login(users["viewer"])
    api = APIClient()
    api.force_authenticate(users["viewer"])
    page_figures, url = [], f"/campaigns/{big.pk}/graph.json"
    while url:
        data = client.get(url).json()
        page_figures.append(data["figure"])
        url = data.get("next_url")
    api_figures, after = [], 0
    while after is not None:
        data = api.get(f"/api/campaigns/{big.pk}/graph/", {"after": after}).json()
        api_figures.append(data["figure"])
        after = data["next"]
    assert len(page_figures) == len(api_figures) == 3
    # Every node where the page draws it (pages after the first were laid out on their own).
    from_api = {k: v for f in api_figures for k, v in _points(f).items()}
    assert len(from_api) == 300
    assert from_api == {k: v for f in page_figures for k, v in _points(f).items()}
    for on_page, on_api in zip(page_figures, api_figures, strict=True):
        assert _points(on_api) == _points(on_page), "the same nodes on the same page"
        lines = [t for t in on_page["data"] if t["mode"] == "lines"]
        assert [t for t in on_api["data"] if t["mode"] == "lines"] == lines, "edges too"
        assert on_api["layout"] == on_page["layout"], "one frame, the best ringed in it"
