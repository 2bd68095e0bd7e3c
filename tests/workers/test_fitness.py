from workers import constants as C
from workers.gates.fitness import fitness
from workers.gates.performance import summarize


def _case(name, cand_ms, base_ms):
    return {
        "name": name,
        "timing": summarize([cand_ms * (1 + 0.001 * i) for i in range(30)]),
        "baselines": {"eager": summarize([base_ms * (1 + 0.001 * i) for i in range(30)])},
    }


def test_weighted_geomean_and_ci():
    cases = [_case("a", 1.0, 2.0), _case("b", 1.0, 1.5)]
    out = fitness(cases, {"a": 3, "b": 1}, "eager")
    expected = (2.0**0.75) * (1.5**0.25)
    assert abs(out["fitness"]["speedup"] - expected) < 0.01
    lo, hi = out["fitness"]["ci95"]
    assert lo <= out["fitness"]["speedup"] <= hi
    assert out["status"] == C.PASSED
    assert out["fitness"]["worst_case"]["name"] == "b"


def test_regression_of_a_frequent_case_rejects():
    cases = [_case("hot", 1.0, 0.9), _case("cold", 1.0, 5.0)]
    out = fitness(cases, {"hot": 100, "cold": 100}, "eager", regression_tolerance=0.02)
    assert out["fitness"]["speedup"] > 1
    assert out["fitness"]["regresses"]
    assert out["rule"] == C.RULE_REGRESSION


def test_no_gain_is_not_accepted_and_big_gain_is_flagged():
    same = fitness([_case("a", 1.0, 1.0)], {"a": 1}, "eager")
    assert same["rule"] == C.RULE_NOT_FASTER
    huge = fitness([_case("a", 1.0, 20.0)], {"a": 1}, "eager")
    assert huge["fitness"]["review"] == ["a"]
