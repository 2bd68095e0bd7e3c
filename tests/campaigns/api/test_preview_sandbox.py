"""An uploaded reference is untrusted: the preview (and the upload) run it behind the sandbox
boundary, never in the web process. The probe's attacks through `POST /api/problems/preview/`
with an engineer's token: a shell at import, the registry's private signing key and the portal's
secret key raised in the 400, a socket to the host."""

import os
import secrets

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from apps.campaigns.models import Problem
from tests.campaigns.support.builders import PROBLEM_SOURCE

pytestmark = pytest.mark.django_db


def _preview(user, source: str):
    client = APIClient()
    client.force_authenticate(user)
    return client.post("/api/problems/preview/", {"source": source}, format="json")


def _with_prelude(prelude: str) -> str:
    return prelude + "\n" + PROBLEM_SOURCE


@pytest.fixture
def planted_key():
    """A private key where the registry keeps its own (the repository's data/ folder)."""
    folder = os.path.join(settings.BASE_DIR, "data")
    os.makedirs(folder, exist_ok=True)
    body = secrets.token_hex(24)
    path = os.path.join(folder, f"probe-{body[:8]}-ed25519.pem")
    with open(path, "w") as fh:
        fh.write(f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n")
    os.chmod(path, 0o600)
    yield path, body
    os.remove(path)


def test_a_key_raised_at_import_never_reaches_the_response(users, planted_key):
    path, body = planted_key
    response = _preview(
        users["engineer"], _with_prelude(f"raise RuntimeError(open({path!r}).read())")
    )
    assert response.status_code == 400
    assert body not in response.content.decode()
    assert "No such file or directory" in " ".join(response.json()["source"])


def test_the_portal_secret_key_is_out_of_reach(users):
    response = _preview(
        users["engineer"],
        _with_prelude(
            "import os\nraise RuntimeError(repr(dict(os.environ)) + open('/proc/1/cmdline').read())"
        ),
    )
    assert response.status_code == 400
    assert settings.SECRET_KEY not in response.content.decode()


def test_a_shell_at_import_is_refused_by_name_and_runs_nothing(users, tmp_path):
    marker = tmp_path / "pwned"
    response = _preview(
        users["engineer"],
        _with_prelude(f"import ctypes\nctypes.CDLL(None).system(b'touch {marker}')"),
    )
    assert response.status_code == 400
    assert "sandbox: native call to system through ctypes" in " ".join(response.json()["source"])
    assert not marker.exists()
    assert not Problem.objects.exists()


def test_with_the_hook_switched_off_the_shell_still_cannot_reach_the_host(users, tmp_path):
    marker = tmp_path / "pwned"
    prelude = (
        "import gc, ctypes\n"
        "for _o in gc.get_objects():\n"
        "    if type(_o).__name__ == 'AuditPolicy':\n"
        "        _o.enforcing = False\n"
        f"rc = ctypes.CDLL(None).system(b'id -u > {marker}; touch {marker}')\n"
        "import os\n"
        "raise RuntimeError(f'system={rc} uid={os.getuid()}')"
    )
    response = _preview(users["engineer"], _with_prelude(prelude))
    assert response.status_code == 400
    reason = " ".join(response.json()["source"])
    assert "uid=0" not in reason and "uid=65534" in reason
    assert not marker.exists()


def test_an_honest_reference_still_previews(users):
    response = _preview(users["engineer"], PROBLEM_SOURCE)
    assert response.status_code == 200, response.content
    assert response.json()["reference_check"]["ok"] is True
