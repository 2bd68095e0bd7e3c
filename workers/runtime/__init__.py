"""Runtime dispatch: what production code imports to serve registry kernels (no Django).

``DispatchClient`` fetches the signed stage manifest from the portal, verifies every signature,
loads the kernels and routes each call by region and stage (default, canary, shadow, or the
PyTorch reference as a counted fallback), then reports batched metrics back. ``replay`` drives a
client with a workload's shape distribution. See ``python -m workers.runtime --help``.
"""

from workers.runtime.client import DispatchClient
from workers.runtime.signing import SignatureError, canonical_json, verify

__all__ = ["DispatchClient", "SignatureError", "canonical_json", "verify"]
