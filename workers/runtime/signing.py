"""Ed25519 signatures over canonical JSON: shared by the portal (signs) and the client (verifies).

Canonical JSON is ``json.dumps`` with sorted keys, no spaces and UTF-8; floats keep Python's
shortest round-trip repr, so a body that survives a JSON round trip signs the same.
"""

from __future__ import annotations

import base64
import hashlib
import json

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALGORITHM = "Ed25519"


class SignatureError(ValueError):
    """A signature that is missing, malformed or does not match its body."""


def canonical_json(obj) -> bytes:
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def digest(obj) -> str:
    """sha256 of the canonical JSON of ``obj`` (an artifact's identity)."""
    return hashlib.sha256(canonical_json(obj)).hexdigest()


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def public_key_b64(public_key: Ed25519PublicKey) -> str:
    from cryptography.hazmat.primitives import serialization

    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def key_id(public_b64: str) -> str:
    return hashlib.sha256(base64.b64decode(public_b64)).hexdigest()[:16]


def load_public_key(public_b64: str) -> Ed25519PublicKey:
    try:
        return Ed25519PublicKey.from_public_bytes(base64.b64decode(public_b64, validate=True))
    except ValueError as exc:
        raise SignatureError(f"public key: not a base64 Ed25519 key ({exc})") from exc


def sign(private_key: Ed25519PrivateKey, body) -> str:
    return base64.b64encode(private_key.sign(canonical_json(body))).decode()


def verify(public_b64: str, body, signature_b64: str | None) -> None:
    """Raise ``SignatureError`` unless ``signature_b64`` signs ``body`` under the key."""
    if not signature_b64:
        raise SignatureError("unsigned")
    try:
        signature = base64.b64decode(signature_b64, validate=True)
    except ValueError as exc:
        raise SignatureError("signature: not base64") from exc
    try:
        load_public_key(public_b64).verify(signature, canonical_json(body))
    except InvalidSignature as exc:
        raise SignatureError("signature does not match the signed body (tampered)") from exc
