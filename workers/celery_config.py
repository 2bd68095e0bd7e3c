"""Queue semantics shared by every Celery app of KernelEvolve (the site's and the Django-free
evaluation hosts'), so both sides of a queue agree: JSON only, late acknowledgement, time
limits, and a broker visibility timeout longer than any task may run (else a slow evaluation
would be delivered twice).
https://docs.celeryq.dev/en/stable/getting-started/backends-and-brokers/redis.html#visibility-timeout
"""

TASK_SOFT_TIME_LIMIT_S = 900
TASK_TIME_LIMIT_S = 960

CELERY_OPTIONS = {
    "task_serializer": "json",
    "result_serializer": "json",
    "accept_content": ["json"],
    "task_acks_late": True,
    "task_reject_on_worker_lost": True,
    "worker_prefetch_multiplier": 1,
    "task_soft_time_limit": TASK_SOFT_TIME_LIMIT_S,
    "task_time_limit": TASK_TIME_LIMIT_S,
    "broker_transport_options": {"visibility_timeout": 3600},
    "broker_connection_retry_on_startup": True,
    "result_expires": 86400,
}
