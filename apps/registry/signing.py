"""The portal's Ed25519 signing key: generated on first use in DATA_DIR, never in the database.

The private key file is created exclusively (two processes starting at once agree on one key)
with mode 0600. The public key is what ``/api/registry/public-key/`` publishes.
"""

import functools
import os
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from django.conf import settings

from apps.registry.constants import SIGNING_KEY_FILE
from workers.runtime import signing


def key_path() -> Path:
    return Path(settings.DATA_DIR) / SIGNING_KEY_FILE


@functools.cache
def _load(path: str) -> Ed25519PrivateKey:
    if not os.path.exists(path):
        pem = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        # Write a private temp file, then link it into place: the link fails if another process
        # got there first (use theirs), and nobody ever reads a half-written key.
        tmp = f"{path}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(pem)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    with open(path, "rb") as fh:
        return serialization.load_pem_private_key(fh.read(), password=None)


def private_key() -> Ed25519PrivateKey:
    return _load(str(key_path()))


def public_key_b64() -> str:
    return signing.public_key_b64(private_key().public_key())


def key_id() -> str:
    return signing.key_id(public_key_b64())


def public_key_pem() -> str:
    return (
        private_key()
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def sign(body) -> str:
    return signing.sign(private_key(), body)


def verify(body, signature: str) -> None:
    """Raise ``workers.runtime.signing.SignatureError`` unless it verifies under our key."""
    signing.verify(public_key_b64(), body, signature)
