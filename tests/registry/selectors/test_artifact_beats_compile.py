"""Whether an artifact's kernel serves under torch.compile: true only when its campaign judged it
against compile and it was faster on every case. The flag travels in the signed manifest (an
OpRuntime attached to a real DispatchClient keeps the kernel when compiling) and in the model
check's request; the artifact page says which code serves a compiled model, and why."""

import json

import pytest

from apps.registry import signing
from apps.registry.selectors import artifact_beats_compile, artifact_under_compile
from apps.registry.selectors.model_check import model_check_request
from apps.registry.services import artifact_create, manifest_issue
from tests.registry import helpers
from workers.runtime import DispatchClient, ops
from workers.runtime.model_check import runtime_from

pytestmark = pytest.mark.django_db


def _fitness(baseline: str, per_case: dict) -> dict:
    return {
        "speedup": 1.5,
        "ci95": [1.2, 1.8],
        "baseline": baseline,
        "worst_case": {"name": min(per_case, key=per_case.get), "speedup": min(per_case.values())},
        "regresses": False,
        "regressions": [],
        "per_case": per_case,
        "review": [],
        "regression_tolerance": 0.02,
    }


FASTER = {"b8_d96": 1.8, "b5_d40_bf16": 1.25}
ONE_SLOWER = {"b8_d96": 1.8, "b5_d40_bf16": 0.97}


def _artifact(users, baseline: str, per_case: dict | None):
    fitness = _fitness(baseline, per_case) if per_case is not None else None
    node = helpers.accepted_node(users["author"], baseline=baseline, fitness=fitness)
    return artifact_create(node=node, by=users["reviewer"])


def test_faster_than_compile_on_every_case_beats_compile(users):
    for baseline in ("compile", "max-autotune"):
        a = _artifact(users, baseline, FASTER)
        assert artifact_beats_compile(artifact=a) is True
        assert "the kernel serves" in artifact_under_compile(artifact=a).line


def test_judged_against_eager_does_not(users):
    a = _artifact(users, "eager", FASTER)
    assert artifact_beats_compile(artifact=a) is False
    assert "judged against eager" in artifact_under_compile(artifact=a).line


def test_slower_than_compile_on_one_case_does_not(users):
    a = _artifact(users, "compile", ONE_SLOWER)
    assert artifact_beats_compile(artifact=a) is False
    line = artifact_under_compile(artifact=a).line
    assert "the model's own code serves" in line and "b5_d40_bf16 (0.970×)" in line
    assert "b8_d96" not in line


def test_a_compile_campaign_that_timed_nothing_does_not(users):
    a = _artifact(users, "compile", None)  # the interpreter's report: no fitness
    assert artifact_beats_compile(artifact=a) is False


def _manifest_client(tmp_path):
    """A real DispatchClient on the registry's signed manifest (its cache; no portal running)."""
    manifest, etag = manifest_issue(platform="interpret")
    cache = tmp_path / "rt"
    cache.mkdir()
    (cache / "manifest-interpret.json").write_text(json.dumps({"manifest": manifest, "etag": etag}))
    client = DispatchClient(
        "http://127.0.0.1:9", "", cache_dir=str(cache), public_key=signing.public_key_b64(),
        background=False, timeout_s=0.5,
    )  # fmt: skip
    assert client.manifest is not None and client.manifest.source == "cache"
    return manifest, client


@pytest.mark.parametrize("per_case,beats", [(FASTER, True), (ONE_SLOWER, False)])
def test_the_manifest_carries_it_to_an_attached_runtime(users, tmp_path, per_case, beats):
    a = _artifact(users, "compile", per_case)
    a = helpers.advance(a, users["reviewer2"], "default")
    manifest, client = _manifest_client(tmp_path)
    try:
        entry = manifest["body"]["artifacts"][a.digest]
        assert entry["beats_compile"] is beats
        rt = ops.OpRuntime()
        rt.attach(client)
        assert rt.beats_compile("softmax") is beats
        assert [r.beats_compile for r in rt.routes["softmax"]] == [beats]
    finally:
        client.close(flush=False)


def test_a_manifest_without_the_flag_still_loads_and_keeps_stock_code(users, tmp_path):
    a = _artifact(users, "compile", FASTER)
    a = helpers.advance(a, users["reviewer2"], "default")
    _, client = _manifest_client(tmp_path)
    try:
        # An older portal's manifest: no beats_compile in its artifact entries.
        del client.manifest.body["artifacts"][a.digest]["beats_compile"]
        rt = ops.OpRuntime()
        rt.attach(client)
        assert "softmax" in rt.kinds() and rt.beats_compile("softmax") is False
    finally:
        client.close(flush=False)


def test_the_model_check_request_carries_it(users):
    fast = _artifact(users, "compile", FASTER)
    request = model_check_request(artifact=fast)
    assert [k["beats_compile"] for k in request["kernels"]] == [True]
    rt, _ = runtime_from(request["kernels"], "interpret")
    assert rt.beats_compile("softmax") is True

    eager = _artifact(users, "eager", FASTER)
    assert model_check_request(artifact=eager)["kernels"][0]["beats_compile"] is False


def test_the_artifact_page_says_what_serves_under_compile(client, users):
    fast = _artifact(users, "compile", FASTER)
    slow = _artifact(users, "compile", ONE_SLOWER)
    eager = _artifact(users, "eager", FASTER)
    client.force_login(users["viewer"])

    def line(a):
        page = client.get(f"/registry/artifacts/{a.pk}/").content.decode()
        return page.split('id="under-compile"')[1].split("</p>")[0]

    assert "Under torch.compile: the kernel serves (it beat compile on every case" in line(fast)
    assert 'data-beats-compile="true"' in line(fast)
    assert "the model&#x27;s own code serves" in line(slow) and "b5_d40_bf16" in line(slow)
    assert 'data-beats-compile="false"' in line(slow)
    assert "judged against eager" in line(eager)
