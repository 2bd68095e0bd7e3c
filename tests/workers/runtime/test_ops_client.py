"""torch.ops.ke behind a real DispatchClient and portal: the patched demo decoder's softmax
calls are served by the region's default kernel, reported to the portal as kernel calls (and
the shapes outside the region as fallbacks), and a rollback reaches new launches."""

import pytest
import torch
from rest_framework.authtoken.models import Token

from apps.registry.models import RuntimeCount
from apps.registry.services import artifact_create, region_rollback
from tests.registry import helpers
from workers.runtime import DispatchClient, decoder, ops
from workers.runtime.patch import patch_model, unpatch_model

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _decode(model):
    torch.manual_seed(0)  # the same cache and tokens each time
    model.allocate_cache(4, fill=True)
    with torch.inference_mode():
        return model(torch.randint(0, 128, (4, 1)), 47)  # softmax rows 8 x 48 keys: in scope


def test_attached_runtime_serves_reports_and_follows_a_rollback(asgi_server, tmp_path):
    users = helpers.make_users()
    token = Token.objects.create(user=users["runtime"]).key
    a = artifact_create(node=helpers.accepted_node(users["author"]), by=users["reviewer"])
    a = helpers.advance(a, users["reviewer2"], "default")
    client = DispatchClient(
        asgi_server, token, cache_dir=str(tmp_path / "rt"), background=False, seed=0
    )
    rt = ops.OpRuntime()
    rt.attach(client)
    model = decoder.build("tiny")
    stock = _decode(model)
    try:
        with ops.using(rt):
            report = patch_model(model, runtime=rt)
            assert report.counts() == {"softmax": 2}  # the registry serves softmax only
            torch.testing.assert_close(_decode(model), stock, atol=1e-4, rtol=1e-4)
            with torch.inference_mode():  # a prefill: 5-key rows lie outside the region
                model.allocate_cache(1)
                model(torch.randint(0, 128, (1, 5)), 0)
            client.flush()
            served = RuntimeCount.objects.filter(artifact=a, path="default")
            assert sum(c.calls for c in served) == 2
            fallback = RuntimeCount.objects.filter(operator="softmax", path="fallback")
            assert sum(c.calls for c in fallback) == 2

            region_rollback(region=a.region, by=users["reviewer"], reason="test", to_reference=True)
            assert client.refresh()
            _decode(model)
            client.flush()
            assert sum(c.calls for c in served.all()) == 2  # no new kernel calls
            assert sum(c.calls for c in fallback.all()) == 4
    finally:
        unpatch_model(model)
        client.close(flush=False)
