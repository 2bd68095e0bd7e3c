"""The evaluation pipeline: ``evaluate(request) -> EvaluationReport`` and ``baseline(request)``.

The static gate runs here on the source text; compile, correctness and performance run in the
``Evaluator``'s persistent sandbox child (one per platform, torch and triton imported once,
restarted after any crash, timeout, memory blow-up or taint); fitness runs here on the timings.
The first failing gate stops the evaluation and its evidence is kept. Bad input from the caller
(a malformed workload) raises ``WorkloadError``; anything the candidate does yields a report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from workers import constants as C
from workers.boundary import BoundaryUnavailable
from workers.contract.workload import Workload, WorkloadError, parse_workload
from workers.fingerprint import harness_hash
from workers.gates.fitness import fitness as fitness_gate
from workers.gates.fitness import recheck_skipped, reconcile
from workers.gates.static import check_static
from workers.report import (
    BaselineCase,
    BaselineReport,
    Case,
    EvaluationReport,
    GateResult,
    MalformedReport,
)
from workers.sandbox import SandboxChild, SandboxFailure

__all__ = [
    "BaselineReport",
    "ChildCall",
    "EvaluationReport",
    "EvaluationRequest",
    "Evaluator",
    "EvaluatorUnavailable",
    "GateResult",
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
    # ... unless its speedup is at most this (a campaign's best so far): it cannot become the
    # best, so its verdict stands on one process and says so (fitness["recheck"]["skipped"]).
    recheck_above: float | None = None
    # Time every case, even after one is lost beyond doubt (a comparison table wants them all).
    time_every_case: bool = False


class EvaluatorUnavailable(RuntimeError):
    """The environment cannot evaluate on the requested platform (no GPU, child won't start)."""


@dataclass(frozen=True)
class ChildCall:
    """One operation in the sandbox child: its result, or the failure it became (as the gate
    that asked), and what it cost."""

    result: dict | None
    failure: GateResult | None
    wall_s: float
    device_s: float

    def gate(self, name: str, *, evidence: dict | None = None, **extra_s) -> GateResult:
        """The gate an answered operation reports (its status, reason, rule and evidence),
        checked, since the child ran the candidate: a malformed answer is a failed gate."""
        r = self.result
        wall_s = self.wall_s + extra_s.get("wall_s", 0.0)
        device_s = self.device_s + extra_s.get("device_s", 0.0)
        plain = {
            "name": name,
            "status": r.get("status"),
            "reason": r.get("reason"),
            "rule": r.get("rule"),
            "evidence": r.get("evidence") if evidence is None else evidence,
            "wall_s": wall_s,
            "device_s": device_s,
        }
        try:
            return GateResult.from_dict(plain, where=name)
        except MalformedReport as exc:
            return replace(_malformed(name, exc, self), wall_s=wall_s, device_s=device_s)


class ProblemNotLoaded(Exception):
    """The problem itself (not the candidate) failed to load in the child."""

    def __init__(self, reason: str, rule: str | None) -> None:
        super().__init__(reason)
        self.reason, self.rule = reason, rule


def _baseline_times(given, fingerprint: dict) -> tuple[dict, str | None]:
    """Normalise ``baseline_times`` to {case: {name: timing}}; refuse other fingerprints."""
    if not given:
        return {}, None
    if "cases" in given and isinstance(given["cases"], list):
        theirs = given.get("fingerprint") or {}
        for key in ("device", "torch", "triton", "harness_hash"):
            if theirs.get(key) and theirs.get(key) != fingerprint.get(key):
                return {}, f"baseline_times ignored: fingerprint {key} differs"
        try:
            return BaselineReport.from_dict(given).times(), None
        except MalformedReport as exc:
            return {}, f"baseline_times ignored: {exc}"
    return dict(given), None


@dataclass
class _Run:
    """One candidate's way through the child's gates: what each gate reads of the earlier."""

    child: SandboxChild
    request: EvaluationRequest
    workload: Workload
    state: dict  # cases (typed), fingerprint, fitness, flags, problem: what the report is made of
    deadline: float
    loaded: ChildCall | None = None  # the problem, loaded
    timed: dict | None = None  # the performance gate's result

    @property
    def common(self) -> dict:
        return {
            "candidate_source": self.request.candidate_source,
            "seed": self.request.seed,
            "aot_target": list(self.request.aot_target),
        }


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
    def _call(self, child, op, args, deadline, gate) -> ChildCall:
        """One op in the child; a crash, refusal or error becomes a failed ``gate``."""
        remaining = max(deadline - time.monotonic(), 1.0)
        args = {**args, "cpu_seconds": remaining + 5}
        start = time.perf_counter()
        reply = child.call(op, args, remaining)
        wall = time.perf_counter() - start
        # On cuda, the seconds the op held the device (its correctness runs and timed rounds,
        # workers.device_lock); compiling and warming up overlap another evaluation's rounds.
        # An op that did not answer may have held it throughout: all its wall time counts.
        device = wall if child.platform == C.PLATFORM_CUDA else 0.0
        if device and isinstance(reply, dict):
            held = reply.get("held_s")
            if isinstance(held, int | float) and held >= 0:
                device = min(float(held), wall)

        def failed(reason, rule, evidence):
            return ChildCall(None, GateResult(gate, C.FAILED, reason, rule, evidence, wall, device),
                             wall, device)  # fmt: skip

        if isinstance(reply, SandboxFailure):
            return failed(reply.reason, reply.rule, reply.evidence)
        evidence = {}
        if reply.get("log"):
            evidence = {"log": reply["log"], "log_bytes": reply.get("log_bytes")}
        if reply.get("violations"):
            evidence = {
                **evidence,
                "violations": reply["violations"],
                # what the operation itself saw (an OSError from the boundary, say)
                "error": reply.get("error") or (reply.get("result") or {}).get("reason"),
                "traceback": reply.get("traceback"),
            }
            reason = f"sandbox refused: {reply['violations'][0]}"
            return failed(reason, C.RULE_SANDBOX_VIOLATION, evidence)
        if not reply.get("ok"):
            rule = C.RULE_EXIT if reply.get("kind") == "exit" else C.RULE_RUNTIME
            evidence["traceback"] = reply.get("traceback")
            return failed(reply.get("error", "error"), rule, evidence)
        result = reply.get("result")
        if not isinstance(result, dict):
            reason = f"the report is malformed: {gate}: expected an object"
            return failed(reason, C.RULE_RUNTIME, {**evidence, "error": reason})
        if isinstance(result.setdefault("evidence", {}), dict):  # else the gate refuses it
            result["evidence"].update(evidence)
        return ChildCall(result, None, wall, device)

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
        gates: list[GateResult] = []
        static = check_static(request.candidate_source, request.problem_source)
        gates.append(
            GateResult(
                C.GATE_STATIC,
                C.PASSED if static.passed else C.FAILED,
                static.reason,
                rule=static.rule,
                evidence=static.evidence or {},
                wall_s=static.wall_s,
            )
        )
        state = {"cases": [], "fingerprint": {}, "fitness": None, "flags": [], "problem": None}
        if static.passed:
            child = self.child(request.platform)
            state["fingerprint"] = dict(child.hello.get("fingerprint") or {})
            # The limit covers the candidate's work, not the child's one-time start.
            deadline = time.monotonic() + request.time_limit_s
            run = _Run(child, request, workload, state, deadline)
            try:
                self._run_child_gates(run, gates)
            finally:
                self._end(child)
        return self._finish(request, gates, state, t0)

    def _run_child_gates(self, run: _Run, gates: list[GateResult]) -> None:
        """Load the problem, then the declared gates in order until one does not pass (a
        skipped gate ends the run too: nothing after it can be measured)."""
        try:
            self._load(run)
        except ProblemNotLoaded as exc:
            run.state["problem"] = exc
            return
        for gate in (self._compile, self._correctness, self._performance, self._fitness):
            results = gate(run)
            gates.extend(results)
            if not all(r.passed for r in results):
                return

    def _load(self, run: _Run) -> None:
        workload, request = run.workload, run.request
        load_args = {
            "problem_source": request.problem_source,
            "cases": [c.to_dict() for c in workload.cases],
            "edge_cases": workload.edge_cases,
            "seed": request.seed,
            "train": workload.mode == C.MODE_TRAIN,
        }
        call = self._call(run.child, "load", load_args, run.deadline, C.GATE_COMPILE)
        if call.failure is not None:
            raise ProblemNotLoaded(f"problem: {call.failure.reason}", call.failure.rule)
        if call.result.get("status") != C.PASSED:
            if call.result.get("workload_error"):
                raise WorkloadError(str(call.result.get("reason")))
            raise ProblemNotLoaded(str(call.result.get("reason")), call.result.get("rule"))
        run.loaded = call
        # Each case as the report carries it until a gate says more of it.
        not_run = {"status": C.SKIPPED, "skip_reason": "not run"}
        try:
            run.state["cases"] = [
                Case.from_dict({**record, **not_run}, where=f"load.cases[{i}]")
                for i, record in enumerate(_records(call.result, "load"))
            ]
        except MalformedReport as exc:
            raise ProblemNotLoaded(str(exc), C.RULE_RUNTIME) from exc

    def _compile(self, run: _Run) -> list[GateResult]:
        # Loading the problem is counted with the compile gate's time, as it always was.
        call = self._call(run.child, "compile", run.common, run.deadline, C.GATE_COMPILE)
        if call.failure is not None:
            return [replace(call.failure, wall_s=call.failure.wall_s + run.loaded.wall_s)]
        extra = {"wall_s": run.loaded.wall_s}
        if call.result.get("status") == C.PASSED:
            extra["device_s"] = run.loaded.device_s
        return [call.gate(C.GATE_COMPILE, **extra)]

    def _correctness(self, run: _Run) -> list[GateResult]:
        workload = run.workload
        corr_args = {
            **run.common,
            "trials": run.request.trials,
            "tolerance": workload.tolerance,
            "deterministic": workload.deterministic,
        }
        call = self._call(run.child, "correctness", corr_args, run.deadline, C.GATE_CORRECTNESS)
        if call.failure is not None:
            return [call.failure]
        try:
            run.state["cases"] = _updated(run.state["cases"], call.result, C.GATE_CORRECTNESS)
        except MalformedReport as exc:
            return [_malformed(C.GATE_CORRECTNESS, exc, call)]
        return [call.gate(C.GATE_CORRECTNESS)]

    def _performance(self, run: _Run) -> list[GateResult]:
        request, workload = run.request, run.workload
        if request.platform != C.PLATFORM_CUDA:
            return [
                GateResult(
                    C.GATE_PERFORMANCE,
                    C.SKIPPED,
                    f"skipped: {C.RULE_NO_DEVICE}",
                    evidence={"platform": request.platform},
                ),
                GateResult(C.GATE_FITNESS, C.SKIPPED, "skipped: no performance measurement"),
            ]
        times, note = _baseline_times(request.baseline_times, run.state["fingerprint"])
        perf_args = {
            **run.common,
            "serving": workload.serving,
            "baseline": request.baseline,
            "baseline_times": times,
            "incumbent_source": request.incumbent_source,
            # A case lost beyond doubt ends the timing: the fitness gate would reject it.
            "stop_below": None if request.time_every_case else 1.0 - request.regression_tolerance,
        }
        call = self._call(run.child, "performance", perf_args, run.deadline, C.GATE_PERFORMANCE)
        if call.failure is not None:
            return [call.failure]
        run.timed = call.result
        try:
            run.state["cases"] = _updated(
                run.state["cases"], call.result, C.GATE_PERFORMANCE, pick=_timed
            )
        except MalformedReport as exc:
            return [_malformed(C.GATE_PERFORMANCE, exc, call)]
        evidence = dict(call.result.get("evidence") or {})
        if note:
            evidence["note"] = note
        return [call.gate(C.GATE_PERFORMANCE, evidence=evidence)]

    def _fitness(self, run: _Run) -> list[GateResult]:
        request, state = run.request, run.state
        weights = {c.name: c.weight for c in state["cases"] if c.kind == C.CASE_WORKLOAD}
        fit = fitness_gate(
            run.timed["cases"],
            weights,
            request.baseline,
            request.regression_tolerance,
            request.seed,
        )
        if fit["status"] == C.PASSED and request.recheck:
            # A new best needs its interval's lower bound above the best's speedup
            # (recording._update_best), and a fresh process can only lower that bound.
            above = request.recheck_above
            if above is not None and fit["fitness"]["ci95"][0] <= above:
                fit = recheck_skipped(fit, above)
            else:
                fit = self._recheck(run.child, request, run.workload, fit, run.deadline)
        state["fitness"] = fit["fitness"]
        if fit["fitness"] and fit["fitness"]["review"]:
            state["flags"].append(
                f"speedup over {C.REVIEW_SPEEDUP:.0f}x: review "
                f"{', '.join(fit['fitness']['review'])}"
            )
        return [
            GateResult(
                C.GATE_FITNESS,
                fit["status"],
                fit["reason"],
                rule=fit["rule"],
                evidence={"fitness": fit["fitness"]},
                wall_s=fit["wall_s"],
                device_s=fit.get("device_s", 0.0),
            )
        ]

    def _recheck(self, child, request, workload: Workload, fit: dict, deadline) -> dict:
        """Re-measure an acceptance in a fresh child process; ``fitness.reconcile`` says what
        stands (the verdict, when the fresh process passes the gate on its own; the lower of the
        two measurements). The first child is replaced, so the next evaluation starts fresh."""
        start = time.perf_counter()
        self._end(child)
        child.kill()
        fresh = self.child(request.platform)
        args = {
            "problem_source": request.problem_source,
            "cases": [c.to_dict() for c in workload.cases],
            "edge_cases": False,
            "seed": request.seed,
            "train": workload.mode == C.MODE_TRAIN,
        }
        common = {"candidate_source": request.candidate_source, "seed": request.seed + 1}
        second, calls = None, []
        call = self._call(fresh, "load", args, deadline, C.GATE_FITNESS)
        calls.append(call)
        failure = call.failure
        if failure is None:
            call = self._call(
                fresh, "compile", {**common, "aot_target": None}, deadline, C.GATE_FITNESS
            )
            calls.append(call)
            failure = call.failure
        if failure is None and call.result.get("status") == C.PASSED:
            perf_args = {
                **common,
                "serving": workload.serving,
                "baseline": request.baseline,
                "incumbent_source": request.incumbent_source,
            }
            call = self._call(fresh, "performance", perf_args, deadline, C.GATE_FITNESS)
            calls.append(call)
            failure = call.failure
            if failure is None and call.result.get("status") == C.PASSED:
                weights = {c.name: c.weight for c in workload.cases}
                second = fitness_gate(
                    call.result["cases"],
                    weights,
                    request.baseline,
                    request.regression_tolerance,
                    request.seed,
                )
        why = (failure.reason if failure else "it could not be timed again") if not second else ""
        out = reconcile(fit, second, C.FRESH_PROCESS_FLOOR, why)
        # The fresh process is the fitness gate's cost: its start and compile on the wall, its
        # timed rounds on the device as well.
        out["wall_s"] = out.get("wall_s", 0.0) + time.perf_counter() - start
        out["device_s"] = sum(c.device_s for c in calls)
        return out

    def _finish(self, request, gates: list[GateResult], state, t0) -> EvaluationReport:
        problem: ProblemNotLoaded | None = state["problem"]
        failed = next((g for g in gates if g.status == C.FAILED), None)
        ran = {g.name for g in gates}
        for name in C.GATES:
            if name not in ran:
                if problem is not None:
                    why = "not run: the problem did not load"
                elif failed:
                    why = f"not run: {failed.name} gate failed"
                else:
                    why = "not run"
                gates.append(GateResult(name, C.SKIPPED, why))
        order = {name: i for i, name in enumerate(C.GATES)}
        gates.sort(key=lambda g: order[g.name])
        if problem is not None:
            # Not the candidate's failure: no gate failed, and a search does not repair it.
            rule = f"[{problem.rule}] " if problem.rule else ""
            reason = f"the problem did not load: {rule}{problem.reason}"
        elif failed:
            rule = f"[{failed.rule}] " if failed.rule else ""
            reason = f"{failed.name}: {rule}{failed.reason}"
        else:
            perf = next(g for g in gates if g.name == C.GATE_FITNESS)
            reason = f"all gates passed; {perf.reason}"
        return EvaluationReport(
            verdict=C.REJECTED if failed or problem is not None else C.ACCEPTED,
            failed_gate=failed.name if failed else None,
            reason=reason.splitlines()[0] if reason else "",
            gates=list(gates),
            cases=state["cases"],
            fingerprint=state["fingerprint"],
            fitness=state["fitness"],
            wall_s=time.perf_counter() - t0,
            device_s=sum(g.device_s for g in gates),
            harness_hash=harness_hash(),
            platform=request.platform,
            flags=state["flags"],
        )

    # baseline ------------------------------------------------------------------------------
    def baseline(self, request: EvaluationRequest) -> BaselineReport:
        t0 = time.perf_counter()
        workload = parse_workload(request.workload)
        child = self.child(request.platform)
        deadline = time.monotonic() + baseline_time_limit(request)
        fingerprint = dict(child.hello.get("fingerprint") or {})

        def report(status, reason, cases=(), evidence=None, device_s=0.0):
            evidence = evidence if isinstance(evidence, dict) else {}
            try:
                if status not in (C.PASSED, C.FAILED, C.SKIPPED) or not isinstance(reason, str):
                    raise MalformedReport("the report is malformed: baseline: no status or reason")
                typed = _baseline_cases(cases)
            except MalformedReport as exc:  # the child's answer, read back: a failure, not a raise
                status, reason, typed = C.FAILED, str(exc), []
            return BaselineReport(
                status=status,
                reason=reason.partition("\n")[0],
                platform=request.platform,
                cases=typed,
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
                "train": workload.mode == C.MODE_TRAIN,
            }
            loaded = self._call(child, "load", load_args, deadline, "baseline")
            if loaded.failure is not None:
                return report(C.FAILED, f"problem: {loaded.failure.reason}")
            if loaded.result.get("status") != C.PASSED:
                if loaded.result.get("workload_error"):
                    raise WorkloadError(str(loaded.result.get("reason")))
                return report(C.FAILED, str(loaded.result.get("reason")))
            if request.platform != C.PLATFORM_CUDA:
                try:
                    records = _records(loaded.result, "load")
                except MalformedReport as exc:
                    return report(C.FAILED, f"problem: {exc}")
                # Each workload case named, nothing timed (the interpreter has no device time).
                keep = ("name", "weight", "overrides", "dtype", "scaled_for_interpreter")
                cases = [{k: r.get(k) for k in keep} for r in records]
                return report(C.SKIPPED, f"skipped: {C.RULE_NO_DEVICE}", cases)
            args = {
                "seed": request.seed,
                "serving": workload.serving,
                "incumbent_source": request.incumbent_source,
                "max_autotune": request.baseline in (C.BASELINE_MAX_AUTOTUNE, C.BASELINE_BEST),
                "baseline": request.baseline,
            }
            timed = self._call(child, "baseline", args, deadline, "baseline")
            if timed.failure is not None:
                return report(C.FAILED, timed.failure.reason, device_s=timed.failure.device_s)
            return report(
                timed.result.get("status"),
                timed.result.get("reason"),
                timed.result.get("cases"),
                timed.result.get("evidence"),
                timed.device_s + loaded.device_s,
            )
        finally:
            self._end(child)


def _records(reply: dict, gate: str) -> list[dict]:
    records = reply.get("cases")
    if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
        raise MalformedReport(f"the report is malformed: {gate}.cases: not a list of objects")
    return records


def _baseline_cases(records) -> list[BaselineCase]:
    """The baseline's cases as the child timed them, read back as :class:`BaselineCase` and
    checked: :class:`MalformedReport` names what is wrong."""
    if not isinstance(records, list | tuple):
        raise MalformedReport("the report is malformed: baseline.cases: not a list of objects")
    return [BaselineCase.from_dict(r, where=f"baseline.cases[{i}]") for i, r in enumerate(records)]


def _updated(cases: list[Case], reply: dict, gate: str, pick=None) -> list[Case]:
    """Each case with what a gate's reply says of it (its record of the same name, or the
    fields ``pick`` takes of it), read back as a :class:`Case`. The reply comes from a child
    that ran the candidate, so it is checked: :class:`MalformedReport` names what is wrong."""
    by_name = {r.get("name"): (i, r) for i, r in enumerate(_records(reply, gate))}
    out = []
    for case in cases:
        if case.name not in by_name:
            out.append(case)
            continue
        i, record = by_name[case.name]
        where = f"{gate}.cases[{i}]"
        fields = pick(record, where) if pick else record
        out.append(Case.from_dict({**case.to_dict(), **fields}, where=where))
    return out


def _timed(perf: dict, where: str) -> dict:
    """What the performance gate's record of a case adds to it (its own wall time is not)."""
    if not isinstance(perf.get("timing"), dict):
        raise MalformedReport(f"the report is malformed: {where}.timing: missing")
    return {
        "timing": perf["timing"],
        "baselines": perf.get("baselines"),
        "paired": perf.get("paired") or {},
        "floor_ms": perf.get("floor_ms"),
        "bytes": perf.get("bytes"),
        "flops": perf.get("flops"),
        "peer_checks": perf.get("peer_checks") or None,
    }


def _malformed(gate: str, exc: MalformedReport, call: ChildCall) -> GateResult:
    """A gate whose reply from the child could not be read: failed, not an error here."""
    return GateResult(
        gate, C.FAILED, str(exc), C.RULE_RUNTIME, {"error": str(exc)}, call.wall_s, call.device_s
    )


def evaluate(request: EvaluationRequest) -> EvaluationReport:
    """Evaluate one candidate in a fresh sandbox child (use ``Evaluator`` for many)."""
    with Evaluator() as ev:
        return ev.evaluate(request)


def baseline_time_limit(request: EvaluationRequest) -> float:
    """The baseline's wall limit: a candidate's, and where max-autotune is among the peers,
    four times that. The baseline is a campaign's one-off and compiles every peer for every
    case: max-autotune benchmarks its templates for each (GQA attention's four cases took over
    120 s on the H200, and its baseline timed out while every candidate, timed beside the
    cached peers, did not)."""
    limit = max(request.time_limit_s, 60.0)
    if request.baseline in (C.BASELINE_BEST, C.BASELINE_MAX_AUTOTUNE):
        limit *= 4
    return limit


def baseline(request: EvaluationRequest) -> BaselineReport:
    """Time the reference (and incumbent) per case in a fresh sandbox child."""
    with Evaluator() as ev:
        return ev.baseline(request)
