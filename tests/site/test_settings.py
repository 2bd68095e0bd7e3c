"""Configuration from the environment: one-machine defaults and the team deployment."""

import json
import os
import subprocess
import sys
from pathlib import Path

from kernelevolve_site.embedded_redis import running_embedded_redis

ROOT = Path(__file__).resolve().parent.parent.parent
PROBE = (
    "import json, django; django.setup(); from django.conf import settings as s; "
    "print(json.dumps({'engine': s.DATABASES['default']['ENGINE'], "
    "'name': str(s.DATABASES['default']['NAME']), 'redis': s.REDIS_URL, "
    "'broker': s.CELERY_BROKER_URL, 'layer': s.CHANNEL_LAYERS['default']['CONFIG']['hosts'], "
    "'secret': s.SECRET_KEY}))"
)


def _settings_in_child(env_overrides: dict, data_dir: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(
        DJANGO_SETTINGS_MODULE="kernelevolve_site.settings.dev",
        KERNELEVOLVE_DATA_DIR=str(data_dir),
        SECRET_KEY="",
    )
    env.update(env_overrides)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_defaults_are_sqlite_and_an_embedded_redis_shared_by_everything(tmp_path):
    first = _settings_in_child({}, tmp_path)
    assert first["engine"] == "django.db.backends.sqlite3"
    assert first["name"] == str(tmp_path / "kernelevolve.sqlite3")
    assert first["broker"] == first["redis"] and first["layer"] == [first["redis"]]
    assert first["redis"].startswith("redis://127.0.0.1:")
    # A second process (a worker) gets the same Redis URL and the same kept secret key.
    second = _settings_in_child({}, tmp_path)
    assert second["redis"] == first["redis"]
    assert second["secret"] == first["secret"] and len(first["secret"]) >= 40
    # Reading settings starts no server: the processes that need one do (test_embedded_redis).
    assert running_embedded_redis(tmp_path) is None


def test_environment_switches_to_postgresql_and_a_real_redis(tmp_path):
    found = _settings_in_child(
        {
            "DATABASE_URL": "postgres://ke:pw@db.example:5432/kernelevolve",
            "REDIS_URL": "redis://cache.example:6379/3",
            "SECRET_KEY": "from-the-environment",
        },
        tmp_path,
    )
    assert found["engine"] == "django.db.backends.postgresql"
    assert found["name"] == "kernelevolve"
    assert found["broker"] == "redis://cache.example:6379/3"
    assert found["layer"] == ["redis://cache.example:6379/3"]
    assert found["secret"] == "from-the-environment"
    assert not (tmp_path / "redis.port").exists(), "no embedded Redis when REDIS_URL is set"


def test_the_favicon_is_served_to_anyone(client):
    response = client.get("/favicon.ico", follow=True)
    assert response.status_code == 200
    assert b"<svg" in b"".join(response.streaming_content)
