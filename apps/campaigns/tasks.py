"""Celery tasks of the control side. Tasks take ids and plain data and call one service."""

import platform
import socket

from celery import shared_task


@shared_task(name="campaigns.worker_info", soft_time_limit=30, time_limit=60)
def worker_info() -> dict:
    """What this worker is: host, Python, torch and triton versions, whether it sees a GPU."""
    import torch
    import triton

    return {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "cuda_available": torch.cuda.is_available(),
    }
