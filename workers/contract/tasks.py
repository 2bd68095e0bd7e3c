"""The Celery contract between the portal and the workers: queue names, task names and what
each task's arguments are. Both sides import these names; neither spells them itself.

Control side (``apps.*.tasks``, on the ``control`` queue):

- ``STEP_TASK(campaign_id)``: record nothing, propose and dispatch the next round.
- ``RECORD_TASK(node_id, evaluation_key, report)``: one evaluation's report (``report`` as
  ``workers.report.EvaluationReport.to_dict()``); refused when ``evaluation_key`` is not the
  node's current dispatch.
- ``RECORD_BASELINE_TASK(campaign_id, report, tuned=None)``: the campaign's one baseline
  measurement, and the per-case tuner's answer where it tuned (``workers.search.tuning``).
- ``RECORD_RECHECK_TASK(check_id, report)``: a registry re-check's report.
- ``RECORD_MODEL_CHECK_TASK(check_id, report)``: a model check's report
  (``workers.runtime.model_check.run_check``, or ``{"unavailable": why}``).
- ``WATCHDOG_TASK()``, ``QUEUES_WATCH_TASK()``: periodic sweeps the control worker sends itself.

Worker side (``workers.celery_tasks``, on ``eval_queue(platform)``):

- ``EVALUATE_TASK(node_id, evaluation_key, request)``: ``request`` holds the keyword arguments
  of ``workers.evaluate.EvaluationRequest``; answers with ``RECORD_TASK``.
- ``BASELINE_TASK(campaign_id, request, tune=None)``: ``tune`` is ``tuning.tune_request``'s;
  answers with ``RECORD_BASELINE_TASK``.
- ``RECHECK_TASK(check_id, request)``: answers with ``RECORD_RECHECK_TASK``.
- ``MODEL_CHECK_TASK(check_id, request)``: ``request`` as ``run_check`` takes it; answers with
  ``RECORD_MODEL_CHECK_TASK``.
"""

CONTROL_QUEUE = "control"

STEP_TASK = "campaigns.step"
RECORD_TASK = "campaigns.record_evaluation"
RECORD_BASELINE_TASK = "campaigns.record_baseline"
RECORD_RECHECK_TASK = "registry.record_recheck"
RECORD_MODEL_CHECK_TASK = "registry.record_model_check"
WATCHDOG_TASK = "campaigns.watchdog"
QUEUES_WATCH_TASK = "campaigns.eval_queues_watch"
WORKER_INFO_TASK = "campaigns.worker_info"

EVALUATE_TASK = "workers.evaluate_candidate"
BASELINE_TASK = "workers.baseline_problem"
RECHECK_TASK = "workers.recheck_artifact"
MODEL_CHECK_TASK = "workers.model_check_artifact"

EVAL_QUEUES = {"interpret": "eval.interpret", "cuda": "eval.cuda.sm90"}


def eval_queue(platform: str) -> str:
    """The Celery queue evaluations for a platform go to (one per platform)."""
    return EVAL_QUEUES[platform]
