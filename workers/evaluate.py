"""The evaluation pipeline: ``evaluate(request) -> EvaluationReport`` and ``baseline(request)``.

The static gate runs here on the source text; compile, correctness and performance run in the
``Evaluator``'s persistent sandbox child (one per platform, torch and triton imported once,
restarted after any crash, timeout, memory blow-up or taint); fitness runs here on the timings.
The first failing gate stops the evaluation and its evidence is kept. Bad input from the caller
(a malformed workload) raises ``WorkloadError``; anything the candidate does yields a report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from workers import constants as C
from workers.boundary import BoundaryUnavailable
from workers.contract.workload import Workload, WorkloadError, parse_workload
from workers.fingerprint import harness_hash
from workers.gates.fitness import fitness as fitness_gate
from workers.gates.static import check_static
from workers.gates.timing import widened
from workers.report import BaselineReport, EvaluationReport
from workers.sandbox import SandboxChild, SandboxFailure

__all__ = [
    "BaselineReport",
    "EvaluationReport",
    "EvaluationRequest",
    "Evaluator",
    "EvaluatorUnavailable",
    "WorkloadError",
    "baseline",
    "evaluate",
]


@dataclass(frozen=True)
class EvaluationRequest:
    problem_source: str  # KernelBench-format module text (Model, get_inputs, get_init_inputs)
    candidate_source: str  # module text defining ModelNew
    workload: dict | None = None  # workload JSON; None = one case, the file as written
    platform: str = C.PLATFORM_INTERPRET  # "interpret" | "cuda"
    incumbent_source: str | None = None  # candidate-format module served today (optional)
    baseline: str = C.BASELINE_EAGER  # "eager" | "compile" | "max-autotune" | "incumbent"
    baseline_times: dict | None = None  # per-case baseline timings from baseline()
    trials: int = C.DEFAULT_TRIALS
    seed: int = 0
    regression_tolerance: float = C.DEFAULT_REGRESSION_TOLERANCE
    aot_target: tuple = C.DEFAULT_AOT_TARGET
    time_limit_s: float = C.DEFAULT_TIME_LIMIT_S
    # On cuda, an acceptance is re-measured in a fresh process and must agree ("unstable" if not).
    recheck: bool = True


class EvaluatorUnavailable(RuntimeError):
    """The environment cannot evaluate on the requested platform (no GPU, child won't start)."""


def _gate(name, status, reason, *, rule=None, evidence=None, wall_s=0.0, device_s=0.0) -> dict:
    return {
        "name": name,
        "status": status,
        "reason": reason,
        "rule": rule,
        "evidence": evidence or {},
        "wall_s": wall_s,
        "device_s": device_s,
    }


def _baseline_times(given, fingerprint: dict) -> tuple[dict, str | None]:
    """Normalise ``baseline_times`` to {case: {name: timing}}; refuse other fingerprints."""
    if not given:
        return {}, None
    if "cases" in given and isinstance(given["cases"], list):
        theirs = given.get("fingerprint") or {}
        for key in ("device", "torch", "triton", "harness_hash"):
            if theirs.get(key) and theirs.get(key) != fingerprint.get(key):
                return {}, f"baseline_times ignored: fingerprint {key} differs"
        return BaselineReport.from_dict(given).times(), None
    return dict(given), None


class Evaluator:
    """Holds one persistent sandbox child per platform. Use as a context manager."""

    def __init__(self, *, memory_limit: int = C.CHILD_MEMORY_LIMIT_BYTES, root: str | None = None):
        self.memory_limit = memory_limit
        self.root = root
        self._children: dict[str, SandboxChild] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        for child in self._children.values():
            child.cleanup()
        self._children.clear()

    def child(self, platform: str) -> SandboxChild:
        if platform not in C.PLATFORMS:
            raise ValueError(f"platform: must be one of {', '.join(C.PLATFORMS)}")
        child = self._children.get(platform)
        if child is None:
            try:
                child = SandboxChild(platform, memory_limit=self.memory_limit, root=self.root)
            except BoundaryUnavailable as exc:
                raise EvaluatorUnavailable(str(exc)) from exc
            self._children[platform] = child
        if not child.alive:
            hello = child.start()
            if isinstance(hello, SandboxFailure):
                raise EvaluatorUnavailable(f"sandbox child did not start: {hello.reason}")
            if not hello.get("ok"):
                raise EvaluatorUnavailable(hello.get("error", "sandbox child refused to start"))
        return child

    # plumbing ------------------------------------------------------------------------------
    def _call(self, child, op, args, deadline, gate):
        """(result, failure gate dict, reply) for one op; exactly one of the first two is set."""
        remaining = max(deadline - time.monotonic(), 1.0)
        args = {**args, "cpu_seconds": remaining + 5}
        start = time.perf_counter()
        reply = child.call(op, args, remaining)
        wall = time.perf_counter() - start
        device = wall if child.platform == C.PLATFORM_CUDA else 0.0
        if isinstance(reply, SandboxFailure):
            return (
                None,
                _gate(
                    gate,
                    C.FAILED,
                    reply.reason,
                    rule=reply.rule,
                    evidence=reply.evidence,
                    wall_s=wall,
                    device_s=device,
                ),
                None,
            )
        evidence = {}
        if reply.get("log"):
            evidence = {"log": reply["log"], "log_bytes": reply.get("log_bytes")}
        if reply.get("violations"):
            reason = f"sandbox refused: {reply['violations'][0]}"
            return (
                None,
                _gate(
                    gate,
                    C.FAILED,
                    reason,
                    rule=C.RULE_SANDBOX_VIOLATION,
                    evidence={
                        **evidence,
                        "violations": reply["violations"],
                        # what the operation itself saw (an OSError from the boundary, say)
                        "error": reply.get("error") or (reply.get("result") or {}).get("reason"),
                        "traceback": reply.get("traceback"),
                    },
                    wall_s=wall,
                    device_s=device,
                ),
                reply,
            )
        if not reply.get("ok"):
            rule = C.RULE_EXIT if reply.get("kind") == "exit" else C.RULE_RUNTIME
            evidence["traceback"] = reply.get("traceback")
            return (
                None,
                _gate(
                    gate,
                    C.FAILED,
                    reply.get("error", "error"),
                    rule=rule,
                    evidence=evidence,
                    wall_s=wall,
                    device_s=device,
                ),
                reply,
            )
        result = reply["result"]
        result.setdefault("evidence", {})
        result["evidence"].update(evidence)
        result["_wall_s"], result["_device_s"] = wall, device
        return result, None, reply

    def _end(self, child):
        if child.alive:
            reply = child.call("end", {}, 30.0)
            if isinstance(reply, SandboxFailure) or not reply.get("ok"):
                child.kill()

    # evaluate ------------------------------------------------------------------------------
    def evaluate(self, request: EvaluationRequest) -> EvaluationReport:
        t0 = time.perf_counter()
        workload = parse_workload(request.workload)
        if request.baseline not in C.BASELINES:
            raise ValueError(f"baseline: must be one of {', '.join(C.BASELINES)}")
        if request.baseline == C.BASELINE_INCUMBENT and not request.incumbent_source:
            raise ValueError("baseline: 'incumbent' needs incumbent_source")
        gates: list[dict] = []
        static = check_static(request.candidate_source, request.problem_source)
        gates.append(
            _gate(
                C.GATE_STATIC,
                C.PASSED if static.passed else C.FAILED,
                static.reason,
                rule=static.rule,
                evidence=static.evidence,
                wall_s=static.wall_s,
            )
        )
        state = {"cases": [], "fingerprint": {}, "fitness": None, "flags": []}
        if static.passed:
            child = self.child(request.platform)
            state["fingerprint"] = dict(child.hello.get("fingerprint") or {})
            # The limit covers the candidate's work, not the child's one-time start.
            deadline = time.monotonic() + request.time_limit_s
            try:
                self._run_child_gates(child, request, workload, gates, state, deadline)
            finally:
                self._end(child)
        return self._finish(request, gates, state, t0)

    def _run_child_gates(self, child, request, workload: Workload, gates, state, deadline):
        load_args = {
            "problem_source": request.problem_source,
            "cases": [c.to_dict() for c in workload.cases],
            "edge_cases": workload.edge_cases,
            "seed": request.seed,
        }
        loaded, failure, _ = self._call(child, "load", load_args, deadline, C.GATE_COMPILE)
        if failure is not None:
            failure["reason"] = f"problem: {failure['reason']}"
            gates.append(failure)
            return
        if loaded["status"] != C.PASSED:
            if loaded.get("workload_error"):
                raise WorkloadError(loaded["reason"])
            gates.append(
                _gate(
                    C.GATE_COMPILE,
                    C.FAILED,
                    loaded["reason"],
                    rule=loaded["rule"],
                    wall_s=loaded["_wall_s"],
                    device_s=loaded["_device_s"],
                )
            )
            return
        state["cases"] = [
            {**case, "status": C.SKIPPED, "skip_reason": "not run"} for case in loaded["cases"]
        ]
        common = {
            "candidate_source": request.candidate_source,
            "seed": request.seed,
            "aot_target": list(request.aot_target),
        }
        compiled, failure, _ = self._call(child, "compile", common, deadline, C.GATE_COMPILE)
        if failure is None and compiled["status"] != C.PASSED:
            failure = _gate(
                C.GATE_COMPILE,
                C.FAILED,
                compiled["reason"],
                rule=compiled["rule"],
                evidence=compiled.get("evidence"),
                wall_s=compiled["_wall_s"],
                device_s=compiled["_device_s"],
            )
        if failure is not None:
            failure["wall_s"] += loaded["_wall_s"]
            gates.append(failure)
            return
        gates.append(
            _gate(
                C.GATE_COMPILE,
                C.PASSED,
                compiled["reason"],
                evidence=compiled["evidence"],
                wall_s=compiled["_wall_s"] + loaded["_wall_s"],
                device_s=compiled["_device_s"] + loaded["_device_s"],
            )
        )
        corr_args = {
            **common,
            "trials": request.trials,
            "tolerance": workload.tolerance,
            "deterministic": workload.deterministic,
        }
        checked, failure, _ = self._call(
            child, "correctness", corr_args, deadline, C.GATE_CORRECTNESS
        )
        if failure is not None:
            gates.append(failure)
            return
        by_name = {c["name"]: c for c in checked["cases"]}
        state["cases"] = [{**case, **by_name.get(case["name"], {})} for case in state["cases"]]
        gates.append(
            _gate(
                C.GATE_CORRECTNESS,
                checked["status"],
                checked["reason"],
                rule=checked.get("rule"),
                evidence=checked.get("evidence"),
                wall_s=checked["_wall_s"],
                device_s=checked["_device_s"],
            )
        )
        if checked["status"] != C.PASSED:
            return
        if request.platform != C.PLATFORM_CUDA:
            gates.append(
                _gate(
                    C.GATE_PERFORMANCE,
                    C.SKIPPED,
                    f"skipped: {C.RULE_NO_DEVICE}",
                    evidence={"platform": request.platform},
                )
            )
            gates.append(_gate(C.GATE_FITNESS, C.SKIPPED, "skipped: no performance measurement"))
            return
        times, note = _baseline_times(request.baseline_times, state["fingerprint"])
        perf_args = {
            **common,
            "serving": workload.serving,
            "baseline": request.baseline,
            "baseline_times": times,
            "incumbent_source": request.incumbent_source,
        }
        timed, failure, _ = self._call(
            child, "performance", perf_args, deadline, C.GATE_PERFORMANCE
        )
        if failure is not None:
            gates.append(failure)
            return
        perf_by_name = {c["name"]: c for c in timed["cases"]}
        for case in state["cases"]:
            perf = perf_by_name.get(case["name"])
            if perf:
                case["timing"] = perf["timing"]
                case["baselines"] = perf["baselines"]
                case["paired"] = perf.get("paired") or {}
                case["floor_ms"] = perf["floor_ms"]
                case["bytes"] = perf["bytes"]
                case["flops"] = perf["flops"]
        evidence = dict(timed.get("evidence") or {})
        if note:
            evidence["note"] = note
        gates.append(
            _gate(
                C.GATE_PERFORMANCE,
                timed["status"],
                timed["reason"],
                rule=timed.get("rule"),
                evidence=evidence,
                wall_s=timed["_wall_s"],
                device_s=timed["_device_s"],
            )
        )
        if timed["status"] != C.PASSED:
            return
        weights = {c["name"]: c["weight"] for c in state["cases"] if c["kind"] == C.CASE_WORKLOAD}
        fit = fitness_gate(
            timed["cases"], weights, request.baseline, request.regression_tolerance, request.seed
        )
        if fit["status"] == C.PASSED and request.recheck:
            fit = self._recheck(child, request, workload, fit, deadline)
        state["fitness"] = fit["fitness"]
        if fit["fitness"] and fit["fitness"]["review"]:
            state["flags"].append(
                f"speedup over {C.REVIEW_SPEEDUP:.0f}x: review "
                f"{', '.join(fit['fitness']['review'])}"
            )
        gates.append(
            _gate(
                C.GATE_FITNESS,
                fit["status"],
                fit["reason"],
                rule=fit["rule"],
                evidence={"fitness": fit["fitness"]},
                wall_s=fit["wall_s"],
            )
        )

    def _recheck(self, child, request, workload: Workload, fit: dict, deadline) -> dict:
        """Re-measure an acceptance in a fresh child process. The verdict stands only if the
        fresh weighted speedup lands inside the first interval (widened to the between-process
        floor) and passes on its own; otherwise the fitness gate fails as ``unstable`` with both
        measurements. The first child is replaced, so the next evaluation starts fresh too."""
        self._end(child)
        child.kill()
        fresh = self.child(request.platform)
        args = {
            "problem_source": request.problem_source,
            "cases": [c.to_dict() for c in workload.cases],
            "edge_cases": False,
            "seed": request.seed,
        }
        common = {"candidate_source": request.candidate_source, "seed": request.seed + 1}
        second, failure = None, None
        loaded, failure, _ = self._call(fresh, "load", args, deadline, C.GATE_FITNESS)
        if failure is None:
            compiled, failure, _ = self._call(
                fresh, "compile", {**common, "aot_target": None}, deadline, C.GATE_FITNESS
            )
        if failure is None and compiled["status"] == C.PASSED:
            perf_args = {
                **common,
                "serving": workload.serving,
                "baseline": request.baseline,
                "incumbent_source": request.incumbent_source,
            }
            timed, failure, _ = self._call(
                fresh, "performance", perf_args, deadline, C.GATE_FITNESS
            )
            if failure is None and timed["status"] == C.PASSED:
                weights = {c.name: c.weight for c in workload.cases}
                second = fitness_gate(
                    timed["cases"],
                    weights,
                    request.baseline,
                    request.regression_tolerance,
                    request.seed,
                )
        first = fit["fitness"]
        interval = widened(first["ci95"], C.FRESH_PROCESS_FLOOR)
        recheck = {"interval": interval, "fresh": second["fitness"] if second else None}
        first["recheck"] = recheck
        if second is None:
            why = failure["reason"] if failure else "it could not be timed again"
            recheck["error"] = why
            reason = f"{fit['reason']}; not re-measured in a fresh process: {why}"
            return {**fit, "status": C.FAILED, "rule": C.RULE_UNSTABLE, "reason": reason}
        again = second["fitness"]["speedup"]
        agrees = interval[0] <= again <= interval[1] and second["status"] == C.PASSED
        recheck["agrees"] = agrees
        if agrees:
            reason = f"{fit['reason']}; a fresh process agrees ({again:.3f}x)"
            return {**fit, "reason": reason}
        reason = (
            f"unstable: {first['speedup']:.3f}x (interval [{interval[0]:.3f}, {interval[1]:.3f}])"
            f" in the first process, {again:.3f}x in a fresh one ({second['reason']})"
        )
        return {**fit, "status": C.FAILED, "rule": C.RULE_UNSTABLE, "reason": reason}

    def _finish(self, request, gates, state, t0) -> EvaluationReport:
        failed = next((g for g in gates if g["status"] == C.FAILED), None)
        ran = {g["name"] for g in gates}
        for name in C.GATES:
            if name not in ran:
                why = f"not run: {failed['name']} gate failed" if failed else "not run"
                gates.append(_gate(name, C.SKIPPED, why))
        order = {name: i for i, name in enumerate(C.GATES)}
        gates.sort(key=lambda g: order[g["name"]])
        if failed:
            rule = f"[{failed['rule']}] " if failed.get("rule") else ""
            reason = f"{failed['name']}: {rule}{failed['reason']}"
        else:
            perf = next(g for g in gates if g["name"] == C.GATE_FITNESS)
            reason = f"all gates passed; {perf['reason']}"
        cases = [_case_record(c) for c in state["cases"]]
        return EvaluationReport(
            verdict=C.REJECTED if failed else C.ACCEPTED,
            failed_gate=failed["name"] if failed else None,
            reason=reason.splitlines()[0] if reason else "",
            gates=gates,
            cases=cases,
            fingerprint=state["fingerprint"],
            fitness=state["fitness"],
            wall_s=time.perf_counter() - t0,
            device_s=sum(g["device_s"] for g in gates),
            harness_hash=harness_hash(),
            platform=request.platform,
            flags=state["flags"],
        )

    # baseline ------------------------------------------------------------------------------
    def baseline(self, request: EvaluationRequest) -> BaselineReport:
        t0 = time.perf_counter()
        workload = parse_workload(request.workload)
        child = self.child(request.platform)
        deadline = time.monotonic() + max(request.time_limit_s, 60.0)
        fingerprint = dict(child.hello.get("fingerprint") or {})

        def report(status, reason, cases=(), evidence=None, device_s=0.0):
            evidence = evidence or {}
            return BaselineReport(
                status=status,
                reason=reason.splitlines()[0],
                platform=request.platform,
                cases=list(cases),
                fingerprint=fingerprint,
                ceilings=evidence.get("ceilings"),
                method=evidence.get("method"),
                wall_s=time.perf_counter() - t0,
                device_s=device_s,
                harness_hash=harness_hash(),
            )

        try:
            load_args = {
                "problem_source": request.problem_source,
                "cases": [c.to_dict() for c in workload.cases],
                "edge_cases": False,
                "seed": request.seed,
            }
            loaded, failure, _ = self._call(child, "load", load_args, deadline, "baseline")
            if failure is not None:
                return report(C.FAILED, f"problem: {failure['reason']}")
            if loaded["status"] != C.PASSED:
                if loaded.get("workload_error"):
                    raise WorkloadError(loaded["reason"])
                return report(C.FAILED, loaded["reason"])
            if request.platform != C.PLATFORM_CUDA:
                cases = [{**c, "timings": {}} for c in loaded["cases"]]
                return report(C.SKIPPED, f"skipped: {C.RULE_NO_DEVICE}", cases)
            args = {
                "seed": request.seed,
                "serving": workload.serving,
                "incumbent_source": request.incumbent_source,
                "max_autotune": request.baseline == C.BASELINE_MAX_AUTOTUNE,
            }
            timed, failure, _ = self._call(child, "baseline", args, deadline, "baseline")
            if failure is not None:
                return report(C.FAILED, failure["reason"], device_s=failure["device_s"])
            return report(
                timed["status"],
                timed["reason"],
                timed["cases"],
                timed.get("evidence"),
                timed["_device_s"] + loaded["_device_s"],
            )
        finally:
            self._end(child)


def _case_record(case: dict) -> dict:
    record = {
        "name": case["name"],
        "kind": case["kind"],
        "weight": case["weight"],
        "status": case.get("status", C.SKIPPED),
        "skip_reason": case.get("skip_reason"),
        "rule": case.get("rule"),
        "reason": case.get("reason"),
        "max_abs_err": case.get("max_abs_err"),
        "max_rel_err": case.get("max_rel_err"),
        "dtype": case.get("dtype"),
        "overrides": case.get("overrides", {}),
        "timing": case.get("timing"),
        "baselines": case.get("baselines", {}),
    }
    for key in (
        "scaled_for_interpreter",
        "transform",
        "derived_from",
        "floor_ms",
        "paired",
        "bytes",
        "flops",
        "trials",
        "evidence",
        "wall_s",
    ):
        if case.get(key) is not None:
            record[key] = case[key]
    return record


def evaluate(request: EvaluationRequest) -> EvaluationReport:
    """Evaluate one candidate in a fresh sandbox child (use ``Evaluator`` for many)."""
    with Evaluator() as ev:
        return ev.evaluate(request)


def baseline(request: EvaluationRequest) -> BaselineReport:
    """Time the reference (and incumbent) per case in a fresh sandbox child."""
    with Evaluator() as ev:
        return ev.baseline(request)
