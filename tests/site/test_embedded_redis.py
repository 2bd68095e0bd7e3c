"""The embedded Redis is started only by the processes that need it, and stopped by them:
`manage.py check` starts none; a project command, a worker started on its own, hold one while
they run and leave nothing behind; a server already up is used and left running."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelevolve_site.embedded_redis import (
    embedded_redis_url,
    ensure_embedded_redis,
    running_embedded_redis,
    stop_embedded_redis,
)

ROOT = Path(__file__).resolve().parent.parent.parent
PING = (
    "import redis; from django.conf import settings; "
    "print('ping', redis.Redis.from_url(settings.REDIS_URL).ping())"
)


def redis_servers_in(data_dir: Path) -> list[int]:
    """Live redis-server processes serving this data folder (it is their working directory)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if "redis-server" not in (proc / "cmdline").read_bytes().decode(errors="replace"):
                continue
            zombie = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
            if not zombie and Path(os.readlink(proc / "cwd")) == data_dir.resolve():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _env(data_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(DJANGO_SETTINGS_MODULE="kernelevolve_site.settings.dev")
    env.update(KERNELEVOLVE_DATA_DIR=str(data_dir), PYTHONUNBUFFERED="1")
    return env


def _manage(data_dir: Path, *args: str) -> subprocess.CompletedProcess:
    out = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=_env(data_dir),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out


def test_manage_py_check_starts_no_redis_and_leaves_none_behind(tmp_path):
    _manage(tmp_path, "check")
    assert running_embedded_redis(tmp_path) is None
    assert redis_servers_in(tmp_path) == []
    assert not (tmp_path / "redis.pid").exists()


def test_a_command_that_needs_redis_holds_one_while_it_runs_and_stops_it(tmp_path):
    out = _manage(tmp_path, "shell", "-c", PING)
    assert "ping True" in out.stdout
    assert redis_servers_in(tmp_path) == [], "the command stopped the Redis it started"
    assert running_embedded_redis(tmp_path) is None


def test_a_redis_already_running_is_used_and_left_running(tmp_path):
    assert ensure_embedded_redis(tmp_path) is True
    try:
        servers = redis_servers_in(tmp_path)
        assert len(servers) == 1
        assert "ping True" in _manage(tmp_path, "shell", "-c", PING).stdout
        assert redis_servers_in(tmp_path) == servers, "not the command's to stop"
        assert running_embedded_redis(tmp_path) == embedded_redis_url(tmp_path)
    finally:
        stop_embedded_redis(tmp_path)
    assert redis_servers_in(tmp_path) == []


@pytest.mark.services
def test_a_worker_started_on_its_own_starts_redis_and_stops_it_when_it_stops(tmp_path):
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "kernelevolve_site", "worker",
             "-Q", "eval.interpret", "--concurrency", "1", "--hostname", "alone@%h",
             "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=_env(tmp_path), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while " ready." not in log.read_text(errors="replace"):
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.2)
        assert len(redis_servers_in(tmp_path)) == 1
        assert running_embedded_redis(tmp_path) == embedded_redis_url(tmp_path)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    assert redis_servers_in(tmp_path) == [], log.read_text()[-3000:]


def test_a_stopped_redis_starts_again_at_the_url_settings_hold(tmp_path):
    import redis

    url = embedded_redis_url(tmp_path)
    try:
        for _ in range(2):  # the second start finds the first's connections in TIME_WAIT
            assert ensure_embedded_redis(tmp_path) is True
            assert redis.Redis.from_url(url).ping()
            assert stop_embedded_redis(tmp_path) is True
            assert redis_servers_in(tmp_path) == []
    finally:
        stop_embedded_redis(tmp_path)
    assert embedded_redis_url(tmp_path) == url
