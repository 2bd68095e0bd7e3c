"""`make run`'s foreground process: the web server and a local worker, stopped together.

Starts the embedded Redis when REDIS_URL is unset, loads the demo data if asked (it sends live
events and queues the demo campaigns' steps, so Redis must answer first), then uvicorn (ASGI:
pages, API, websockets) with several worker processes, and one Celery worker consuming every
queue this machine can serve. Ctrl-C (or SIGTERM) stops the children and the embedded Redis it
started.
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


def default_web_workers() -> int:
    """One uvicorn process per CPU (each runs Django's sync views under one GIL), at least 2 so a
    slow page does not hold the others up, at most 8. Websocket groups and events go through the
    Redis channel layer, and the cache is Redis too, so the processes share what they must."""
    return min(8, max(2, os.cpu_count() or 1))


def _children(
    host: str, port: int, queues: str, demo_traffic: bool, workers: int = 1
) -> list[tuple[str, list[str]]]:
    python = sys.executable
    demo = [("demo-traffic", [python, "manage.py", "demo_traffic", "--url",
                              f"http://{host}:{port}"])] if demo_traffic else []  # fmt: skip
    return demo + [
        ("web", [python, "-m", "uvicorn", "kernelevolve_site.asgi:application",
                 "--host", host, "--port", str(port), "--lifespan", "off",
                 "--workers", str(workers)]),
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
    parser.add_argument(
        "--seed-demo",
        action="store_true",
        help="load the demo data (manage.py seed_demo) once Redis answers (make run does)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=default_web_workers(),
        help="uvicorn worker processes (default: one per CPU, 2 to 8)",
    )
    args = parser.parse_args()
    if args.workers < 1:
        parser.error("--workers must be at least 1")

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
        if args.seed_demo:
            seed_demo(env)
        return _run(args, env)
    finally:
        if started_redis and stop_embedded_redis(data_dir):
            print("embedded Redis stopped.", flush=True)


def seed_demo(env: dict[str, str]) -> None:
    """``manage.py seed_demo`` with this launcher's Redis (run before it, a fresh machine's
    ``make run`` stopped there: importing a demo search sends a live event, and nothing
    answered on the embedded Redis's port yet)."""
    subprocess.run([sys.executable, "manage.py", "seed_demo"], cwd=ROOT, env=env, check=True)


def _run(args: argparse.Namespace, env: dict[str, str]) -> int:
    stopping = False

    def stop(*_):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    procs = {}
    try:
        for name, cmd in _children(
            args.host, args.port, args.queues, args.demo_traffic, args.workers
        ):
            # Each child leads its own process group: Ctrl-C reaches only this launcher, which
            # stops the children in order, and a child that has to be killed is killed with the
            # processes it started (uvicorn's workers, Celery's pool).
            procs[name] = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
        print(
            f"\nKernelEvolve is up: http://{args.host}:{args.port}/  ({args.workers} web "
            "processes; Ctrl-C stops it)\n",
            flush=True,
        )
        exit_code = 0
        while not stopping:
            for name, proc in procs.items():
                if proc.poll() is not None:
                    print(f"{name} exited with status {proc.returncode}; stopping.", flush=True)
                    exit_code = proc.returncode or 1
                    stopping = True
            time.sleep(0.3)
        return exit_code
    finally:
        _stop_children(procs)


def _stop_children(procs: dict[str, subprocess.Popen], timeout: float = 15.0) -> None:
    """SIGTERM each child, wait up to `timeout` s in all, then kill what is left of each child's
    group (also what a child that exited left behind)."""
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for proc in procs.values():
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass  # the group is gone: nothing left to stop
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
