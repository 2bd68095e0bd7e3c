"""A GPU search starts from the per-case tuner's table (issue 11: "start where compile ends").

The tuner itself needs a GPU (its numbers are in docs/benchmarks.md); here: the generator puts
the tuner's table first among its seeds, checks the answer that comes back from behind the
sandbox before using it, and searches as before where the tuner cannot run or fails."""

from __future__ import annotations

import pytest

from workers.catalog import catalog_get
from workers.search.cli import add_arguments
from workers.search.generators import template as T
from workers.search.generators.base import EDGE_SEED, GenerationContext
from workers.search.tune_child import handle

WORKLOAD = {
    "cases": [
        {"name": "small", "overrides": {"num_tokens": 4, "hidden_size": 256}, "weight": 1},
    ]
}
TABLE = {"4,256,float32": [1, 2, 256, 2, 1, 0, 1, 1]}


def _ctx(platform="cuda", workload=WORKLOAD):
    return GenerationContext(
        problem_source=catalog_get("rms_norm").problem_source(),
        workload=workload,
        platform=platform,
        mode=EDGE_SEED,
    )


@pytest.fixture
def tuner(monkeypatch):
    """A GPU host whose confined tuner gives ``answer`` (and records the requests)."""
    calls = []
    answer = {
        "ok": True,
        "table": TABLE,
        "cases": [{"name": "small", "key": "4,256,float32", "speedup": 1.21}],
    }

    import workers.confined

    real = workers.confined.run_confined

    def run_confined(module, request, **kwargs):
        if module != "workers.search.tune_child":  # tracing the problem: as it is
            return real(module, request, **kwargs)
        calls.append((module, request, kwargs))
        return answer

    monkeypatch.setattr("workers.confined.run_confined", run_confined)
    monkeypatch.setattr(T, "_has_gpu", lambda: True)
    return calls, answer


def test_the_first_seed_is_the_tuners_table(tuner):
    calls, _ = tuner
    gen = T.TemplateGenerator(tune=True)
    proposals = gen.propose(_ctx(), 4)
    first = proposals[0]
    assert first.params["table"] == TABLE
    assert "tuned per case on this GPU: small 1.210x" in first.note
    assert '"4,256,float32": [1, 2, 256, 2, 1, 0, 1, 1]' in first.source
    # Behind the boundary, with the GPU visible; once per problem and workload.
    module, request, kwargs = calls[0]
    assert module == "workers.search.tune_child" and kwargs["gpu"] is True
    assert request["workload"] == WORKLOAD
    gen.propose(_ctx(), 4)
    assert len(calls) == 1
    assert gen.stats()["tuned"] == 1


def test_a_malformed_or_failed_answer_is_not_used(tuner):
    _, answer = tuner
    answer["table"] = {"4,256,float32": ["__import__('os')"]}
    gen = T.TemplateGenerator(tune=True)
    proposals = gen.propose(_ctx(), 4)
    assert all("table" not in p.params or not p.params["table"] for p in proposals)
    assert gen.stats()["tune_failed"] == 1 and "malformed" in gen.stats()["tune_error"]
    answer.update(ok=False, error="RuntimeError: CUDA out of memory")
    gen = T.TemplateGenerator(tune=True)
    gen.propose(_ctx(), 4)
    assert "out of memory" in gen.stats()["tune_error"]


def test_no_tuning_off_a_gpu_campaign_or_off_a_gpu_host(tuner, monkeypatch):
    calls, _ = tuner
    T.TemplateGenerator(tune=True).propose(_ctx(platform="interpret"), 4)
    T.TemplateGenerator(tune=False).propose(_ctx(), 4)
    T.TemplateGenerator(tune=True).propose(_ctx(workload=None), 4)
    assert calls == []
    monkeypatch.setattr(T, "_has_gpu", lambda: False)
    gen = T.TemplateGenerator(tune=True)
    seeds = gen.propose(_ctx(), 4)
    assert seeds and calls == [] and gen.stats()["tune_skipped"] == 1


def test_the_cli_asks_for_tuning_with_a_flag():
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert parser.parse_args(["--catalog", "softmax"]).tune is False
    assert parser.parse_args(["--catalog", "softmax", "--tune"]).tune is True


def test_the_tuner_child_refuses_a_request_without_a_workload():
    assert handle({"problem_source": "x = 1"})["ok"] is False


def test_the_tuners_compile_workers_find_the_code_from_a_scratch_folder(tmp_path, monkeypatch):
    """Behind the sandbox the tuner runs in a scratch folder with a relative PYTHONPATH; its
    compile workers must still import this package (they could not, and the sweep then compiled
    every configuration one by one for minutes). A worker that fails says why, at once."""
    import argparse
    import json

    from workers.search.tune import _compile_all

    entry = catalog_get("rms_norm")
    spec = tmp_path / "workload.json"
    spec.write_text(json.dumps(WORKLOAD))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", ".")
    args = argparse.Namespace(
        problem=str(entry.problem_path), workload=str(spec), out=str(tmp_path), jobs=2
    )
    with pytest.raises(RuntimeError, match="compile worker") as err:
        _compile_all(args, {"no such case": [[1, 1, 256, 1, 1, 0, 0]]})
    assert "No module named" not in str(err.value)
    assert "KeyError" in str(err.value)  # the worker ran this package's code and said what failed
