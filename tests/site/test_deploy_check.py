"""`manage.py check --deploy` under the production settings: HTTPS redirect and HSTS are on by
default (no W004, no W008), and the flags that turn them off are read from the environment."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent


def _check_deploy(tmp_path: Path, **env_overrides: str) -> str:
    unset = {"DATABASE_URL", "REDIS_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"}  # the tests set the last
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(
        DJANGO_SETTINGS_MODULE="kernelevolve_site.settings.prod",
        KERNELEVOLVE_DATA_DIR=str(tmp_path),
        SECRET_KEY=secrets.token_urlsafe(60),
        ALLOWED_HOSTS="portal.example.com",
        **env_overrides,
    )
    out = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout + out.stderr


def test_production_settings_pass_the_hsts_and_ssl_redirect_checks(tmp_path):
    report = _check_deploy(tmp_path)
    assert "security.W004" not in report and "security.W008" not in report


def test_the_ssl_redirect_can_be_turned_off_where_a_proxy_redirects(tmp_path):
    report = _check_deploy(tmp_path, SECURE_SSL_REDIRECT="0", SECURE_HSTS_SECONDS="0")
    assert "security.W008" in report and "security.W004" in report
