"""A task goes through the real broker to a real worker process and its result comes back."""

import pytest

from apps.campaigns.tasks import worker_info


@pytest.mark.services
def test_task_round_trip_through_real_broker_and_worker(control_worker):
    from kernelevolve_site.celery import app

    assert not app.conf.task_always_eager
    result = worker_info.delay().get(timeout=60)
    assert result["torch"].startswith("2.")
    assert result["triton"]
    assert result["cuda_available"] in (True, False)


def test_celery_is_configured_for_safe_redelivery():
    from kernelevolve_site.celery import app

    conf = app.conf
    assert conf.task_serializer == "json" and conf.accept_content == ["json"]
    assert conf.task_acks_late is True
    assert conf.task_soft_time_limit and conf.task_time_limit > conf.task_soft_time_limit
    # Longer than any task may run, or a slow evaluation would be delivered twice.
    assert conf.broker_transport_options["visibility_timeout"] > conf.task_time_limit
