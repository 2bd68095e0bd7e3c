"""The catalog against its peers on a GPU (issue 11): one search per catalog problem, judged per
case against the best of torch.compile, max-autotune and Liger-Kernel where Liger has the
operator, then the table a reviewer reads.

Each problem's search runs as the CLI runs it (``python -m workers search``), in its own
process, with ``--baseline best``: eager, compile, max-autotune and the Liger peer
(``workers/catalog/peers/liger/<problem>.py``, when there is one and ``liger_kernel`` imports)
are timed beside every candidate in the same paired rounds, and each case is judged against
the fastest peer. The search's JSON is kept per problem; ``--render`` prints the tables.

    python -m pip install --no-deps --target /tmp/site liger_kernel-0.8.5-py3-none-any.whl
    PYTHONPATH=/tmp/site python scripts/bench_catalog.py --out $OUT rms_norm softmax --jobs 2
    python scripts/bench_catalog.py --render $OUT/rms_norm.json $OUT/softmax.json

No Django.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
PEERS = REPO_ROOT / "workers" / "catalog" / "peers" / "liger"
# Column order of the per-case table: the kernel, then each side the gate timed beside it.
SIDES = ("eager", "compile", "max-autotune", "incumbent")
LABELS = {"incumbent": "Liger"}


def run_problem(name: str, args) -> dict:
    """One search in a fresh process; returns what the run said (its JSON is at ``json``)."""
    out = Path(args.out) / f"{name}.json"
    cmd = [
        sys.executable, "-m", "workers", "search", "--catalog", name, "--platform", "cuda",
        "--baseline", "best", "--budget-candidates", str(args.candidates),
        "--budget-wall-s", str(args.wall_s), "--trials", str(args.trials),
        "--no-progress", "--json", str(out),
    ]  # fmt: skip
    peer = PEERS / f"{name}.py"
    # Liger must import where the sandbox's Python looks (its site-packages or PYTHONPATH: the
    # sandbox hides the repository, so a wheel unpacked there is not seen by the candidate).
    if peer.exists() and importlib.util.find_spec("liger_kernel") is not None:
        cmd += ["--incumbent", str(peer)]
    if not args.tune:
        cmd.append("--no-tune")
    start = time.time()
    log = Path(args.out) / f"{name}.log"
    with open(log, "w") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=fh, stderr=subprocess.STDOUT)
        try:
            proc.wait(timeout=args.timeout_s)
        except subprocess.TimeoutExpired:
            # SIGTERM: the search writes what it evaluated, as a job's time limit does.
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    return {
        "problem": name,
        "returncode": proc.returncode,
        "wall_s": round(time.time() - start, 1),
        "json": str(out),
        "tail": log.read_text()[-1500:],
    }


def _ms(timing: dict | None) -> float | None:
    if not isinstance(timing, dict):
        return None
    ms = timing.get("device_median_ms")
    return timing.get("median_ms") if ms is None else ms


def _node_for_table(doc: dict) -> dict | None:
    """The accepted best; else the timed candidate with the highest weighted speedup."""
    nodes = [n for n in doc.get("nodes") or [] if (n.get("report") or {}).get("cases")]
    best_id = (doc.get("best") or {}).get("id")
    for node in nodes:
        if node["id"] == best_id:
            return node

    def speed(node):
        return ((node.get("fitness") or {}).get("speedup")) or 0.0

    timed = [n for n in nodes if any(c.get("timing") for c in n["report"]["cases"])]
    return max(timed, key=speed, default=None)


def case_rows(doc: dict) -> tuple[dict | None, list[dict]]:
    """The table's node and one row per timed workload case: each side's time (us), the judged
    peer and the kernel's paired speedup over it, and the fraction of measured bandwidth."""
    node = _node_for_table(doc)
    if node is None:
        return None, []
    rows = []
    for case in node["report"]["cases"]:
        if case.get("kind") == "edge" or not case.get("timing"):
            continue
        kernel = _ms(case["timing"])
        bases = case.get("baselines") or {}
        paired = case.get("paired") or {}
        judged = paired.get("best") or {}
        compile_ = paired.get("compile") or {}
        floor = case.get("floor_ms")
        rows.append(
            {
                "case": case["name"],
                "weight": case.get("weight"),
                "kernel_us": None if kernel is None else 1e3 * kernel,
                **{f"{s}_us": _us(bases.get(s)) for s in SIDES},
                "peer": judged.get("peer"),
                "vs_peer": judged.get("speedup"),
                "vs_peer_ci": judged.get("ci95"),
                "vs_compile": compile_.get("speedup"),
                "bandwidth": floor / kernel if floor and kernel else None,
                "bytes": case.get("bytes"),
            }
        )
    return node, rows


def _us(timing: dict | None) -> float | None:
    ms = _ms(timing)
    return None if ms is None else 1e3 * ms


def _weighted(rows: list[dict], key: str) -> float | None:
    pairs = [(r["weight"] or 0, r[key]) for r in rows if r.get(key)]
    total = sum(w for w, _ in pairs)
    if not pairs or total <= 0:
        return None
    return math.exp(sum(w * math.log(v) for w, v in pairs) / total)


def _cell(value, fmt: str = "{:.2f}") -> str:
    return "—" if value is None else fmt.format(value)


def render(paths: list[str]) -> str:
    head = (
        "| problem | case | kernel us | eager us | compile us | max-autotune us | Liger us "
        "| judged against | vs peer [95% CI] | vs compile | of bandwidth | verdict |"
    )
    out = [head, "|" + "---|" * 12]
    summary = []
    for path in paths:
        doc = json.loads(Path(path).read_text())
        name = doc.get("config", {}).get("problem_name") or Path(path).stem
        node, rows = case_rows(doc)
        accepted = doc.get("best") is not None
        verdict = "accepted" if accepted else "no kernel accepted"
        if node is not None and not accepted:
            verdict += f" ({node['id']}: {(node.get('reason') or '')[:90]})"
        for r in rows:
            ci = r["vs_peer_ci"]
            vs_peer = _cell(r["vs_peer"], "{:.3f}x")
            if ci:
                vs_peer += f" [{ci[0]:.3f}, {ci[1]:.3f}]"
            big = (r["bytes"] or 0) >= 64 * 2**20
            out.append(
                f"| {name} | {r['case']} | {_cell(r['kernel_us'])} | "
                + " | ".join(_cell(r[f"{s}_us"]) for s in SIDES)
                + f" | {LABELS.get(r['peer'], r['peer'] or '—')} | {vs_peer} | "
                f"{_cell(r['vs_compile'], '{:.3f}x')} | "
                f"{_cell(r['bandwidth']) if big else 'small'} | {verdict} |"
            )
        first = doc.get("first_accepted") or {}
        summary.append(
            f"| {name} | {verdict if node else doc.get('message', '')} | "
            f"{_cell(_weighted(rows, 'vs_peer'), '{:.3f}x')} | "
            f"{_cell(_weighted(rows, 'vs_compile'), '{:.3f}x')} | "
            f"{doc.get('candidates_evaluated')} | "
            f"{_cell(doc.get('candidates_per_device_minute'), '{:.1f}')} | "
            f"{_cell(first.get('wall_s'), '{:.0f}')} |"
        )
    out += [
        "",
        "| problem | result | weighted vs best peer | weighted vs compile | evaluated "
        "| evaluations per device-minute | first accepted at (s) |",
        "|---|---|---|---|---|---|---|",
        *summary,
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("problems", nargs="*", help="catalog problem names")
    parser.add_argument("--out", help="folder for each problem's search JSON")
    parser.add_argument("--candidates", type=int, default=3)
    parser.add_argument("--wall-s", type=float, default=240.0)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--timeout-s", type=float, default=360.0, help="per problem, then SIGTERM")
    parser.add_argument("--tune", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument(
        "--jobs", type=int, default=1,
        help="problems searched at once (the device lock still takes their timed runs in turn)",
    )  # fmt: skip
    parser.add_argument("--render", nargs="+", metavar="JSON", help="print the tables only")
    args = parser.parse_args(argv)
    if args.render:
        print(render(args.render))
        return 0
    if not args.out or not args.problems:
        parser.error("--out and at least one problem, or --render")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    runs = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = {pool.submit(run_problem, name, args): name for name in args.problems}
        for future in as_completed(futures):
            r = future.result()
            runs.append(r)
            head = f"{r['problem']}: exit {r['returncode']} in {r['wall_s']} s"
            print(f"{head}\n{r['tail']}", flush=True)
            (Path(args.out) / "runs.json").write_text(json.dumps(runs, indent=1))
    done = [r["json"] for r in runs if Path(r["json"]).exists()]
    if done:
        print(render(done))
    return 0


if __name__ == "__main__":
    sys.exit(main())
