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
