"""Real service processes for tests: Celery workers and the ASGI server on the test database."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent.parent


def database_url_for_tests() -> str:
    """The URL of the database the tests run on (pytest-django's test database)."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    host = s.get("HOST") or "127.0.0.1"
    return f"postgres://{auth}@{host}:{s.get('PORT') or 5432}/{s['NAME']}"


def service_env(**extra: str) -> dict[str, str]:
    from django.conf import settings

    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="kernelevolve_site.settings.test",
        DATABASE_URL=database_url_for_tests(),
        REDIS_URL=settings.REDIS_URL,
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


class Service:
    """A child process with its log in a file; stopped (or killed) by the test."""

    def __init__(self, name: str, cmd: list[str], env: dict[str, str], log_dir: Path):
        log_dir.mkdir(parents=True, exist_ok=True)
        self.name = name
        self.log_path = log_dir / f"{name}.log"
        self._log = self.log_path.open("ab")
        # Its own process group, so a kill takes its pool children and sandboxes with it.
        self.proc = subprocess.Popen(
            cmd,
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL to the whole process group: what a crashed host does."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
        self._log.close()


def start_worker(name: str, queues: str, log_dir: Path, concurrency: int = 1) -> Service:
    from kernelevolve_site.celery import app

    cmd = [sys.executable, "-m", "celery", "-A", "kernelevolve_site", "worker",
           "-Q", queues, "--concurrency", str(concurrency), "--loglevel", "INFO",
           "--hostname", f"{name}@%h", "--without-gossip", "--without-mingle"]  # fmt: skip
    service = Service(name, cmd, service_env(), log_dir)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if service.proc.poll() is not None:
            raise RuntimeError(f"worker {name} exited:\n{service.log()[-3000:]}")
        replies = app.control.ping(timeout=0.5) or []
        if any(key.startswith(f"{name}@") for reply in replies for key in reply):
            return service
    service.stop()
    raise RuntimeError(f"worker {name} did not answer a ping:\n{service.log()[-3000:]}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_asgi_server(log_dir: Path, name: str = "asgi", **env: str) -> tuple[Service, str]:
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", "kernelevolve_site.asgi:application",
           "--host", "127.0.0.1", "--port", str(port), "--lifespan", "off"]  # fmt: skip
    service = Service(name, cmd, service_env(**env), log_dir)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if service.proc.poll() is not None:
            raise RuntimeError(f"ASGI server exited:\n{service.log()[-3000:]}")
        try:
            httpx.get(url + "/accounts/login/", timeout=1)
            return service, url
        except httpx.HTTPError:
            time.sleep(0.2)
    service.stop()
    raise RuntimeError(f"ASGI server did not start:\n{service.log()[-3000:]}")
