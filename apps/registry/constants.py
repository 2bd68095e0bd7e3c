"""Stages, gate outcomes, event and alarm kinds, and the registry's default thresholds."""

from django.db import models


class Stage(models.TextChoices):
    CANDIDATE = "candidate", "Candidate"
    SHADOW = "shadow", "Shadow"
    CANARY = "canary", "Canary"
    DEFAULT = "default", "Default"
    RETIRED = "retired", "Retired"
    ABORTED = "aborted", "Aborted"


# Promotion goes one step at a time; default -> retired happens when another default replaces it.
NEXT_STAGE = {
    Stage.CANDIDATE: Stage.SHADOW,
    Stage.SHADOW: Stage.CANARY,
    Stage.CANARY: Stage.DEFAULT,
}
ABORTABLE = (Stage.CANDIDATE, Stage.SHADOW, Stage.CANARY)
# Approvals each target stage needs unless the region sets its own (Region.required_approvals).
REQUIRED_APPROVALS = {Stage.SHADOW: 1, Stage.CANARY: 1, Stage.DEFAULT: 1}


class GateStatus(models.TextChoices):
    PASS = "pass", "Pass"
    FAIL = "fail", "Fail (abort)"
    INCONCLUSIVE = "inconclusive", "Inconclusive (wait)"


class Gate(models.TextChoices):
    SIGNATURE = "signature", "Signature"
    TOOLCHAIN = "toolchain", "Correctness under the serving toolchain"
    SHADOW = "shadow", "Shadow: zero mismatches"
    CANARY = "canary", "Canary: latency vs incumbent"
    MODEL = "model", "Model check: decoder stock vs patched"


class EventKind(models.TextChoices):
    CREATED = "created", "Created"
    APPROVED = "approved", "Approved"
    PROMOTED = "promoted", "Promoted"
    ABORTED = "aborted", "Aborted"
    RETIRED = "retired", "Retired"
    ROLLBACK = "rollback", "Rolled back"


class Path(models.TextChoices):
    """How the runtime served a call."""

    DEFAULT = "default", "Default kernel"
    CANARY = "canary", "Canary kernel"
    FALLBACK = "fallback", "PyTorch fallback"


class AlarmKind(models.TextChoices):
    SHADOW_MISMATCH = "shadow_mismatch", "Shadow mismatch"
    CANARY_REGRESSION = "canary_regression", "Canary latency regression"
    COVERAGE_DROP = "coverage_drop", "Coverage drop"
    TOOLCHAIN_CORRECTNESS = "toolchain_correctness", "Correctness failed after a toolchain change"
    TAMPERED = "tampered", "Tampered or unsigned artifact"
    KERNEL_ERROR = "kernel_error", "Kernel raised at runtime"


ARTIFACT_SCHEMA = 1
MANIFEST_SCHEMA = 1
SIGNING_KEY_FILE = "registry-ed25519.pem"
# Fingerprint fields that make a compiled kernel behave differently (host and Python do not).
TOOLCHAIN_KEYS = ("device", "compute_capability", "driver", "cuda", "torch", "triton")

CANARY_PERCENT = 10.0
SHADOW_SAMPLE_RATE = 0.25
SHADOW_MIN_SAMPLES = 50
CANARY_MIN_SAMPLES = 30
LATENCY_TOLERANCE = 0.05  # canary p50 and p99 may be at most 5% above the incumbent's
POLL_INTERVAL_S = 10.0
COVERAGE_DROP = 0.2  # alarm when a window's kernel coverage falls 20 points below the last one
LATENCY_SAMPLES_KEPT = 256
RECENT_REPORTS = 500  # how many recent reports the pages aggregate

# The model check before a default promotion (workers.runtime.model_check): the decoder it runs
# per platform. The interpreter's fits the catalog smoke workloads' shapes; the GPU's is Llama 3
# 8B's layer geometry (4 layers) with prefill and decode steps.
MODEL_CHECK_CONFIG = {
    "interpret": {"config": "tiny", "dtype": "float32", "time": False},
    "cuda": {"config": "llama3-8b-4l", "dtype": "bfloat16", "time": True, "rounds": 10},
}
MODEL_CHECK_RESEND_S = 1800
