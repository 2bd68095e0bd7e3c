"""Tests: the same real services (database, Redis) as dev; SQLite's test database is a file so
that worker and server processes started by the tests see the same data."""

import os

from kernelevolve_site.settings.base import *  # noqa: F403
from kernelevolve_site.settings.base import CHANNEL_LAYERS, DATA_DIR, DATABASES, REDIS_URL

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-kernelevolve.sqlite3")}

if not os.environ.get("REDIS_URL"):
    # The embedded Redis may also serve a running `make run`: keep the tests' queues apart.
    REDIS_URL = REDIS_URL.rsplit("/", 1)[0] + "/1"
    CELERY_BROKER_URL = CELERY_RESULT_BACKEND = REDIS_URL
    CHANNEL_LAYERS["default"]["CONFIG"]["hosts"] = [REDIS_URL]

# Each test process counts login failures from zero: the shared Redis cache of base would carry
# them from one test (and one run) to the next.
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
