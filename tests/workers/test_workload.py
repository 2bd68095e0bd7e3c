import pytest

from workers import constants as C
from workers.contract.workload import WorkloadError, import_trace, parse_workload


def test_no_workload_is_one_case():
    w = parse_workload(None)
    assert [c.name for c in w.cases] == ["default"]
    assert w.tolerance["float32"] == C.DEFAULT_TOLERANCE["float32"]


def test_full_workload():
    w = parse_workload(
        {
            "cases": [
                {"name": "small", "overrides": {"batch_size": 16}, "weight": 120},
                {"name": "big", "overrides": {"dim": 8192}, "dtype": "bfloat16", "weight": 3},
            ],
            "tolerance": {"bfloat16": {"atol": 2e-2, "rtol": 2e-2}},
            "edge_cases": False,
        }
    )
    assert [c.weight for c in w.cases] == [120, 3]
    assert w.tolerance["bfloat16"] == {"atol": 2e-2, "rtol": 2e-2}
    assert w.tolerance["float32"] == C.DEFAULT_TOLERANCE["float32"]
    assert not w.edge_cases
    assert parse_workload({"tolerance": "exact"}).tolerance == C.EXACT


@pytest.mark.parametrize(
    "data, field",
    [
        ({"cases": [{"name": "a", "weight": -1}]}, "cases[0].weight"),
        ({"cases": [{"name": "a", "dtype": "float8"}]}, "cases[0].dtype"),
        ({"cases": [{"name": "a", "overrides": {"1x": 2}}]}, "cases[0].overrides.1x"),
        ({"cases": [{"name": "a"}, {"name": "a"}]}, "cases[1].name"),
        ({"cases": []}, "cases"),
        ({"tolerance": {"float32": {"atol": "x"}}}, "tolerance.float32.atol"),
        ({"edge_cases": "yes"}, "edge_cases"),
        ({"casez": []}, "casez"),
    ],
)
def test_malformed_workload_names_the_field(data, field):
    with pytest.raises(WorkloadError) as exc:
        parse_workload(data)
    assert str(exc.value).startswith(field)


def test_trace_csv_merges_identical_shapes():
    text = "batch_size,dim,count\n16,8192,100\n16,8192,20\n64,4096,5\n"
    cases = import_trace(text)
    assert {c.name: c.weight for c in cases} == {
        "batch_size=16,dim=8192": 120,
        "batch_size=64,dim=4096": 5,
    }
    assert cases[0].overrides == {"batch_size": 16, "dim": 8192}


def test_trace_json_with_dtype():
    cases = import_trace('[{"dim": 8, "dtype": "float16", "calls": 7}, {"dim": 8}]')
    assert [(c.dtype, c.weight) for c in cases] == [("float16", 7), (None, 1)]
    with pytest.raises(WorkloadError, match=r"trace\[0\].count"):
        import_trace([{"dim": 8, "count": -3}])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x" * 1_000_000, "trace line 1: not valid CSV (field larger than field limit"),
        ("dim,count\n" + "1" * 200_000 + ",2\n", "trace line 2: not valid CSV"),
        ("dim,count\n8,1\n16\n", "trace line 3: fewer values than the header has columns"),
        ("[" * 100_000 + "]" * 100_000, "trace: JSON nested too deeply"),
        ("dim,count\n" + "8,1\n" * 300_000, "trace: larger than 1024 KiB"),
    ],
)
def test_malformed_trace_text_is_a_workload_error_naming_the_line(text, message):
    with pytest.raises(WorkloadError) as exc:
        import_trace(text)
    assert str(exc.value).startswith(message)
