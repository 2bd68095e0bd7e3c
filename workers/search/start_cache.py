"""A campaign's fixed start, paid once per problem, workload and GPU host (issue 11, throughput).

Before its first round a GPU campaign times the reference beside its peers (the baseline) and
runs the per-case tuner: 90-190 s of device time on the catalog's problems, against a few
seconds per candidate. A user who runs the search again on the same problem and workload (more
candidates, another seed, after a generator change) gets the same answer from both: the baseline
is shown, not judged by (every candidate is timed again beside the peers in its own paired
rounds), and the tuner's table is a seed that the gates check like any other.

So the start is kept here, as one JSON file per key, and reused when:

- the key matches: a hash of what the baseline and the tuner depend on (problem and incumbent
  source, workload, platform, baseline, whether it tunes; not the seed, budget or trials);
- the host matches: the live sandbox child's fingerprint agrees with the kept one on what
  changes timings (device, driver, CUDA, torch, Triton, Python, the harness hash);
- it is young enough (``max_age_s``, a day by default) and it passed.

A reused start costs the campaign no device time and says so (``state["start_reused"]``:
when and where it was measured). Nothing from a failed baseline is kept. The file is data the
worker wrote, read back with the same checks as a fresh answer (``tuning.checked``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

from workers import constants as C

# What must agree between the kept fingerprint and the live one.
HOST_KEYS = (
    "platform",
    "device",
    "compute_capability",
    "driver",
    "cuda",
    "torch",
    "triton",
    "python",
    "harness_hash",
)
DEFAULT_MAX_AGE_S = 24 * 3600.0
VERSION = 1


def default_root() -> Path:
    """``KERNELEVOLVE_START_CACHE``, else ``<KERNELEVOLVE_DATA_DIR>/start-cache``, else the
    user's cache folder."""
    explicit = os.environ.get("KERNELEVOLVE_START_CACHE")
    if explicit:
        return Path(explicit)
    data = os.environ.get("KERNELEVOLVE_DATA_DIR")
    if data:
        return Path(data) / "start-cache"
    return Path(os.path.expanduser("~/.cache/kernelevolve/start"))


# What a campaign's config may change without changing its start: the candidates' correctness
# trials and tolerance, the seed of the inputs' values (the references' time does not depend on
# them), the candidates' time limit.
NOT_IN_KEY = ("trials", "seed", "regression_tolerance", "time_limit_s")


def start_key(request: dict, tune) -> str:
    """The hash of everything the baseline (``request``: a campaign's ``baseline_request``) and
    the tuner's answer (``tune``: its request, or whether it runs) depend on."""
    parts = {k: v for k, v in request.items() if k not in NOT_IN_KEY}
    parts["tune"] = bool(tune)
    if isinstance(tune, dict) and tune.get("cute"):
        parts["tune_cute"] = True  # the CuTe template's table is part of the start
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def host_differs(kept: dict | None, live: dict | None) -> list[str]:
    """The fingerprint fields that differ between the kept start and the live host."""
    kept, live = kept or {}, live or {}
    return [k for k in HOST_KEYS if kept.get(k) != live.get(k)]


class StartCache:
    """A folder of kept campaign starts (see the module docstring)."""

    def __init__(self, root: str | Path | None = None, max_age_s: float = DEFAULT_MAX_AGE_S):
        self.root = Path(root) if root is not None else default_root()
        self.max_age_s = float(max_age_s)

    def _path(self, key: str) -> Path:
        return self.root / f"{key}.json"

    def get(self, key: str, live_fingerprint: dict | None) -> tuple[dict | None, str]:
        """``(kept, why)``: the kept start ``{"baseline", "tuned", "saved_at"}`` when it may be
        reused, else None and a line saying why not."""
        path = self._path(key)
        try:
            kept = json.loads(path.read_text())
        except FileNotFoundError:
            return None, "no kept start for this problem and workload"
        except (OSError, ValueError) as exc:
            return None, f"the kept start is unreadable ({type(exc).__name__})"
        if not isinstance(kept, dict) or kept.get("version") != VERSION:
            return None, "the kept start is from another version"
        baseline = kept.get("baseline")
        if not isinstance(baseline, dict) or baseline.get("status") != C.PASSED:
            return None, "the kept start has no passed baseline"
        age = time.time() - float(kept.get("saved_at") or 0.0)
        if not 0 <= age <= self.max_age_s:
            return (
                None,
                f"the kept start is {age / 3600:.1f} h old (at most {self.max_age_s / 3600:.1f} h)",
            )
        differs = host_differs(baseline.get("fingerprint"), live_fingerprint)
        if differs:
            return None, f"the kept start was measured elsewhere ({', '.join(differs)} differ)"
        return kept, f"kept start from {age:.0f} s ago, same host"

    def put(self, key: str, baseline: dict, tuned: dict | None) -> bool:
        """Keep a passed baseline and the tuner's answer (atomically); False if not kept. A
        tuner that failed (a timeout, say) is not kept: the next campaign tunes again."""
        if baseline.get("status") != C.PASSED:
            return False
        for answer in (tuned, (tuned or {}).get("cute")):
            if isinstance(answer, dict) and not answer.get("ok") and not answer.get("skipped"):
                return False
        record = {"version": VERSION, "saved_at": time.time(), "baseline": baseline, "tuned": tuned}
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump(record, fh)
            os.replace(tmp, self._path(key))
        except OSError:
            return False
        return True


def kept_or_measured(
    starts: StartCache | None, evaluator, request: dict, tune: dict | None
) -> tuple[dict, dict | None]:
    """A campaign's start on this GPU host: ``(baseline report, tuner answer)``, kept ones where
    ``starts`` has them for this key and host, else measured here (``evaluator.baseline``, then
    the tuner where ``tune`` asks) and kept. A reused baseline carries ``reused`` (when, what it
    cost then, why it applies); one measured here ``start_note`` (why nothing was reused). The
    standalone CLI and the GPU worker's baseline task both start campaigns through this."""
    from workers.evaluate import EvaluationRequest
    from workers.search.tuning import run_tuner

    req = EvaluationRequest(**request)
    key, note = None, None
    if starts is not None and req.platform == C.PLATFORM_CUDA:
        key = start_key(request, tune)
        live = (evaluator.child(req.platform).hello or {}).get("fingerprint")
        kept, note = starts.get(key, live)
        if kept is not None:
            baseline = dict(kept["baseline"])
            tuned = kept.get("tuned")
            cost = float(baseline.get("device_s") or 0.0)
            if isinstance(tuned, dict) and tuned.get("ok"):
                cost += float(tuned.get("wall_s") or 0.0)
            baseline["reused"] = {"saved_at": kept["saved_at"], "device_s": cost, "note": note}
            return baseline, tuned
    report = evaluator.baseline(req)
    baseline = report.to_dict() if hasattr(report, "to_dict") else dict(report)
    tuned = run_tuner(tune) if tune else None
    if key is not None:
        starts.put(key, baseline, tuned)
    if note:
        baseline["start_note"] = note
    return baseline, tuned
