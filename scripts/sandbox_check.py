"""Check the sandbox on this host and measure what it costs (Django-free; runs on a GPU host).

    python scripts/sandbox_check.py --platform cuda --repeats 3 --json out.json

For each boundary (bubblewrap, then none) it starts the sandbox child ``--repeats`` times and
evaluates a known-good SiLU candidate each time (child start, evaluation wall time). Then, behind
bubblewrap only, it runs hostile candidates (read a planted secret, connect to a server on the
host's loopback, start a shell through ctypes, write into the repository) with the audit hook
switched off, so that only the operating-system boundary stands in the way, and reports whether
each was contained. The GPU must stay visible inside the box: the good candidate must pass
correctness (and, on ``cuda``, be timed).
"""

import argparse
import json
import os
import secrets
import socket
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from workers.evaluate import EvaluationRequest, Evaluator  # noqa: E402

FIXTURES = os.path.join(ROOT, "tests", "workers", "fixtures")
DISABLE_HOOK = (
    "import gc\n"
    "for _o in gc.get_objects():\n"
    "    if type(_o).__name__ == 'AuditPolicy':\n"
    "        _o.enforcing = False\n"
    "        _o.__class__.__call__ = lambda self, event, args: None\n"
)


def _read(*parts) -> str:
    with open(os.path.join(FIXTURES, *parts)) as fh:
        return fh.read()


def _timed_runs(platform: str, repeats: int, problem: str, good: str) -> dict:
    starts, walls, verdicts, fingerprint = [], [], [], {}
    for _ in range(repeats):
        with Evaluator() as ev:
            t0 = time.perf_counter()
            ev.child(platform)
            starts.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            report = ev.evaluate(
                EvaluationRequest(problem_source=problem, candidate_source=good, platform=platform)
            ).to_dict()
            walls.append(time.perf_counter() - t1)
            verdicts.append(
                {g["name"]: g["status"] for g in report["gates"]}
                | {"verdict": report["verdict"], "reason": report.get("reason")}
            )
            fingerprint = report["fingerprint"]
    return {
        "child_start_s": [round(s, 3) for s in starts],
        "child_start_median_s": round(statistics.median(starts), 3),
        "evaluate_s": [round(s, 3) for s in walls],
        "evaluate_median_s": round(statistics.median(walls), 3),
        "gates": verdicts[-1],
        "fingerprint": fingerprint,
    }


def _attacks(platform: str, problem: str, good: str) -> dict:
    secret = "secret-" + secrets.token_hex(12)
    data = os.path.join(ROOT, "data")
    os.makedirs(data, exist_ok=True)
    secret_path = os.path.join(data, "sandbox-check.pem")
    with open(secret_path, "w") as fh:
        fh.write(secret)
    marker = os.path.join(ROOT, "data", "pwned")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    seen = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            seen.append(1)
            conn.sendall(secret.encode())
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    port = server.getsockname()[1]
    attacks = {
        "read_secret": f"raise RuntimeError(open({secret_path!r}).read())\n",
        "connect_loopback": (
            "import ctypes, socket, struct\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            "fd = libc.socket(2, 1, 0)\n"
            f"a = struct.pack('<HH4s8x', 2, socket.htons({port}), socket.inet_aton('127.0.0.1'))\n"
            "rc = libc.connect(fd, a, len(a))\n"
            "raise RuntimeError(f'connect={rc} errno={ctypes.get_errno()}')\n"
        ),
        "shell_via_ctypes": (
            f"import ctypes\nrc = ctypes.CDLL(None).system(b'touch {marker}')\n"
            "import os\nsh = os.path.realpath('/bin/sh')\n"
            "raise RuntimeError(f'system={rc} {sh} executable={os.access(sh, os.X_OK)} '\n"
            "                   f'size={os.stat(sh).st_size}')\n"
        ),
        "write_repository": (
            f"open({os.path.join(ROOT, 'workers', 'pwned.py')!r}, 'w').write('x')\n"
        ),
    }
    results = {}
    with Evaluator() as ev:
        for name, code in attacks.items():
            source = good.replace("import triton\n", "import triton\n" + DISABLE_HOOK + code, 1)
            request = EvaluationRequest(
                problem_source=problem, candidate_source=source, platform=platform
            )
            report = ev.evaluate(request).to_dict()
            text = json.dumps(report)
            gate = next((g for g in report["gates"] if g["status"] == "failed"), {})
            results[name] = {
                "verdict": report["verdict"],
                "reason": gate.get("reason"),
                "os_error": (gate.get("evidence") or {}).get("error"),
                "secret_in_report": secret in text,
            }
    stop.set()
    server.close()
    contained = {
        "secret_never_in_a_report": not any(r["secret_in_report"] for r in results.values()),
        "no_connection_reached_the_host": not seen,
        "no_shell_ran": not os.path.exists(marker),
        "repository_unchanged": not os.path.exists(os.path.join(ROOT, "workers", "pwned.py")),
    }
    os.remove(secret_path)
    return {"attacks": results, "contained": contained}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="interpret", choices=("interpret", "cuda"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the results here as JSON")
    opts = parser.parse_args()
    problem, good = _read("problems", "silu.py"), _read("candidates", "silu_good.py")
    out = {"platform": opts.platform, "boundaries": {}}
    for kind in ("bwrap", "none"):
        os.environ["KERNELEVOLVE_SANDBOX"] = kind
        out["boundaries"][kind] = _timed_runs(opts.platform, opts.repeats, problem, good)
    os.environ["KERNELEVOLVE_SANDBOX"] = "bwrap"
    out.update(_attacks(opts.platform, problem, good))
    text = json.dumps(out, indent=2, default=str)
    print(text)
    if opts.json:
        with open(opts.json, "w") as fh:
            fh.write(text)
    return 0 if all(out["contained"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
