import json
import os
import subprocess
import sys

import pytest

from tests.workers.conftest import FIXTURES

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(*args):
    return subprocess.run(
        [sys.executable, "-m", "workers", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )


@pytest.mark.timeout(300)
def test_evaluate_json_and_exit_codes(tmp_path):
    problem = os.path.join(FIXTURES, "problems", "silu.py")
    workload = tmp_path / "w.json"
    workload.write_text(json.dumps({"cases": [{"name": "a"}], "edge_cases": False}))
    proc = _run(
        "evaluate",
        "--problem",
        problem,
        "--candidate",
        os.path.join(FIXTURES, "candidates", "silu_good.py"),
        "--workload",
        str(workload),
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["verdict"] == "accepted"
    for key in ("failed_gate", "reason", "gates", "cases", "fingerprint", "fitness"):
        assert key in report

    missing = _run("evaluate", "--problem", "nope.py", "--candidate", problem)
    assert missing.returncode == 2
    assert missing.stderr.strip().count("\n") == 0 and "nope.py" in missing.stderr

    workload.write_text(json.dumps({"cases": [{"name": "a", "weight": "lots"}]}))
    bad = _run(
        "evaluate", "--problem", problem, "--candidate", problem, "--workload", str(workload)
    )
    assert bad.returncode == 2 and "cases[0].weight" in bad.stderr


@pytest.mark.timeout(300)
def test_baseline_on_interpret_says_no_device():
    proc = _run("baseline", "--problem", os.path.join(FIXTURES, "problems", "softmax.py"), "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["status"] == "skipped" and report["reason"] == "skipped: no device"
