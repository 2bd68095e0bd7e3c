"""Sending the control side's own tasks by their contract names (``workers.contract.tasks``),
so that services never import the task modules that call them (one-way imports, issue 13)."""

from __future__ import annotations

from celery import current_app

from workers.contract.tasks import CONTROL_QUEUE, STEP_TASK


def campaign_step_send(campaign_id: int, *, countdown: float = 0, watchdog: bool = False) -> None:
    """Queue one step of the campaign on the control queue (now, or after ``countdown`` s;
    ``watchdog``: the step re-dispatches what no worker holds)."""
    options = {"countdown": countdown} if countdown else {}
    kwargs = {"watchdog": True} if watchdog else {}
    current_app.send_task(
        STEP_TASK, args=[campaign_id], kwargs=kwargs, queue=CONTROL_QUEUE, **options
    )
