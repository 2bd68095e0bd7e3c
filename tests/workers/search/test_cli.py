"""``python -m workers search`` end to end on the interpreter, with the real evaluator."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from workers.catalog import catalog_get
from workers.search.engine import FUNNEL_STAGES

ROOT = Path(__file__).resolve().parents[3]


def test_standalone_campaign_writes_the_campaign_json(tmp_path):
    entry = catalog_get("gelu")
    out = tmp_path / "campaign.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workers",
            "search",
            "--problem",
            str(entry.problem_path),
            "--workload",
            str(entry.smoke_workload_path),
            "--platform",
            "interpret",
            "--generator",
            "template",
            "--budget-candidates",
            "3",
            "--jobs",  # the round's candidates two at a time, each in its own sandbox
            "2",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    for key in ("outcome", "funnel", "nodes", "edges", "best", "stop_reason", "message"):
        assert key in data
    assert data["outcome"] == "no_safe_improvement"  # interpret: correctness only, said so
    f = data["funnel"]
    assert f["generated"] == len(data["nodes"]) == 3
    assert sum(f[s] for s in FUNNEL_STAGES if s != "generated") == f["generated"]
    assert f["accepted"] >= 1
    assert [n["id"] for n in data["nodes"]] == ["n1", "n2", "n3"]  # recorded in round order
    assert all(n["status"] in ("accepted", "rejected") for n in data["nodes"])
    assert data["best"]["verdict"] == "accepted" and data["best"]["fitness"] is None
    assert "gelu" in proc.stdout and "accepted" in proc.stdout


def test_bad_arguments_exit_2(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "workers", "search", "--problem", str(tmp_path / "missing.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 2


def test_a_killed_search_leaves_what_it_evaluated(tmp_path):
    """A job's time limit sends SIGTERM: the JSON holds every evaluated candidate (importable),
    the log has one line per candidate, and the exit status says the campaign did not finish."""
    import signal
    import time

    entry = catalog_get("silu")
    out = tmp_path / "campaign.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "workers", "search", "--catalog", "silu", "--smoke",
         "--budget-candidates", "40", "--json", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    deadline = time.time() + 200
    while time.time() < deadline and not out.exists():
        time.sleep(0.5)  # the first checkpoint follows the first evaluated candidate
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["stop_reason"] == "interrupted" and data["outcome"] == "budget_exhausted"
    evaluated = [n for n in data["nodes"] if n["status"] != "pending"]
    assert evaluated and data["candidates_evaluated"] == len(evaluated)
    assert f"interrupted after {len(evaluated)} evaluated" in data["message"]
    assert f"] {evaluated[0]['id']} accepted" in stderr  # one line per candidate, not a bar
    assert entry.name in stdout


def test_parallel_evaluations_keep_their_sandbox_children_across_rounds(monkeypatch):
    """--jobs 2: each evaluator's child lives for the whole campaign. A pool of threads per
    round let every child die with the thread that started it (the boundary's parent-death
    signal is per thread): on the H200 each round's first candidates then paid a new process
    and the peers' compile again (12-15 s of 1.5)."""
    from workers import sandbox
    from workers.search.engine import campaign_new, run_campaign

    entry = catalog_get("gelu")
    starts = []
    original = sandbox.SandboxChild.start

    def counted(self):
        starts.append(self)
        return original(self)

    monkeypatch.setattr(sandbox.SandboxChild, "start", counted)
    state = campaign_new(
        problem_source=entry.problem_path.read_text(),
        workload=entry.workload(smoke=True),
        platform="interpret",
        max_candidates=8,
        branches=2,
        children_per_branch=1,
        seeds=2,
        saturation_rounds=50,
        trials=1,
    )
    run_campaign(state, jobs=2)
    assert state["round"] >= 3
    assert len(starts) == 2  # one child per evaluator, for every round
