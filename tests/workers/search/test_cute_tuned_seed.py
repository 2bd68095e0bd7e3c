"""A campaign with the CuTe generator starts from the CuTe template's per-case table, tuned on
its GPU host beside the baseline (as the Triton table is: test_tuned_seed.py). The tuning itself
needs the GPU (its H200 runs: docs/benchmarks.md); here: the campaign asks for it, the answer is
checked before it is kept, the generator's first seed is the table, and a failed or missing
answer leaves the search as it was."""

from __future__ import annotations

import pytest

from workers.catalog import catalog_get
from workers.search.engine import STEP_BASELINE, SearchEngine, campaign_new
from workers.search.generators.base import EDGE_MUTATION, EDGE_SEED, GenerationContext
from workers.search.generators.cute import CuteGenerator
from workers.search.start_cache import StartCache, start_key
from workers.search.tune_child import handle
from workers.search.tuning import checked, tune_request

WORKLOAD = {
    "cases": [
        {"name": "long", "overrides": {"batch_size": 4, "dim": 32768}, "dtype": "bfloat16"},
    ]
}
TABLE = {"4,32768,bfloat16": {"threads": 128, "max_cluster": 4, "exchange": 1}}
CUTE = {
    "ok": True,
    "table": TABLE,
    "cases": [{"name": "long", "key": "4,32768,bfloat16", "speedup": 2.07}],
    "wall_s": 40.0,
}
# softmax is not a row kernel for the Triton tuner: its answer is "skipped", the CuTe one stands
SKIPPED = {"ok": False, "skipped": True, "error": "the tuner covers row kernels: softmax"}


def _state(generators=("template", "cute")):
    return campaign_new(
        problem_source=catalog_get("softmax").problem_source(),
        workload=WORKLOAD,
        platform="cuda",
        max_candidates=8,
        generators=generators,
    )


def _ctx(tuned, parents=(), mode=EDGE_SEED):
    return GenerationContext(
        problem_source=catalog_get("softmax").problem_source(),
        workload=WORKLOAD,
        platform="cuda",
        mode=mode,
        tuned=tuned,
        parents=list(parents),
    )


def test_a_campaign_with_the_cute_generator_asks_for_its_table():
    assert tune_request(_state())["cute"] is True
    assert "cute" not in tune_request(_state(generators=("template",)))


def test_the_cute_answer_is_checked_on_its_own():
    assert checked({**SKIPPED, "cute": CUTE})["cute"]["table"] == TABLE
    for bad in (
        {**CUTE, "table": {"4,32768,bfloat16": {"threads": 96}}},  # not a value of the template
        {**CUTE, "table": {"4,32768,bfloat16": {"__import__": 1}}},
        {**CUTE, "table": {"4,32768,bfloat16": {"prefetch": True}}},  # a bool is not a value
        {**CUTE, "table": {"4,32768,bfloat16": [128, 4]}},
        {**CUTE, "cases": [{"name": "long", "speedup": "fast"}]},
    ):
        answer = checked({**SKIPPED, "cute": bad})
        assert answer["cute"] == {"ok": False, "error": "the CuTe tuner's answer is malformed"}
    # a broken CuTe answer does not spoil the Triton one
    assert checked({"ok": True, "table": {}, "cases": [], "cute": "x"})["ok"] is True


def test_the_first_cute_seed_is_the_tuned_table_and_its_children_move_every_case():
    gen = CuteGenerator()
    seeds = gen.propose(_ctx({**SKIPPED, "cute": CUTE}), 5)
    assert seeds[0].params["table"] == TABLE
    assert seeds[0].note == "seed tuned per case on this GPU: long 2.070x"
    assert "'4,32768,bfloat16': {'threads': 128, 'max_cluster': 4, 'exchange': 1}," in (
        seeds[0].source
    )
    assert all("table" not in s.params for s in seeds[1:])
    assert gen.stats()["tuned"] == 1
    parent = {"params": seeds[0].params, "generator": "cute", "source": seeds[0].source}
    children = gen.propose(_ctx(None, [parent], EDGE_MUTATION), 3)
    assert children and all("table" not in c.params for c in children)


def test_without_a_usable_answer_the_seeds_are_as_before_and_say_why():
    plain = [s.params for s in CuteGenerator().propose(_ctx(None), 4)]
    gen = CuteGenerator()
    failed = gen.propose(_ctx({**SKIPPED, "cute": {"ok": False, "error": "timed out"}}), 4)
    assert [s.params for s in failed] == plain
    assert gen.stats()["tune_failed"] == 1 and gen.stats()["tune_error"] == "timed out"
    skipped = {**SKIPPED, "cute": {"ok": False, "skipped": True, "error": "no CuTe template"}}
    assert [s.params for s in CuteGenerator().propose(_ctx(skipped), 4)] == plain


def test_the_engine_keeps_the_cute_answer_beside_a_skipped_triton_one():
    state = _state()
    engine = SearchEngine.from_state(state)
    assert engine.step(state).action == STEP_BASELINE
    baseline = {"status": "passed", "cases": [], "fingerprint": {}, "device_s": 3.0}
    engine.record_baseline(state, baseline, tuned={**SKIPPED, "cute": CUTE})
    assert state["tuned"]["cute"]["table"] == TABLE
    assert state["baseline_device_s"] == pytest.approx(43.0)  # the CuTe tuner's GPU time
    assert tune_request(state) is None  # answered: not asked again


def test_a_start_with_the_cute_table_is_kept_apart_and_only_when_it_worked(tmp_path):
    request = {"problem_source": "x", "platform": "cuda"}
    assert start_key(request, {"cute": True}) != start_key(request, True)
    assert start_key(request, {"problem_source": "x"}) == start_key(request, True)
    cache = StartCache(tmp_path)
    passed = {"status": "passed", "fingerprint": {}}
    assert not cache.put("k", passed, {**SKIPPED, "cute": {"ok": False, "error": "timed out"}})
    assert cache.put("k", passed, {**SKIPPED, "cute": CUTE})


def test_the_tuner_child_skips_a_problem_no_cute_template_fits(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    gelu = catalog_get("gelu").problem_source()
    answer = handle({"problem_source": gelu, "workload": {}, "cute": True})
    assert answer["skipped"] is True and answer["cute"]["skipped"] is True
    assert "no CuTe template fits" in answer["cute"]["error"]
    assert not (tmp_path / "tune").exists()  # nothing written for a problem it does not tune
