"""Tests: the same real services (database, Redis) as dev; SQLite's test database is a file so
that worker and server processes started by the tests see the same data."""

from kernelevolve_site.settings.base import *  # noqa: F403
from kernelevolve_site.settings.base import DATA_DIR, DATABASES

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-kernelevolve.sqlite3")}
