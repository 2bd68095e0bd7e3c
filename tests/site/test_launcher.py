"""`make run`'s launcher: several web processes, and nothing it started outlives it."""

import os
import signal
import subprocess
import sys
import time

import pytest

from kernelevolve_site import launcher


def test_web_runs_the_requested_number_of_uvicorn_workers():
    children = dict(launcher._children("127.0.0.1", 8000, "control", False, workers=3))
    web = children["web"]
    assert web[web.index("--workers") + 1] == "3"
    assert 2 <= launcher.default_web_workers() <= 8


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_stopping_kills_what_a_child_left_behind(tmp_path):
    """A child that ignores SIGTERM and has started a process of its own (as uvicorn starts its
    workers) is killed with that process once the wait is over."""
    pid_file = tmp_path / "grandchild.pid"
    script = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "grandchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(grandchild.pid))\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    deadline = time.monotonic() + 10
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline, "the child did not start its own process"
        time.sleep(0.05)
    grandchild = int(pid_file.read_text())
    try:
        started = time.monotonic()
        launcher._stop_children({"stubborn": child}, timeout=0.5)
        assert time.monotonic() - started < 5
        assert child.poll() is not None
        deadline = time.monotonic() + 5
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(grandchild)
    finally:
        for pid in (child.pid, grandchild):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _fake_launch(monkeypatch, tmp_path, seed_fails=False):
    """main() with Redis, seeding and the children replaced by recorders."""
    calls = []
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.setenv("KERNELEVOLVE_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(launcher, "ensure_embedded_redis", lambda d: calls.append("redis") or True)
    monkeypatch.setattr(launcher, "stop_embedded_redis", lambda d: calls.append("stop") or True)
    monkeypatch.setattr(launcher, "embedded_redis_url", lambda d: "redis://127.0.0.1:1/0")

    def run(cmd, cwd, env, check):
        calls.append(("seed", cmd[-1], env.get("REDIS_URL")))
        if seed_fails:
            raise subprocess.CalledProcessError(1, cmd)

    monkeypatch.setattr(launcher.subprocess, "run", run)
    monkeypatch.setattr(launcher, "_run", lambda args, env: calls.append("children") or 0)
    monkeypatch.setattr(sys, "argv", ["launcher", "--seed-demo", "--workers", "2"])
    return calls


def test_make_run_seeds_the_demo_once_redis_answers(monkeypatch, tmp_path):
    """A fresh machine's `make run` stopped at seed_demo: importing a demo search sends a live
    event, and the embedded Redis was not started yet. The launcher seeds after starting it,
    with its URL, before the web and the worker."""
    calls = _fake_launch(monkeypatch, tmp_path)
    assert launcher.main() == 0
    assert calls == ["redis", ("seed", "seed_demo", "redis://127.0.0.1:1/0"), "children", "stop"]


def test_a_failed_seed_stops_the_redis_it_started(monkeypatch, tmp_path):
    calls = _fake_launch(monkeypatch, tmp_path, seed_fails=True)
    with pytest.raises(subprocess.CalledProcessError):
        launcher.main()
    assert calls == ["redis", ("seed", "seed_demo", "redis://127.0.0.1:1/0"), "stop"]
