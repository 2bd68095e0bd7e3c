"""What `/healthz` reports: database, broker and worker reachability, each with a reason."""

import redis
from django.conf import settings
from django.core.cache import cache
from django.db import connection

from kernelevolve_site.celery import app as celery_app

BROKER_TIMEOUT_S = 1.0
WORKER_PING_TIMEOUT_S = 1.0
WORKERS_OK_TTL_S = 10


def _check_database() -> dict:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"ok": True, "detail": connection.vendor}
    except Exception as exc:  # noqa: BLE001 - any failure is "down", with its message
        return {"ok": False, "detail": f"{type(exc).__name__}: {exc}"}


def _check_broker() -> dict:
    try:
        client = redis.Redis.from_url(
            settings.CELERY_BROKER_URL,
            socket_timeout=BROKER_TIMEOUT_S,
            socket_connect_timeout=BROKER_TIMEOUT_S,
        )
        client.ping()
        return {"ok": True, "detail": "redis answers PING"}
    except redis.RedisError as exc:
        return {"ok": False, "detail": f"redis unreachable: {exc}"}


def _check_workers(broker_ok: bool) -> dict:
    if not broker_ok:
        return {"ok": False, "detail": "unknown: the broker is down", "workers": []}
    # A broadcast ping always waits its whole timeout (it cannot know how many will answer), so
    # a positive answer is kept for a few seconds: a probe polling /healthz gets it at once.
    key = f"healthz:workers:{settings.CELERY_BROKER_URL}"
    cached = cache.get(key)
    if cached:
        return {**cached, "detail": cached["detail"] + f" (within the last {WORKERS_OK_TTL_S} s)"}
    try:
        replies = celery_app.control.ping(timeout=WORKER_PING_TIMEOUT_S) or []
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "detail": f"ping failed: {exc}", "workers": []}
    names = sorted(name for reply in replies for name in reply)
    if not names:
        return {"ok": False, "detail": "no worker answered a ping within 1 s", "workers": []}
    found = {"ok": True, "detail": f"{len(names)} worker(s) answered", "workers": names}
    cache.set(key, found, WORKERS_OK_TTL_S)
    return found


def health_report() -> dict:
    database = _check_database()
    broker = _check_broker()
    workers = _check_workers(broker["ok"])
    checks = {"database": database, "broker": broker, "workers": workers}
    down = [name for name, check in checks.items() if not check["ok"]]
    return {"status": "ok" if not down else "degraded", "down": down, "checks": checks}
