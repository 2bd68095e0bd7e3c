"""The performance gate's check of the timed calls, on a GPU: the honest SiLU candidate and the
candidates that compute less only when timed (``TIMED_CHEATS`` in
tests/workers/fixtures/adversarial.py), each through every gate on the cuda platform.

    python scripts/timed_cheats.py --out DIR [--platform cuda]

Writes each candidate and its report (``DIR/<name>.py``, ``DIR/<name>.json``) and prints one
line a candidate: the verdict, and the gate and rule that rejected it. On ``interpret`` the
cheats pass every gate that runs there (nothing is timed), which is why the check is needed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "workers" / "fixtures"


def _adversarial():
    spec = importlib.util.spec_from_file_location("adversarial", FIXTURES / "adversarial.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for the candidates and reports")
    parser.add_argument("--platform", default="cuda", choices=["cuda", "interpret"])
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    adversarial = _adversarial()
    candidates = {"honest": adversarial.silu(), **adversarial.TIMED_CHEATS}
    for name, source in candidates.items():
        path = out / f"{name}.py"
        path.write_text(source)
        run = subprocess.run(
            [sys.executable, "-m", "workers", "evaluate", "--json", "--baseline", "compile",
             "--problem", str(FIXTURES / "problems" / "silu.py"), "--candidate", str(path),
             "--platform", args.platform],
            cwd=ROOT, capture_output=True, text=True,
        )  # fmt: skip
        try:
            report = json.loads(run.stdout)
        except json.JSONDecodeError:
            print(f"{name}: no report (exit {run.returncode}): {run.stderr[-500:]}")
            continue
        (out / f"{name}.json").write_text(json.dumps(report, indent=1))
        failed = next((g for g in report["gates"] if g["status"] == "failed"), None)
        said = f"{failed['name']} [{failed['rule']}] {failed['reason']}" if failed else "-"
        print(f"{name}: {report['verdict']}; {said}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
