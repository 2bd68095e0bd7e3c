"""`make run`'s foreground process: the web server and a local worker, stopped together.

Starts the embedded Redis when REDIS_URL is unset, then uvicorn (ASGI: pages, API, websockets)
and one Celery worker consuming every queue this machine can serve. Ctrl-C (or SIGTERM) stops
the children and the embedded Redis it started.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from kernelevolve_site.embedded_redis import (
    embedded_redis_url,
    ensure_embedded_redis,
    stop_embedded_redis,
)

ROOT = Path(__file__).resolve().parent.parent
LOCAL_QUEUES = "control,eval.interpret"


def _children(host: str, port: int, queues: str, demo_traffic: bool) -> list[tuple[str, list[str]]]:
    python = sys.executable
    demo = [("demo-traffic", [python, "manage.py", "demo_traffic", "--url",
                              f"http://{host}:{port}"])] if demo_traffic else []  # fmt: skip
    return demo + [
        ("web", [python, "-m", "uvicorn", "kernelevolve_site.asgi:application",
                 "--host", host, "--port", str(port), "--lifespan", "off"]),
        ("worker", [python, "-m", "celery", "-A", "kernelevolve_site", "worker",
                    "-Q", queues, "--concurrency", "2", "--loglevel", "INFO",
                    "--hostname", "local@%h"]),
    ]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--queues", default=LOCAL_QUEUES)
    parser.add_argument(
        "--demo-traffic",
        action="store_true",
        help="also replay demo traffic into interpret registry regions (make run does)",
    )
    args = parser.parse_args()

    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "kernelevolve_site.settings.dev")
    data_dir = Path(env.get("KERNELEVOLVE_DATA_DIR", ROOT / "data")).resolve()
    # Stop on exit only a Redis this launcher started (tests may share one already running).
    started_redis = False
    if not env.get("REDIS_URL"):
        started_redis = ensure_embedded_redis(data_dir)
        env["REDIS_URL"] = embedded_redis_url(data_dir)
        print(f"embedded Redis at {env['REDIS_URL']} (data in {data_dir})", flush=True)
    try:
        return _run(args, env)
    finally:
        if started_redis and stop_embedded_redis(data_dir):
            print("embedded Redis stopped.", flush=True)


def _run(args: argparse.Namespace, env: dict[str, str]) -> int:
    procs = {}
    for name, cmd in _children(args.host, args.port, args.queues, args.demo_traffic):
        procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=env)
    print(f"\nKernelEvolve is up: http://{args.host}:{args.port}/  (Ctrl-C stops it)\n", flush=True)

    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    exit_code = 0
    while not stopping:
        for name, proc in procs.items():
            if proc.poll() is not None:
                print(f"{name} exited with status {proc.returncode}; stopping.", flush=True)
                exit_code = proc.returncode or 1
                stopping = True
        time.sleep(0.3)

    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
