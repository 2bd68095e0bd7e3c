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


def _gate(a_ms, b_ms, base_ms=2.0):
    """A fitness gate over two equally weighted cases, as one process would measure them."""
    return fitness(
        [_case("a", a_ms, base_ms), _case("b", b_ms, base_ms)], {"a": 1, "b": 1}, "eager"
    )


def test_a_fresh_process_that_measures_the_same_keeps_the_verdict():
    from workers.gates.fitness import reconcile

    first = _gate(1.0, 1.0)
    out = reconcile(first, _gate(1.0, 1.001), C.FRESH_PROCESS_FLOOR)
    assert out["status"] == C.PASSED and "a fresh process agrees" in out["reason"]
    assert out["fitness"]["recheck"]["agrees"] and out["fitness"]["recheck"]["same_number"]
    assert out["fitness"]["speedup"] == first["fitness"]["speedup"]


def test_both_processes_pass_but_differ_the_lower_is_kept():
    """LayerNorm on the H200 (session 22): 1.228x in the first process, 1.214x in a fresh one,
    every case faster than compile in both; it was rejected as unstable, and is now accepted at
    the lower number, per case from the process that measured it."""
    from workers.gates.fitness import reconcile

    first, fresh = _gate(1.0, 1.0), _gate(1.0, 1.2)  # 2.0x, then ~1.83x
    out = reconcile(first, fresh, C.FRESH_PROCESS_FLOOR)
    assert out["status"] == C.PASSED
    assert out["fitness"]["speedup"] == fresh["fitness"]["speedup"]
    assert out["fitness"]["per_case"] == fresh["fitness"]["per_case"]
    rc = out["fitness"]["recheck"]
    assert rc["agrees"] and not rc["same_number"]
    assert rc["first"]["speedup"] == first["fitness"]["speedup"]
    assert "both pass, the lower is kept" in out["reason"]
    # The other way round the first process's (lower) numbers stand.
    back = reconcile(fresh, first, C.FRESH_PROCESS_FLOOR)
    assert back["status"] == C.PASSED
    assert back["fitness"]["speedup"] == fresh["fitness"]["speedup"]


def test_a_fresh_process_that_fails_the_gate_or_cannot_time_makes_it_unstable():
    from workers.gates.fitness import reconcile

    first = _gate(1.0, 1.0)
    out = reconcile(first, _gate(1.0, 2.2), C.FRESH_PROCESS_FLOOR)  # case b regresses there
    assert out["status"] == C.FAILED and out["rule"] == C.RULE_UNSTABLE
    assert "regresses" in out["reason"] and out["fitness"]["recheck"]["agrees"] is False
    none = reconcile(first, None, C.FRESH_PROCESS_FLOOR, "the child crashed")
    assert none["rule"] == C.RULE_UNSTABLE and "the child crashed" in none["reason"]


def test_an_acceptance_below_the_campaigns_best_is_not_re_measured_and_says_so(monkeypatch):
    """Throughput (issue 11): a fresh process per acceptance cost 12-20 s each on the H200,
    while most acceptances of a long campaign cannot become its best. Those keep their
    one-process verdict, marked; one that could become the best is still re-measured."""
    import types

    from workers import evaluate as E
    from workers.search.evaluation_requests import evaluation_request
    from workers.search.state import campaign_new

    rechecked = []
    ev = E.Evaluator()
    monkeypatch.setattr(
        ev, "_recheck", lambda child, request, workload, fit, deadline: rechecked.append(1) or fit
    )

    def run(best):
        request = E.EvaluationRequest(
            problem_source="", candidate_source="", platform="cuda", baseline="eager",
            recheck_above=best,
        )  # fmt: skip
        state = {"cases": [types.SimpleNamespace(name="a", weight=1.0, kind=C.CASE_WORKLOAD)],
                 "flags": []}  # fmt: skip
        timed = {"cases": [_case("a", 1.0, 1.5)]}
        r = E._Run(None, request, None, state, 0.0, timed=timed)
        return ev._fitness(r)[0]

    below = run(best=1.7)
    assert below.status == C.PASSED and not rechecked
    assert "not re-measured in a fresh process" in below.reason
    assert "does not clear the campaign's best so far (1.700x)" in below.reason
    # Faster than the best, but within its noise: it could not replace the best either (the
    # H200's long softmax campaign re-measured half its acceptances for nothing).
    within = run(best=1.49)
    assert within.status == C.PASSED and not rechecked
    fit = within.evidence["fitness"]
    assert fit["speedup"] > 1.49 > fit["ci95"][0]
    assert "cannot become the best" in within.reason
    above = run(best=1.2)
    assert above.status == C.PASSED and rechecked == [1]
    # The campaign asks with its best so far once it has one.
    state = campaign_new(problem_source="x", platform="cuda")
    assert "recheck_above" not in evaluation_request(state, "y")
    state["best_history"].append({"node_id": "n3", "speedup": 1.42})
    assert evaluation_request(state, "y")["recheck_above"] == 1.42
