"""Reading a suite run as the bench script writes it: each problem's number, family, outcome
and one-line reason; on cuda the accepted kernel's speedup and timings; a bad document is
refused with the path of the field in error."""

import importlib.util
import json
from pathlib import Path

import pytest

from tests.support.suite_runs import cuda_doc, interpret_doc
from workers.suite_run import parse_suite_run, reason_group


def _script():
    path = Path(__file__).resolve().parents[2] / "scripts" / "bench_kernelbench.py"
    spec = importlib.util.spec_from_file_location("bench_kernelbench", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cuda_run_rows_say_how_each_problem_ended():
    run = parse_suite_run(cuda_doc())
    assert (run.platform, run.baseline, run.candidates) == ("cuda", "compile", 3)
    assert run.started_at.isoformat() == "2026-12-05T19:46:38+00:00"
    assert run.command == "scripts/bench_kernelbench.py --platform cuda --out /tmp/kb.json"
    # The device is the first row's that has one.
    assert run.fingerprint["device"] == "NVIDIA H100 80GB HBM3"
    by = {r.number: r for r in run.rows}
    assert [r.number for r in run.rows] == [19, 23, 25, 50, 89, 95]
    relu = by[19]
    assert (relu.problem, relu.family, relu.outcome, relu.reason) == (
        "19_ReLU",
        "elementwise",
        "accepted",
        "",
    )
    # The accepted kernel's speedup and timings, not the rejected candidate's faster 1.2x.
    assert (relu.best_speedup, relu.candidate_us, relu.compile_us) == (1.05, 10.0, 10.5)
    assert by[23].best_speedup == 1.6 and by[23].candidate_us == 17.5
    assert by[25].outcome == "rejected" and by[25].best_speedup == 0.974
    assert by[25].reason.startswith("fitness: [regression] speedup 0.974x")
    assert not by[25].reason.startswith("fitness: fitness:")
    conv = by[50]
    assert (conv.fits, conv.family, conv.outcome) == (False, None, "no_template")
    assert conv.reason.startswith("the reference uses convolution.default")
    assert by[95].outcome == "error" and by[95].reason.startswith("timed out after 240s")
    assert by[95].wall_s == 240.3


def test_interpret_run_has_no_speedups():
    run = parse_suite_run(interpret_doc())
    assert run.baseline is None
    assert all(r.best_speedup is None and r.candidate_us is None for r in run.rows)
    assert [r.outcome for r in run.rows].count("accepted") == 2


def _broken(path_and_change):
    doc = cuda_doc()
    path_and_change(doc)
    return doc


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["rows"][3].update(problem=7), "rows[3].problem: expected a string"),
        (lambda d: d["rows"][1].update(problem="Softmax.py"), "rows[1].problem: expected a file"),
        (lambda d: d["rows"][0].update(result="won"), "rows[0].result: expected one of"),
        (lambda d: d["rows"][2].update(evaluated="3"), "rows[2].evaluated: expected a whole"),
        (lambda d: d["rows"][0].update(fits="yes"), "rows[0].fits: expected true or false"),
        (lambda d: d["rows"][1]["nodes"][0].update(timed={}), "rows[1].nodes[0].timed: expected"),
        (lambda d: d["rows"][4].update(problem="19_ReLU.py"), "rows[4].problem: 19_ReLU is also"),
        (lambda d: d["meta"].pop("platform"), "meta.platform: expected a string"),
        (lambda d: d["meta"].update(started_at="yesterday"), "meta.started_at: expected an ISO"),
        (lambda d: d.pop("rows"), "rows: expected a list"),
        (lambda d: d["rows"].append("19_ReLU"), "rows[6]: expected an object"),
    ],
)
def test_a_bad_document_names_the_field(change, message):
    with pytest.raises(ValueError, match=r"^" + message.replace("[", r"\[").replace("]", r"\]")):
        parse_suite_run(_broken(change))


def test_unknown_keys_are_ignored():
    doc = cuda_doc()
    doc["meta"]["sandbox"] = {"new": "thing"}
    doc["rows"][0]["generator_stats"] = {"template": {"proposed": 3}}
    assert len(parse_suite_run(doc).rows) == 6


def test_the_scripts_summary_groups_reasons_with_the_portals_table():
    script = _script()
    reasons = [r.get("summary", "") for r in cuda_doc()["rows"] if r["result"] == "no_template"]
    assert reason_group(reasons[0]) == "a convolution"
    assert reason_group("no template fits: something new") == "something new"
    # The script's Markdown renders the same document, its groups from the same table.
    text = script.render(cuda_doc())
    assert "| elementwise | 2 | 1 | 1 | 0 |" in text and "| a convolution | 1 |" in text


def test_a_run_made_in_parts_merges_into_one_with_every_parts_command():
    """A device call has a time limit, so a suite runs in parts; the merged run keeps a later
    part's row for a problem run again, and the portal shows every part's command."""
    script = _script()
    first, again = cuda_doc(), cuda_doc()
    again["meta"]["argv"] = ["scripts/bench_kernelbench.py", "--only", "19_ReLU.py"]
    again["rows"] = [dict(again["rows"][0], result="rejected", accepted=0, nodes=[])]
    merged = script.merge([first, again])
    run = parse_suite_run(merged)
    assert len(run.rows) == len(first["rows"])
    assert {r.number: r.outcome for r in run.rows}[19] == "rejected"
    assert run.command.splitlines() == [
        "scripts/bench_kernelbench.py --platform cuda --out /tmp/kb.json",
        "scripts/bench_kernelbench.py --only 19_ReLU.py",
    ]
    bad = dict(merged, meta=dict(merged["meta"], parts=[{"argv": "x"}]))
    with pytest.raises(ValueError, match=r"meta.parts\[0\].argv: expected a list of strings"):
        parse_suite_run(bad)


def test_a_problem_stopped_after_an_accepted_kernel_is_accepted_with_the_stop_said():
    """KernelBench 58 on the GPU: the first candidate passed every gate at 3.76x over compile,
    then the problem's timeout struck while the others ran; the row said "error" and the
    kernel was lost from the table."""
    stopped = _script().stopped_row
    nodes = [
        {"id": "n1", "status": "accepted", "fitness": {"speedup": 3.76}},
        {"id": "n2", "status": "rejected", "fitness": {"speedup": 0.9}},
        {"id": "n3", "status": "pending"},
    ]
    row = stopped({"family": "conv", "nodes": nodes}, "timed out after 240s")
    assert (row["result"], row["accepted"], row["evaluated"]) == ("accepted", 1, 2)
    assert row["best_speedup"] == 3.76 and row["stopped"] == "timed out after 240s"
    failed = stopped({"family": "conv", "nodes": nodes[1:]}, "timed out after 240s")
    assert failed["result"] == "error" and failed["error"] == "timed out after 240s"
    assert stopped({}, "exited 1 without a result")["result"] == "error"


_RELU = """import torch

class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.rand(64, 64)]

def get_init_inputs():
    return []
"""


def test_a_tuning_run_gives_each_problem_time_for_the_tuners_it_waits_on(tmp_path):
    """Session 51 on an H100: four losses and norms run four at a time with the per-case tuner
    all hit the 240 s limit before their first candidate (the tuners take turns on the GPU).
    Without a limit given, a tuning run's grows by the tuner's time for each problem that may
    tune before it; a run without the tuner keeps 240 s, and a limit given is kept."""
    script = _script()
    for name in ("1_A.py", "2_B.py", "3_C.py"):
        (tmp_path / name).write_text(_RELU)
    out = tmp_path / "run.json"

    def limit(*extra):
        common = ["--dir", str(tmp_path), "--platform", "cuda", "--candidates", "0"]
        assert script.main([*common, "--out", str(out), *extra]) == 0
        doc = json.loads(out.read_text())
        assert [r["result"] for r in doc["rows"]] == ["claimed"] * 3  # no GPU asked for
        return doc["meta"]["timeout_s"]

    assert limit("--tune", "--jobs", "2") == 240 + 100 * 2
    assert limit("--tune", "--jobs", "8") == 240 + 100 * 3  # no more tuners than problems
    assert limit("--jobs", "8") == 240
    assert limit("--tune", "--jobs", "8", "--timeout-s", "300") == 300
