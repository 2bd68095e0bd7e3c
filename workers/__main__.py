"""Command line of the compute core.

    python -m workers evaluate --problem P.py --candidate C.py [--workload W.json]
        [--platform interpret|cuda] [--incumbent I.py] [--baseline eager|compile|...]
        [--baseline-times B.json] [--trials N] [--seed S] [--time-limit S] [--json]
    python -m workers baseline --problem P.py [--workload W.json] [--incumbent I.py]
        [--platform cuda] [--max-autotune] [--json]
    python -m workers search ...   (the search engine's command, see workers/search/cli.py)

Exit status 0 whenever an evaluation completed (accepted or rejected); 2 with a one-line reason
for bad arguments, unreadable files or a malformed workload; 3 when the platform is unavailable.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from workers import constants as C


class UsageError(Exception):
    pass


def _read(path: str, what: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror}") from exc


def _read_json(path: str, what: str):
    text = _read(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} {path}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc


def _workload(args):
    if not args.workload:
        return None
    from workers.contract.workload import WorkloadError, import_trace, parse_workload

    path = args.workload
    if path.endswith(".csv"):
        cases = import_trace(_read(path, "trace"), fmt="csv")
        return {"cases": [c.to_dict() for c in cases]}
    data = _read_json(path, "workload")
    if isinstance(data, list):  # a JSON trace: rows of overrides + count
        return {"cases": [c.to_dict() for c in import_trace(data)]}
    try:
        parse_workload(data)
    except WorkloadError as exc:
        raise UsageError(f"workload {path}: {exc}") from exc
    return data


def _add_common(p):
    p.add_argument("--problem", required=True, help="KernelBench-format problem file")
    p.add_argument("--workload", help="workload JSON, or a trace (.csv, or JSON list of rows)")
    p.add_argument("--platform", default=C.PLATFORM_INTERPRET, choices=C.PLATFORMS)
    p.add_argument("--incumbent", help="candidate-format module served today")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-limit", type=float, default=C.DEFAULT_TIME_LIMIT_S)
    p.add_argument("--json", action="store_true", help="print the full report as JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workers", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    ev = sub.add_parser("evaluate", help="run the gates on one candidate")
    _add_common(ev)
    ev.add_argument("--candidate", required=True, help="module defining ModelNew")
    ev.add_argument("--baseline", default=C.BASELINE_COMPILE, choices=C.BASELINES)
    ev.add_argument("--baseline-times", help="JSON from `python -m workers baseline --json`")
    ev.add_argument("--trials", type=int, default=C.DEFAULT_TRIALS)
    ev.add_argument("--regression-tolerance", type=float, default=C.DEFAULT_REGRESSION_TOLERANCE)
    ev.add_argument("--aot-target", default="cuda,90,64", help="backend,arch,warp_size")
    ev.add_argument(
        "--time-every-case",
        action="store_true",
        help="time every case, also after one is lost beyond doubt (for a comparison table)",
    )
    rm = sub.add_parser(
        "remeasure", help="evaluate one candidate in N fresh processes and compare the verdicts"
    )
    _add_common(rm)
    rm.add_argument("--candidate", required=True, help="module defining ModelNew")
    rm.add_argument("--baseline", default=C.BASELINE_COMPILE, choices=C.BASELINES)
    rm.add_argument("-n", "--processes", type=int, default=5)
    bl = sub.add_parser("baseline", help="time the reference (and incumbent) per case")
    _add_common(bl)
    bl.add_argument("--max-autotune", action="store_true")
    se = sub.add_parser("search", help="run a search campaign (workers.search)")
    se.set_defaults(search_parser=se)
    try:
        from workers.search.cli import add_arguments

        add_arguments(se)
    except Exception as exc:  # noqa: BLE001 - the search module is optional here
        se.set_defaults(search_error=f"search is unavailable: {type(exc).__name__}: {exc}")
        se.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def _summary(report) -> str:
    lines = [f"verdict: {report.verdict}  ({report.reason})"]
    for g in report.gates:
        first_line = g.reason.partition("\n")[0]
        lines.append(f"  {g.name:<12} {g.status:<8} {first_line[:150]}")
    for c in report.cases:
        extra = f" median {c.timing.median_ms:.4g} ms" if c.timing else ""
        err = c.max_abs_err
        err_s = f" max_abs_err {err:.3g}" if isinstance(err, float) else ""
        skip = f" ({c.skip_reason})" if c.skip_reason else ""
        lines.append(f"  case {c.name:<24} {c.status:<8}{err_s}{extra}{skip}")
        lines.extend(_peer_misses(c.peer_checks))
    if report.fitness:
        f = report.fitness
        lines.append(
            f"  fitness: {f['speedup']:.3f}x over {f['baseline']} CI [{f['ci95'][0]:.3f}, "
            f"{f['ci95'][1]:.3f}] worst {f['worst_case']['name']} {f['worst_case']['speedup']:.3f}x"
        )
    return "\n".join(lines)


def _peer_misses(checks: dict | None) -> list[str]:
    """A line for each peer whose output misses the contract on a case."""
    lines = []
    for peer, check in (checks or {}).items():
        if not check.get("passes"):
            lines.append(f"    {peer} misses the contract here: {check.get('reason')}"[:200])
    return lines


def _run_evaluate(args) -> int:
    from workers.evaluate import Evaluator

    try:
        target = args.aot_target.split(",")
        aot = (target[0], int(target[1]), int(target[2]))
    except (IndexError, ValueError) as exc:
        raise UsageError("--aot-target: expected backend,arch,warp_size e.g. cuda,90,64") from exc
    times = _read_json(args.baseline_times, "baseline times") if args.baseline_times else None
    request = replace(
        _candidate_request(args),
        baseline_times=times,
        trials=args.trials,
        regression_tolerance=args.regression_tolerance,
        time_every_case=args.time_every_case,
        aot_target=aot,
    )
    with Evaluator() as ev:
        report = ev.evaluate(request)
    print(report.to_json(indent=1) if args.json else _summary(report))
    return 0


def _candidate_request(args):
    """The request the candidate subcommands share (evaluate adds its own knobs)."""
    from workers.evaluate import EvaluationRequest

    return EvaluationRequest(
        problem_source=_read(args.problem, "problem"),
        candidate_source=_read(args.candidate, "candidate"),
        workload=_workload(args),
        platform=args.platform,
        incumbent_source=_read(args.incumbent, "incumbent") if args.incumbent else None,
        baseline=args.baseline,
        seed=args.seed,
        time_limit_s=args.time_limit,
    )


def _run_remeasure(args) -> int:
    from workers.remeasure import remeasure

    if args.processes < 2:
        raise UsageError("--processes: at least 2 (one measurement and one to compare)")
    result = remeasure(_candidate_request(args), args.processes)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    comp = result["comparison"]
    for i, run in enumerate(result["runs"], 1):
        ci = run["ci95"] or [float("nan")] * 2
        speedup = run["speedup"] if run["speedup"] is not None else float("nan")
        print(
            f"process {i}: {run['verdict']:<8} {speedup:.3f}x [{ci[0]:.3f}, {ci[1]:.3f}]"
            f"  {run['failed'] or ''}"
        )
    for name, row in comp["cases"].items():
        times = " ".join(f"{t * 1e3:.2f}" for t in row["median_ms"])
        extra = f"; speedup spread {row['speedup_spread']:.1%}" if "speedup_spread" in row else ""
        print(f"  case {name:<28} us {times} (spread {row['time_spread']:.1%}{extra})")
    rate = comp["case_agreement"]
    print(
        f"per-case speedups inside the first interval: "
        f"{'n/a' if rate is None else f'{rate:.0%}'}; same verdict in every process: "
        f"{comp['same_verdict']}"
    )
    return 0


def _run_baseline(args) -> int:
    from workers.evaluate import EvaluationRequest, Evaluator

    request = EvaluationRequest(
        problem_source=_read(args.problem, "problem"),
        candidate_source="",
        workload=_workload(args),
        platform=args.platform,
        incumbent_source=_read(args.incumbent, "incumbent") if args.incumbent else None,
        baseline=C.BASELINE_MAX_AUTOTUNE if args.max_autotune else C.BASELINE_EAGER,
        seed=args.seed,
        time_limit_s=args.time_limit,
    )
    with Evaluator() as ev:
        report = ev.baseline(request)
    if args.json:
        print(report.to_json(indent=1))
    else:
        print(f"baseline: {report.status} ({report.reason})")
        for c in report.cases:
            parts = [f"{k} {t.median_ms:.4g} ms" for k, t in c.timings.items()]
            print(f"  case {c.name:<24} {'; '.join(parts)}")
            for line in _peer_misses(c.peer_checks):
                print(line)
    return 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from workers.contract.workload import WorkloadError
    from workers.evaluate import EvaluatorUnavailable

    try:
        if args.command == "evaluate":
            return _run_evaluate(args)
        if args.command == "baseline":
            return _run_baseline(args)
        if args.command == "remeasure":
            return _run_remeasure(args)
        if getattr(args, "search_error", None):
            print(args.search_error, file=sys.stderr)
            return 2
        from workers.search.cli import run

        return int(run(args) or 0)
    except (UsageError, WorkloadError, ValueError) as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except EvaluatorUnavailable as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
