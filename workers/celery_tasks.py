"""Evaluation tasks. They run the Django-free core and send the report to the control queue.

An evaluation is idempotent: keyed by node, platform and harness hash, so a redelivered task
(a worker killed mid-evaluation) evaluates again and the control side records it once. Each
worker process keeps one persistent sandbox `Evaluator` (torch and triton imported once); a
crashed or hung candidate restarts that child, never the worker.
"""

import atexit

from celery import current_app, shared_task
from celery.signals import worker_process_shutdown

from workers.contract.tasks import (
    BASELINE_TASK,
    CONTROL_QUEUE,
    EVALUATE_TASK,
    MODEL_CHECK_TASK,
    RECHECK_TASK,
    RECORD_BASELINE_TASK,
    RECORD_MODEL_CHECK_TASK,
    RECORD_RECHECK_TASK,
    RECORD_TASK,
)
from workers.search.start_cache import StartCache, kept_or_measured

_evaluator_holder: list = []


def _coerced(data: dict) -> dict:
    if "aot_target" in data:  # JSON turns the tuple into a list
        data = {**data, "aot_target": tuple(data["aot_target"])}
    return data


def _request(data: dict):
    from workers.evaluate import EvaluationRequest

    return EvaluationRequest(**_coerced(data))


def _evaluator():
    """This worker process's persistent Evaluator (one sandbox child, restarted on a crash)."""
    from workers.evaluate import Evaluator

    if not _evaluator_holder:
        evaluator = Evaluator()
        evaluator.__enter__()
        atexit.register(evaluator.__exit__, None, None, None)
        _evaluator_holder.append(evaluator)
    return _evaluator_holder[0]


@worker_process_shutdown.connect
def _close_evaluator(**_):
    """A pool process leaves through os._exit, past atexit: close the sandbox child and remove
    its scratch folder here, so a stopped worker leaves nothing in /tmp."""
    while _evaluator_holder:
        _evaluator_holder.pop().close()


@shared_task(name=EVALUATE_TASK, acks_late=True, soft_time_limit=840)
def evaluate_candidate(node_id: int, evaluation_key: str, request: dict) -> dict:
    """Evaluate one candidate and send `(node_id, key, report)` to the control queue."""
    report = _evaluator().evaluate(_request(request)).to_dict()
    current_app.send_task(RECORD_TASK, args=[node_id, evaluation_key, report], queue=CONTROL_QUEUE)
    return {"node_id": node_id, "verdict": report["verdict"], "failed_gate": report["failed_gate"]}


# The baseline's own limit (four evaluations' under max-autotune: workers.evaluate) and then
# the tuner's (workers.search.tuning), in one task.
@shared_task(name=BASELINE_TASK, acks_late=True, soft_time_limit=1320)
def baseline_problem(campaign_id: int, request: dict, tune: dict | None = None) -> dict:
    """Time the reference (and incumbent) once per campaign, then, where ``tune`` asks for it,
    run the per-case tuner on this GPU host (``workers.search.tuning``), or reuse both as kept
    on this host (``workers.search.start_cache``); send them to the control queue."""
    # A start kept on this host for the same problem and workload is reused (start_cache).
    report, tuned = kept_or_measured(StartCache(), _evaluator(), _coerced(request), tune)
    current_app.send_task(
        RECORD_BASELINE_TASK, args=[campaign_id, report, tuned], queue=CONTROL_QUEUE
    )
    return {"campaign_id": campaign_id}


@shared_task(name=RECHECK_TASK, acks_late=True, soft_time_limit=840)
def recheck_artifact(check_id: int, request: dict) -> dict:
    """Re-run a registry artifact's evaluation on this host's toolchain (a toolchain gate).

    Sent to the artifact's platform queue, so a cuda artifact is re-checked on a GPU host; the
    report goes to the control queue, where the first result for the check is kept.
    """
    import socket

    from workers.evaluate import EvaluatorUnavailable

    try:
        report = _evaluator().evaluate(_request(request)).to_dict()
    except EvaluatorUnavailable as exc:
        # A worker that cannot evaluate on this platform (say, no GPU on a cuda queue) says so:
        # the gate shows why it still waits instead of going quiet.
        report = {"unavailable": f"{socket.gethostname()}: {exc}"}
    current_app.send_task(RECORD_RECHECK_TASK, args=[check_id, report], queue=CONTROL_QUEUE)
    return {"check_id": check_id, "verdict": report.get("verdict")}


MODEL_CHECK_TIMEOUT_S = 780
MODEL_CHECK_MEMORY_BYTES = 64 << 30
# CUDA reserves far more address space than it uses: a GPU child gets no address-space cap
# that CUDA would trip over (its device memory is the GPU's own limit).
MODEL_CHECK_GPU_ADDRESS_SPACE = 1 << 46


@shared_task(name=MODEL_CHECK_TASK, acks_late=True, soft_time_limit=840)
def model_check_artifact(check_id: int, request: dict) -> dict:
    """Run the model check (a decoder stock vs patched with the artifact's kernel) behind the
    sandbox boundary on this host; the report goes to the control queue."""
    import socket

    from workers.boundary import BoundaryUnavailable
    from workers.confined import ConfinedFailure, run_confined

    gpu = request.get("platform") == "cuda"
    try:
        report = run_confined(
            "workers.runtime.model_check",
            request,
            timeout_s=MODEL_CHECK_TIMEOUT_S,
            cpu_s=MODEL_CHECK_TIMEOUT_S * 4,
            memory_bytes=MODEL_CHECK_GPU_ADDRESS_SPACE if gpu else MODEL_CHECK_MEMORY_BYTES,
            gpu=gpu,
        )
        if "verdict" not in report:
            report = {"verdict": "fail", "reason": f"the check raised: {report.get('error')}"}
    except BoundaryUnavailable as exc:
        report = {"unavailable": f"{socket.gethostname()}: {exc}"}
    except ConfinedFailure as exc:
        report = {"verdict": "fail", "reason": f"the model check gave no answer: {exc}"}
    current_app.send_task(RECORD_MODEL_CHECK_TASK, args=[check_id, report], queue=CONTROL_QUEUE)
    return {"check_id": check_id, "verdict": report.get("verdict")}
