"""The dispatch client: route each call by region and stage, run shadows, report metrics.

Routing per call: find the region of the operator whose scope holds the call (dtype, shapes);
a canary artifact serves its k% of calls, the default artifact serves the rest, and a call with
no region (or a region without a serving kernel) runs the PyTorch reference and is counted as a
fallback. A shadow artifact runs beside the served path on sampled calls; the caller always gets
the served result, and the shadow output is compared with the reference in the contract's
tolerance (a mismatch is reported with its case). A background thread polls the manifest (so a
rollback is in force within one poll interval) and posts batched metrics.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass

from workers.runtime import scope as S
from workers.runtime.manifest import ManifestError, ManifestSource, VerifiedManifest
from workers.runtime.modules import ModuleCache

DEFAULT_POLL_INTERVAL_S = 10.0
DEFAULT_REPORT_INTERVAL_S = 5.0
LATENCY_SAMPLES_PER_KEY = 256  # per flush; a reservoir keeps the batch bounded
MISMATCH_CASES_PER_ARTIFACT = 20
PATH_DEFAULT, PATH_CANARY, PATH_FALLBACK = "default", "canary", "fallback"
DEFAULT_TOLERANCE = {
    "float32": {"atol": 1e-4, "rtol": 1e-4},
    "float16": {"atol": 1e-2, "rtol": 1e-2},
    "bfloat16": {"atol": 1e-2, "rtol": 1e-2},
    "float64": {"atol": 1e-8, "rtol": 1e-8},
}


@dataclass
class Route:
    """One region as the client serves it."""

    region: int
    operator: str
    scope: dict
    default: str | None
    canary: str | None
    canary_percent: float
    shadow: str | None
    shadow_rate: float


def _dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def compare(out, ref, tolerance) -> dict | None:
    """None when ``out`` matches ``ref`` in tolerance, else the mismatch's evidence."""
    import torch

    outs = out if isinstance(out, list | tuple) else [out]
    refs = ref if isinstance(ref, list | tuple) else [ref]
    if len(outs) != len(refs):
        return {"reason": f"{len(outs)} outputs, reference has {len(refs)}"}
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if not isinstance(r, torch.Tensor):
            continue
        if not isinstance(o, torch.Tensor) or o.shape != r.shape:
            shape = tuple(o.shape) if isinstance(o, torch.Tensor) else type(o).__name__
            return {"reason": f"output {i}: shape {shape} != {tuple(r.shape)}"}
        dtype = _dtype_name(r)
        tol = tolerance if tolerance == "exact" else (tolerance or {}).get(dtype)
        tol = tol or DEFAULT_TOLERANCE.get(dtype, DEFAULT_TOLERANCE["float32"])
        a, b = o.detach().double(), r.detach().double()
        nan = torch.isnan(a) & ~torch.isnan(b)
        both_inf = torch.isinf(a) & torch.isinf(b) & (a == b)
        diff = torch.where(both_inf, torch.zeros_like(a), (a - b).abs())
        diff = torch.where(torch.isnan(diff) & ~nan, torch.zeros_like(diff), diff)
        max_abs = float(diff.max()) if diff.numel() else 0.0
        rel = diff / b.abs().clamp_min(1e-12)
        max_rel = float(rel.max()) if rel.numel() else 0.0
        if tol == "exact":
            bad = (diff != 0) | nan
            atol = rtol = 0.0
        else:
            atol, rtol = tol["atol"], tol["rtol"]
            # Both sides are rounded to the output dtype (unlike the correctness gate, which
            # compares against a higher-precision reference): one unit in the last place of
            # disagreement is rounding, not a wrong kernel (seen on the H200: bf16 RMSNorm, 1 of
            # 16.7M elements 1 ulp apart at |x| ~ 2, just past atol + rtol·|x|).
            ulp = torch.finfo(r.dtype).eps if r.is_floating_point() else 0.0
            bad = (diff > atol + (rtol + ulp) * b.abs()) | nan
        if bool(bad.any()):
            return {
                "reason": f"output {i}: {int(bad.sum())} of {bad.numel()} elements out of "
                f"tolerance (atol {atol}, rtol {rtol})",
                "max_abs_err": max_abs if max_abs == max_abs else None,
                "max_rel_err": max_rel if max_rel == max_rel else None,
                "nan": bool(nan.any()),
            }
    return None


class _Metrics:
    """Counters for one reporting window (thread-safe)."""

    def __init__(self, seed: int):
        self.lock = threading.Lock()
        self.rng = random.Random(seed)
        self.reset()

    def reset(self):
        self.started = time.time()
        self.calls = defaultdict(lambda: {"calls": 0, "errors": 0, "latency_ms": [], "seen": 0})
        self.shadow = defaultdict(lambda: {"samples": 0, "mismatches": 0, "cases": []})
        self.refused = {}

    def count(self, key, ms, error=False):
        with self.lock:
            row = self.calls[key]
            row["calls"] += 1
            row["errors"] += int(error)
            row["seen"] += 1
            if len(row["latency_ms"]) < LATENCY_SAMPLES_PER_KEY:
                row["latency_ms"].append(ms)
            else:
                j = self.rng.randrange(row["seen"])
                if j < LATENCY_SAMPLES_PER_KEY:
                    row["latency_ms"][j] = ms

    def add(self, key, calls, errors, latency_ms):
        """Counts gathered elsewhere (``torch.ops.ke`` launchers): many calls at once."""
        with self.lock:
            row = self.calls[key]
            row["calls"] += calls
            row["errors"] += errors
            row["seen"] += len(latency_ms)
            room = LATENCY_SAMPLES_PER_KEY - len(row["latency_ms"])
            row["latency_ms"].extend(latency_ms[: max(room, 0)])

    def shadow_sample(self, artifact, region, mismatch):
        with self.lock:
            row = self.shadow[(artifact, region)]
            row["samples"] += 1
            if mismatch is not None:
                row["mismatches"] += 1
                if len(row["cases"]) < MISMATCH_CASES_PER_ARTIFACT:
                    row["cases"].append(mismatch)

    def take(self) -> dict:
        with self.lock:
            calls, shadow, refused, started = self.calls, self.shadow, self.refused, self.started
            self.reset()
        return {
            "window_start": started,
            "window_end": time.time(),
            "counts": [
                {
                    "operator": op,
                    "region": region,
                    "dtype": dtype,
                    "path": path,
                    "artifact": artifact,
                    "calls": row["calls"],
                    "errors": row["errors"],
                    "latency_ms": [round(x, 6) for x in row["latency_ms"]],
                }
                for (op, region, dtype, path, artifact), row in calls.items()
            ],
            "shadow": [{"artifact": a, "region": r, **row} for (a, r), row in shadow.items()],
            "refused": [{"artifact": a, "reason": why} for a, why in refused.items()],
        }

    def restore(self, batch: dict):
        """Put an unsent batch back so the next flush carries it (the portal was away)."""
        with self.lock:
            for c in batch["counts"]:
                row = self.calls[(c["operator"], c["region"], c["dtype"], c["path"], c["artifact"])]
                row["calls"] += c["calls"]
                row["errors"] += c["errors"]
                room = LATENCY_SAMPLES_PER_KEY - len(row["latency_ms"])
                row["latency_ms"].extend(c["latency_ms"][:room])
            for s in batch["shadow"]:
                row = self.shadow[(s["artifact"], s["region"])]
                row["samples"] += s["samples"]
                row["mismatches"] += s["mismatches"]
                row["cases"].extend(s["cases"][: MISMATCH_CASES_PER_ARTIFACT - len(row["cases"])])
            for r in batch["refused"]:
                self.refused.setdefault(r["artifact"], r["reason"])
            self.started = min(self.started, batch["window_start"])


class DispatchClient:
    """Serve registry kernels in this process. ``call(operator, *inputs)`` is the hot path."""

    def __init__(
        self,
        url: str,
        token: str,
        *,
        platform: str = "interpret",
        cache_dir: str,
        poll_interval_s: float = DEFAULT_POLL_INTERVAL_S,
        report_interval_s: float = DEFAULT_REPORT_INTERVAL_S,
        public_key: str | None = None,
        device: str | None = None,
        seed: int | None = None,
        client_id: str | None = None,
        background: bool = True,
        timeout_s: float = 10.0,
    ):
        if platform == "interpret":
            if os.environ.get("TRITON_INTERPRET") != "1" and "triton.language" in sys.modules:
                # Triton's builtins (tl.sum, tl.max, ...) were made for compiled kernels when
                # it was imported; interpreted kernels calling them fail ("Cannot call
                # @triton.jit'd outside of the scope of a kernel"). Say so now, not per call.
                raise RuntimeError(
                    "platform 'interpret' needs TRITON_INTERPRET=1 before triton is imported; "
                    "this process imported triton without it"
                )
            os.environ["TRITON_INTERPRET"] = "1"
        self.platform = platform
        self.device = device or ("cuda" if platform == "cuda" else "cpu")
        self.poll_interval_s = poll_interval_s
        self.report_interval_s = report_interval_s
        self.client_id = client_id or f"{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.cache_dir = cache_dir
        self.source = ManifestSource(
            url, token, platform=platform, cache_dir=cache_dir, public_key=public_key,
            timeout_s=timeout_s,
        )  # fmt: skip
        self.metrics = _Metrics(seed)
        self.rng = random.Random(seed)
        self.manifest: VerifiedManifest | None = None
        self.routes: dict[str, list[Route]] = {}
        self.last_error = ""
        self.reports_sent = 0
        self._modules = ModuleCache(os.path.join(cache_dir, "modules"), "ke_rt_")
        self._models: dict[tuple, object] = {}
        self._stop = threading.Event()
        self._fingerprint = None
        self._collectors = []  # called with the metrics before each flush (torch.ops.ke counts)
        cached = self.source.load_cached()
        if cached is not None:
            self._install(cached)
        self.refresh()
        self._thread = None
        if background:
            self._thread = threading.Thread(target=self._loop, name="ke-dispatch", daemon=True)
            self._thread.start()

    # manifest -------------------------------------------------------------------------------
    def refresh(self) -> bool:
        """Poll the portal once; True when a new manifest is now in force."""
        try:
            fresh = self.source.fetch(self.manifest)
        except ManifestError as exc:
            self.last_error = str(exc)
            return False
        self.last_error = ""
        if fresh is None:
            return False
        self._install(fresh)
        return True

    def _install(self, manifest: VerifiedManifest) -> None:
        routes: dict[str, list[Route]] = defaultdict(list)
        ok = manifest.artifacts
        for r in manifest.body.get("regions", []):
            canary = r.get("canary") or {}
            shadow = r.get("shadow") or {}
            routes[r["operator"]].append(
                Route(
                    region=r["id"],
                    operator=r["operator"],
                    scope=r["scope"],
                    default=r.get("default") if r.get("default") in ok else None,
                    canary=canary.get("artifact") if canary.get("artifact") in ok else None,
                    canary_percent=float(canary.get("percent") or 0.0),
                    shadow=shadow.get("artifact") if shadow.get("artifact") in ok else None,
                    shadow_rate=float(shadow.get("sample_rate") or 0.0),
                )
            )
        with self.metrics.lock:
            for refusal in manifest.refused:
                self.metrics.refused[refusal["artifact"]] = refusal["reason"]
        # One assignment: a call sees the old routing or the new one, never half of each.
        self.routes, self.manifest = dict(routes), manifest

    @property
    def version(self):
        return self.manifest.version if self.manifest else None

    def serving(self, operator: str) -> list[dict]:
        """What serves each region of ``operator`` now (for logs and tests)."""
        return [
            {"region": r.region, "default": r.default, "canary": r.canary, "shadow": r.shadow}
            for r in self.routes.get(operator, [])
        ]

    # kernels --------------------------------------------------------------------------------
    def _module(self, key: str, source: str):
        return self._modules.get(key, source)

    def _problem(self, operator: str):
        op = (self.manifest.body.get("operators") or {}).get(operator) if self.manifest else None
        if not op:
            return None
        return self._module("p" + op["problem_sha256"], op["problem_source"])

    def _model(self, operator, artifact, constants, dtype):
        """Reference (artifact None) or kernel module instance for a case; parameters shared."""

        from workers.contract import problem as P

        key = (operator, artifact, tuple(sorted((constants or {}).items())), dtype)
        model = self._models.get(key)
        if model is not None:
            return model
        problem = self._problem(operator)
        kernel = None
        if artifact is not None:
            kernel = self._module("k" + artifact, self.manifest.artifacts[artifact]["source"])
        torch_dtype = P.DTYPES.get(dtype) if dtype else None
        _, ref, cand = P.make_models(
            problem, kernel, constants or {}, torch_dtype, 0, self.device, None
        )
        model = cand if artifact is not None else ref
        self._models[key] = model
        return model

    # the hot path ---------------------------------------------------------------------------
    def _route(self, operator, dtype, shapes) -> Route | None:
        for route in self.routes.get(operator, []):
            if S.matches(route.scope, dtype, shapes):
                return route
        return None

    def _artifact_admits(self, digest, dtype, shapes) -> bool:
        return digest is not None and S.matches(
            self.manifest.artifacts[digest]["scope"], dtype, shapes
        )

    def _timed(self, model, inputs):
        import torch

        sync = self.device.startswith("cuda") and torch.cuda.is_available()
        if sync:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model(*inputs)
        if sync:
            torch.cuda.synchronize()
        return out, (time.perf_counter() - t0) * 1e3

    def call(self, operator: str, *inputs, constants: dict | None = None, case: str | None = None):
        """Run ``operator`` on ``inputs`` through whatever serves its region now.

        ``constants`` are the problem's module constants for this call (its shape arguments,
        used to build the module like the reference does); ``case`` names the call in reports.
        """
        import torch

        floats = [t for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()]
        dtype = _dtype_name(floats[0]) if floats else None
        shapes = [tuple(t.shape) if isinstance(t, torch.Tensor) else None for t in inputs]
        route = self._route(operator, dtype, shapes)
        served, path = None, PATH_FALLBACK
        if route is not None:
            canary_ok = self._artifact_admits(route.canary, dtype, shapes)
            if canary_ok and self.rng.random() * 100.0 < route.canary_percent:
                served, path = route.canary, PATH_CANARY
            elif self._artifact_admits(route.default, dtype, shapes):
                served, path = route.default, PATH_DEFAULT
        region = route.region if route else None
        error = False
        reference_out = None
        if served is not None:
            try:
                out, ms = self._timed(self._model(operator, served, constants, dtype), inputs)
            except Exception as exc:  # noqa: BLE001 - a kernel fault must not take the call down
                error = True
                self.last_error = f"{served[:12]} raised {type(exc).__name__}: {exc}"
                served, path = None, PATH_FALLBACK
        if served is None:
            out, ms = self._timed(self._model(operator, None, constants, dtype), inputs)
            reference_out = out
        self.metrics.count((operator, region, dtype, path, served), ms, error=error)
        if (
            route is not None
            and self._artifact_admits(route.shadow, dtype, shapes)
            and self.rng.random() < route.shadow_rate
        ):
            self._shadow(operator, route, inputs, constants, dtype, shapes, case, reference_out)
        return out

    def _shadow(self, operator, route, inputs, constants, dtype, shapes, case, reference_out):
        digest = route.shadow
        if reference_out is None:
            reference_out, _ = self._timed(self._model(operator, None, constants, dtype), inputs)
        contract = self.manifest.artifacts[digest].get("tolerance")
        try:
            shadow_inputs = [t.clone() if hasattr(t, "clone") else t for t in inputs]
            shadow_out, _ = self._timed(
                self._model(operator, digest, constants, dtype), shadow_inputs
            )
            mismatch = compare(shadow_out, reference_out, contract)
        except Exception as exc:  # noqa: BLE001 - a failing shadow is a mismatch, not an outage
            mismatch = {"reason": f"raised {type(exc).__name__}: {exc}"}
        if mismatch is not None:
            mismatch = {
                "case": case or f"{dtype} {shapes}",
                "dtype": dtype,
                "shapes": [list(s) if s is not None else None for s in shapes],
                "constants": constants or {},
                **mismatch,
            }
        self.metrics.shadow_sample(digest, route.region, mismatch)

    # reporting ------------------------------------------------------------------------------
    def fingerprint(self) -> dict:
        if self._fingerprint is None:
            from workers.fingerprint import collect

            fp = collect(self.platform)
            self._fingerprint = {k: v for k, v in fp.items() if k != "executable"}
        return self._fingerprint

    def flush(self) -> dict | None:
        """Post this window's metrics; an unreachable portal keeps them for the next flush."""
        for collect in list(self._collectors):
            collect(self.metrics)
        batch = self.metrics.take()
        if not (batch["counts"] or batch["shadow"] or batch["refused"]):
            return None
        report = {
            "client": self.client_id,
            "platform": self.platform,
            "manifest_version": self.version,
            "fingerprint": self.fingerprint(),
            **batch,
        }
        try:
            answer = self.source.post_report(report)
        except ManifestError as exc:
            self.last_error = str(exc)
            self.metrics.restore(batch)
            return None
        self.reports_sent += 1
        return answer

    def add_collector(self, collect) -> None:
        """``collect(metrics)`` runs before each flush (``workers.runtime.ops`` counts)."""
        self._collectors.append(collect)

    def _loop(self):
        next_poll = time.monotonic() + self.poll_interval_s
        next_report = time.monotonic() + self.report_interval_s
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_poll:
                self.refresh()
                next_poll = now + self.poll_interval_s
            if now >= next_report:
                with contextlib.suppress(Exception):
                    self.flush()
                next_report = now + self.report_interval_s
            self._stop.wait(max(0.05, min(next_poll, next_report) - time.monotonic()))

    def close(self, *, flush: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        if flush:
            self.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
