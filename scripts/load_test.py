"""Load driver: N logged-in users browse the portal for a fixed time; latency per page and overall.

Each simulated user has its own session (a demo user from `manage.py seed_demo`, round robin
over the roles that browse), and loops: pick a page from a weighted mix of pages and API
endpoints (campaign list/detail/graph/charts, candidate pages, compare, inbox, portfolio,
registry index/operator/artifact, knowledge search/entry, API lists), GET it, record the time
to the last byte, optionally wait (`--think`), repeat until the duration ends. The ids it
browses (campaigns, candidate keys, operators, artifacts, entries) are read from the API once
at start, so it runs against any seeded portal.

    .venv/bin/python scripts/load_test.py --url http://127.0.0.1:8000 --users 20 --duration 60

Prints requests/s, p50/p95/p99 and errors per page and overall (`--json PATH` writes the same
as JSON). A non-2xx answer, a timeout or a connection error counts as an error; the first few
are printed with their status. Closed loop: with `--think 0` every user sends its next request
as soon as the previous answer arrives, so latency is what the server gives at saturation.
Needs only httpx (in requirements.txt).
"""

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field

import httpx

# Demo users that browse (seed_demo: password = username + "-demo-pass"). `runtime` is an API
# client for the dispatch runtime, not a person, so it is left out.
DEMO_USERS = ["viewer", "engineer", "reviewer", "curator", "admin", "engineer2"]
DEMO_PASSWORD_SUFFIX = "-demo-pass"
CSRF_RE = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
SEARCH_WORDS = ["softmax", "bf16", "reduction", "interpreter", "norm", "gelu", "tile", ""]


@dataclass
class Targets:
    campaigns: list[int]
    nodes: list[tuple[int, str]]  # (campaign, key)
    operators: list[str]
    artifacts: list[int]
    entries: list[int]


@dataclass
class Stats:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    error_samples: list[str] = field(default_factory=list)


def page_mix(t: Targets) -> list[tuple[str, int, object]]:
    """(page name, weight, url maker) — roughly what people do in the portal."""

    def pick(seq):
        return random.choice(seq)

    def compare_url():
        pk = pick(t.campaigns)
        keys = [k for c, k in t.nodes if c == pk] or ["n1"]
        return f"/campaigns/{pk}/compare/?a={pick(keys)}&b={pick(keys)}"

    mix = [
        ("campaign list", 10, lambda: "/campaigns/"),
        ("campaign detail", 10, lambda: f"/campaigns/{pick(t.campaigns)}/"),
        ("campaign graph.json", 8, lambda: f"/campaigns/{pick(t.campaigns)}/graph.json"),
        ("campaign charts", 4, lambda: f"/campaigns/{pick(t.campaigns)}/charts/"),
        ("candidate page", 10, lambda: "/campaigns/{}/nodes/{}/".format(*pick(t.nodes))),
        ("compare", 3, compare_url),
        ("inbox", 5, lambda: "/campaigns/inbox/"),
        ("portfolio", 4, lambda: "/campaigns/portfolio/"),
        ("registry index", 8, lambda: "/registry/"),
        ("registry operator", 6, lambda: f"/registry/{pick(t.operators)}/"),
        ("knowledge search", 6, lambda: f"/knowledge/?q={pick(SEARCH_WORDS)}"),
        ("knowledge entry", 5, lambda: f"/knowledge/{pick(t.entries)}/"),
        ("api campaigns", 4, lambda: "/api/campaigns/"),
        ("api nodes", 4, lambda: f"/api/campaigns/{pick(t.campaigns)}/nodes/"),
        ("api graph", 2, lambda: f"/api/campaigns/{pick(t.campaigns)}/graph/"),
        ("api inbox", 2, lambda: "/api/inbox/"),
        ("api knowledge entries", 3, lambda: "/api/knowledge/entries/"),
        ("api artifacts", 3, lambda: "/api/registry/artifacts/"),
    ]
    if t.artifacts:
        mix.append(("artifact page", 4, lambda: f"/registry/artifacts/{pick(t.artifacts)}/"))
    else:
        mix = [m for m in mix if m[0] != "api artifacts"]
    if not t.operators:
        mix = [m for m in mix if m[0] != "registry operator"]
    if not t.entries:
        mix = [m for m in mix if m[0] != "knowledge entry"]
    return mix


async def login(client: httpx.AsyncClient, username: str) -> None:
    page = await client.get("/accounts/login/")
    page.raise_for_status()
    token = CSRF_RE.search(page.text)
    if not token:
        raise RuntimeError("no CSRF token on the login page")
    answer = await client.post(
        "/accounts/login/",
        data={
            "username": username,
            "password": username + DEMO_PASSWORD_SUFFIX,
            "csrfmiddlewaretoken": token.group(1),
        },
        headers={"Referer": str(client.base_url) + "/accounts/login/"},
    )
    if answer.status_code != 302 or "sessionid" not in client.cookies:
        raise RuntimeError(f"login as {username!r} failed: HTTP {answer.status_code}")


async def _all(client: httpx.AsyncClient, url: str, limit: int = 20) -> list[dict]:
    """Rows of a paginated API list (at most `limit` pages)."""
    rows: list[dict] = []
    for _ in range(limit):
        answer = await client.get(url)
        answer.raise_for_status()
        body = answer.json()
        if isinstance(body, list):
            return rows + body
        rows += body.get("results", [])
        url = body.get("next")
        if not url:
            break
    return rows


async def discover(client: httpx.AsyncClient) -> Targets:
    campaigns = [c["id"] for c in await _all(client, "/api/campaigns/")]
    if not campaigns:
        raise SystemExit("no campaigns: run `manage.py seed_demo` first")
    nodes = []
    for pk in campaigns:
        answer = await client.get(f"/api/campaigns/{pk}/nodes/")
        answer.raise_for_status()
        nodes += [(pk, n["key"]) for n in answer.json().get("results", [])]
    regions = await _all(client, "/api/registry/regions/")
    artifacts = await _all(client, "/api/registry/artifacts/", limit=2)
    entries = await _all(client, "/api/knowledge/entries/", limit=2)
    return Targets(
        campaigns=campaigns,
        nodes=nodes,
        operators=sorted({r["operator"] for r in regions}),
        artifacts=[a["id"] for a in artifacts],
        entries=[e["id"] for e in entries],
    )


async def user_loop(
    client: httpx.AsyncClient, mix, deadline: float, think: float, stats: Stats
) -> None:
    names = [m[0] for m in mix]
    weights = [m[1] for m in mix]
    makers = {m[0]: m[2] for m in mix}
    while time.monotonic() < deadline:
        name = random.choices(names, weights)[0]
        url = makers[name]()
        start = time.perf_counter()
        try:
            answer = await client.get(url)
            await answer.aread()
            ok = answer.status_code < 300
            what = f"HTTP {answer.status_code}"
        except httpx.HTTPError as exc:
            ok, what = False, f"{type(exc).__name__}: {exc}"
        elapsed = (time.perf_counter() - start) * 1000
        if ok:
            stats.latencies[name].append(elapsed)
        else:
            stats.errors[name] += 1
            if len(stats.error_samples) < 10:
                stats.error_samples.append(f"{url}: {what}")
        if think:
            await asyncio.sleep(random.uniform(0.5 * think, 1.5 * think))


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def summary(stats: Stats, wall: float) -> dict:
    pages = {}
    every = []
    for name in sorted(set(stats.latencies) | set(stats.errors)):
        values = stats.latencies.get(name, [])
        every += values
        pages[name] = {
            "requests": len(values) + stats.errors.get(name, 0),
            "errors": stats.errors.get(name, 0),
            "p50_ms": pct(values, 0.50),
            "p95_ms": pct(values, 0.95),
            "p99_ms": pct(values, 0.99),
            "mean_ms": statistics.fmean(values) if values else float("nan"),
        }
    errors = sum(stats.errors.values())
    total = len(every) + errors
    return {
        "wall_s": wall,
        "requests": total,
        "errors": errors,
        "req_per_s": total / wall if wall else 0.0,
        "p50_ms": pct(every, 0.50),
        "p95_ms": pct(every, 0.95),
        "p99_ms": pct(every, 0.99),
        "pages": pages,
        "error_samples": stats.error_samples,
    }


def print_summary(result: dict, args) -> None:
    print(
        f"\n{args.users} users, {result['wall_s']:.0f} s, think {args.think} s, {args.url}\n"
        f"{'page':<24}{'req':>7}{'err':>6}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}"
    )
    rows = sorted(result["pages"].items(), key=lambda kv: -kv[1]["p95_ms"])
    for name, p in rows:
        print(
            f"{name:<24}{p['requests']:>7}{p['errors']:>6}"
            f"{p['p50_ms']:>9.0f}{p['p95_ms']:>9.0f}{p['p99_ms']:>9.0f}"
        )
    print(
        f"{'ALL':<24}{result['requests']:>7}{result['errors']:>6}{result['p50_ms']:>9.0f}"
        f"{result['p95_ms']:>9.0f}{result['p99_ms']:>9.0f}\n"
        f"{result['req_per_s']:.1f} req/s, {result['errors']} errors"
    )
    for line in result["error_samples"]:
        print(f"  error: {line}")


async def main_async(args) -> dict:
    limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
    timeout = httpx.Timeout(args.timeout)
    clients = [
        httpx.AsyncClient(base_url=args.url, limits=limits, timeout=timeout)
        for _ in range(args.users)
    ]
    try:
        # Log in a few at a time, as people arrive.
        for i in range(0, len(clients), 5):
            await asyncio.gather(
                *(
                    login(c, DEMO_USERS[(i + j) % len(DEMO_USERS)])
                    for j, c in enumerate(clients[i : i + 5])
                )
            )
        targets = await discover(clients[0])
        mix = page_mix(targets)
        print(
            f"logged in {len(clients)} users; browsing {len(targets.campaigns)} campaigns, "
            f"{len(targets.nodes)} candidates, {len(targets.operators)} operators, "
            f"{len(targets.artifacts)} artifacts, {len(targets.entries)} knowledge entries",
            flush=True,
        )
        if args.warmup:
            warm = Stats()
            end = time.monotonic() + args.warmup
            await asyncio.gather(*(user_loop(c, mix, end, args.think, warm) for c in clients))
        stats = Stats()
        start = time.monotonic()
        deadline = start + args.duration
        await asyncio.gather(*(user_loop(c, mix, deadline, args.think, stats) for c in clients))
        return summary(stats, time.monotonic() - start)
    finally:
        for c in clients:
            await c.aclose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds measured")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before measuring")
    parser.add_argument(
        "--think", type=float, default=0.0, help="mean seconds between a user's requests"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request")
    parser.add_argument("--seed", type=int, default=1, help="random seed of the page mix")
    parser.add_argument("--json", help="also write the results here as JSON")
    args = parser.parse_args()
    random.seed(args.seed)
    result = asyncio.run(main_async(args))
    print_summary(result, args)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), **result}, fh, indent=2)
    return 1 if result["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
