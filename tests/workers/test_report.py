"""Typed cases and timings of a report: read back from the JSON a worker sends, they are the
same report (every case the evaluator writes round-trips exactly), typed where a reader uses
them, and frozen."""

import dataclasses
import json
from pathlib import Path

import pytest

from workers.report import Case, EvaluationReport, Timing

DEMO = Path(__file__).resolve().parents[2] / "docs" / "demo"


def _demo_reports() -> list[dict]:
    reports = []
    for path in sorted(DEMO.glob("h200-*.json")):
        reports += [n["report"] for n in json.loads(path.read_text())["nodes"] if n.get("report")]
    return reports


def _graph_timing(median_ms: float) -> dict:
    """A timing as the performance gate writes it today (paired graph replays)."""
    return {
        "median_ms": median_ms,
        "p10_ms": median_ms * 0.9,
        "p90_ms": median_ms * 1.2,
        "ci95_ms": [median_ms * 0.98, median_ms * 1.02],
        "samples": 3,
        "samples_ms": [median_ms, median_ms * 0.9, median_ms * 1.2],
        "mode": "graph",
        "device_median_ms": median_ms,
        "host_median_ms": 0.011,
        "graph_calls": 20,
        "input_sets": 4,
    }


def test_every_case_of_real_h200_reports_round_trips_and_reads_typed():
    reports = _demo_reports()
    assert len(reports) >= 20  # three searches: 25 evaluated candidates
    for report in reports:
        parsed = EvaluationReport.from_dict(report)
        cases = parsed.cases
        assert parsed.to_dict() == report
        assert [case.to_dict() for case in cases] == report["cases"]
        for case, plain in zip(cases, report["cases"], strict=True):
            if plain["timing"]:
                assert case.timing.median_ms == plain["timing"]["median_ms"]
                assert case.timing.ci95_ms == tuple(plain["timing"]["ci95_ms"])
                assert len(case.timing.samples_ms) == plain["timing"]["samples"]
                assert set(case.baselines) == set(plain["baselines"]) and case.baselines
                assert all(isinstance(t, Timing) for t in case.baselines.values())
            else:
                assert case.timing is None and not case.timed


def test_a_case_timed_today_round_trips_and_leaves_out_what_was_not_measured():
    plain = {
        "name": "b8_d4096",
        "kind": "workload",
        "weight": 3.0,
        "status": "passed",
        "skip_reason": None,
        "rule": None,
        "reason": None,
        "max_abs_err": 1e-6,
        "max_rel_err": 2e-6,
        "dtype": "float16",
        "overrides": {"batch_size": 8, "dim": 4096},
        "timing": _graph_timing(0.004),
        "baselines": {"eager": _graph_timing(0.006), "compile": _graph_timing(0.005)},
        "floor_ms": 0.001,
        "paired": {"eager": {"speedup": 1.5, "ci95": [1.4, 1.6]}},
        "bytes": 65536,
        "flops": 0.0,
        "trials": 3,
        "wall_s": 2.5,
    }
    case = Case.from_dict(plain)
    assert case.to_dict() == plain
    assert json.loads(json.dumps(case.to_dict())) == plain, "plain JSON: lists, not tuples"
    assert case.baselines["eager"].host_median_ms == 0.011
    assert case.timing.mode == "graph" and case.timing.graph_calls == 20

    unmeasured = {**_graph_timing(0.004), "device_median_ms": None, "host_median_ms": None}
    written = Timing.from_dict(unmeasured).to_dict()
    assert "device_median_ms" not in written and "host_median_ms" not in written
    assert written["median_ms"] == 0.004


def test_cases_and_timings_are_frozen():
    case = Case.from_dict(_demo_reports()[0]["cases"][0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.status = "failed"
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.timing.median_ms = 0.0
