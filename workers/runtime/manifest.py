"""Fetch, verify and cache the signed stage manifest (stdlib HTTP, no Django).

The manifest is ``{"body": {...}, "signature"}`` signed by the portal's Ed25519 key; each
artifact inside carries its own signature from the moment it was frozen. A manifest whose own
signature fails is refused whole (the last good one stays in force); an artifact whose signature
fails is refused alone (its stages fall back) and reported. The last verified manifest is kept
in a cache file with its ETag, so a client starts and keeps serving while the portal is away.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from workers.runtime.signing import SignatureError, digest, key_id, verify

MANIFEST_PATH = "/api/registry/manifest/"
PUBLIC_KEY_PATH = "/api/registry/public-key/"
REPORTS_PATH = "/api/registry/runtime/reports/"


class ManifestError(RuntimeError):
    """The manifest could not be fetched or verified (the reason says which)."""


@dataclass
class VerifiedManifest:
    body: dict
    etag: str
    source: str  # "network" | "cache"
    artifacts: dict = field(default_factory=dict)  # digest -> verified artifact body
    refused: list = field(default_factory=list)  # [{"artifact", "reason"}]

    @property
    def version(self):
        return self.body.get("version")


def _atomic_write(path: str, data: dict) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(data, fh)
    os.replace(tmp, path)


class ManifestSource:
    """One portal URL + token + platform; remembers the last good manifest on disk."""

    def __init__(self, url, token, *, platform, cache_dir, public_key=None, timeout_s=10.0):
        self.url = url.rstrip("/")
        self.token = token
        self.platform = platform
        self.cache_dir = cache_dir
        self.timeout_s = timeout_s
        os.makedirs(cache_dir, exist_ok=True)
        self.cache_file = os.path.join(cache_dir, f"manifest-{platform}.json")
        self.key_file = os.path.join(cache_dir, "public-key.json")
        self.pinned_key = public_key
        self.last_error = ""

    # http -----------------------------------------------------------------------------------
    def request(self, path, *, method="GET", data=None, headers=None):
        """(status, lower-cased headers, JSON or None); raises ManifestError when unreachable."""
        req = urllib.request.Request(self.url + path, method=method)
        if self.token:
            req.add_header("Authorization", f"Token {self.token}")
        req.add_header("Accept", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        body = None
        if data is not None:
            body = json.dumps(data).encode()
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, body, timeout=self.timeout_s) as resp:
                raw = resp.read()
                headers = {k.lower(): v for k, v in resp.headers.items()}
                return resp.status, headers, json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            if exc.code == 304:
                return 304, {k.lower(): v for k, v in exc.headers.items()}, None
            detail = exc.read()[:300].decode(errors="replace")
            raise ManifestError(f"{method} {path}: HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ManifestError(f"{method} {path}: {exc}") from exc

    # keys -----------------------------------------------------------------------------------
    def public_key(self) -> str:
        """The key manifests must verify under: pinned, else first seen (then kept)."""
        if self.pinned_key:
            return self.pinned_key
        if os.path.exists(self.key_file):
            with open(self.key_file) as fh:
                self.pinned_key = json.load(fh)["public_key"]
            return self.pinned_key
        _, _, data = self.request(PUBLIC_KEY_PATH)
        if not data or key_id(data["public_key"]) != data.get("key_id"):
            raise ManifestError("public key: the portal's key and key id disagree")
        _atomic_write(self.key_file, {"public_key": data["public_key"], "key_id": data["key_id"]})
        self.pinned_key = data["public_key"]
        return self.pinned_key

    # manifests ------------------------------------------------------------------------------
    def verify(self, manifest: dict, *, etag: str, source: str) -> VerifiedManifest:
        """Check the manifest signature (else raise) and every artifact's (else refuse it)."""
        key = self.public_key()
        if not isinstance(manifest, dict) or "body" not in manifest:
            raise ManifestError("manifest: malformed")
        try:
            verify(key, manifest["body"], manifest.get("signature"))
        except SignatureError as exc:
            raise ManifestError(f"manifest refused: {exc}") from exc
        body = manifest["body"]
        if body.get("platform") != self.platform:
            raise ManifestError(f"manifest refused: platform {body.get('platform')!r}")
        verified = VerifiedManifest(body=body, etag=etag, source=source)
        for name, entry in (body.get("artifacts") or {}).items():
            try:
                verify(key, entry.get("body"), entry.get("signature"))
                if digest(entry["body"]) != name:
                    raise SignatureError("digest does not match the signed body")
            except (SignatureError, AttributeError, TypeError) as exc:
                verified.refused.append({"artifact": name, "reason": str(exc)})
                continue
            verified.artifacts[name] = entry["body"]
        return verified

    def load_cached(self) -> VerifiedManifest | None:
        if not os.path.exists(self.cache_file):
            return None
        try:
            with open(self.cache_file) as fh:
                cached = json.load(fh)
            return self.verify(cached["manifest"], etag=cached["etag"], source="cache")
        except (ManifestError, OSError, ValueError, KeyError) as exc:
            self.last_error = f"cache refused: {exc}"
            return None

    def fetch(self, current: VerifiedManifest | None) -> VerifiedManifest | None:
        """A newer verified manifest, or None when unchanged (304). Raises ManifestError."""
        headers = {"If-None-Match": current.etag} if current and current.etag else {}
        status, resp_headers, data = self.request(
            f"{MANIFEST_PATH}?platform={self.platform}", headers=headers
        )
        if status == 304:
            return None
        etag = resp_headers.get("etag", "")
        verified = self.verify(data, etag=etag, source="network")
        _atomic_write(self.cache_file, {"etag": etag, "manifest": data})
        return verified

    def post_report(self, report: dict) -> dict | None:
        _, _, data = self.request(REPORTS_PATH, method="POST", data=report)
        return data
