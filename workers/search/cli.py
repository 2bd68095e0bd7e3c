"""``python -m workers search``: run a whole campaign standalone (no Django, one process).

This is how a GPU host runs a search: it evaluates candidates in a persistent sandbox child,
writes the campaign as JSON (``outcome``, ``funnel``, ``nodes``, ``edges``, ``best``, ...) for
``manage.py import_campaign`` (rewritten every few seconds while it runs), and shows a progress
bar on a terminal, one line per candidate elsewhere. The exit status is 0 whenever the campaign
ran, whatever its outcome; 2 for unusable arguments or inputs; 130 when it was interrupted
(Ctrl-C or SIGTERM), after writing what it had evaluated.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

from workers import constants as C


def add_arguments(parser: argparse.ArgumentParser) -> None:
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--problem", help="problem module in the KernelBench format (P.py)")
    src.add_argument("--catalog", help="a built-in catalog problem by name (e.g. softmax)")
    parser.add_argument("--workload", help="workload JSON (cases, weights, tolerance)")
    parser.add_argument(
        "--smoke", action="store_true", help="with --catalog: its tiny interpreter workload"
    )
    parser.add_argument("--platform", default="interpret", choices=["interpret", "cuda"])
    parser.add_argument(
        "--generator", default="template", help="comma-separated: template, llm (default template)"
    )
    parser.add_argument("--policy", default="best_first", choices=["best_first", "islands"])
    parser.add_argument("--budget-candidates", type=int, default=40)
    parser.add_argument("--budget-device-s", type=float, default=None)
    parser.add_argument("--budget-wall-s", type=float, default=None)
    parser.add_argument("--branches", type=int, default=3)
    parser.add_argument("--children", type=int, default=2, help="children per branch per round")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--saturation-rounds", type=int, default=3)
    parser.add_argument("--target-speedup", type=float, default=None)
    parser.add_argument(
        "--baseline",
        default="compile",
        choices=list(C.BASELINES),
        help="the peer a candidate must beat on every case (default compile; eager is timed "
        "beside it); best: per case the fastest of compile, max-autotune and the incumbent",
    )
    parser.add_argument(
        "--incumbent",
        help="incumbent candidate source (with --baseline incumbent, or one of the peers of "
        "--baseline best)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        help="candidates of a round evaluated at once, each in its own sandbox (on a GPU the "
        "device lock still takes their correctness and timing runs in turn)",
    )
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit-s", type=float, default=120.0)
    parser.add_argument("--json", dest="json_out", help="write the campaign JSON here")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument(
        "--fresh-start",
        action="store_true",
        help="with --platform cuda: measure the baseline and tune again even where a start kept "
        "for this problem, workload and host could be reused (KERNELEVOLVE_START_CACHE, else "
        "<KERNELEVOLVE_DATA_DIR>/start-cache or ~/.cache/kernelevolve/start; a day at most)",
    )
    tuning = parser.add_mutually_exclusive_group()
    tuning.add_argument(
        "--no-tune",
        dest="tune",
        action="store_false",
        help="with --platform cuda: skip the per-case tuner that runs beside the baseline (about "
        "90 s per problem before the first candidate; its table is the first seed)",
    )
    tuning.add_argument("--tune", dest="tune", action="store_true", help=argparse.SUPPRESS)
    parser.set_defaults(tune=True)


def _inputs(args) -> tuple[str, dict | None, str]:
    if args.catalog:
        from workers.catalog import catalog_get

        entry = catalog_get(args.catalog)
        workload = entry.workload(smoke=args.smoke)
        if args.workload:
            workload = json.loads(Path(args.workload).read_text())
        return entry.problem_source(), workload, entry.name
    source = Path(args.problem).read_text()
    workload = json.loads(Path(args.workload).read_text()) if args.workload else None
    return source, workload, Path(args.problem).stem


class _Progress:
    """What a running campaign shows: a bar on a terminal, one line per evaluated candidate
    otherwise (a log, a remote job), nothing with ``--no-progress``; and, with ``--json``, the
    campaign so far written to that file every few seconds, so a run that is killed (a job's
    time limit) still leaves every candidate it evaluated."""

    CHECKPOINT_EVERY_S = 5.0

    def __init__(self, total: int, mode: str, json_out: str | None = None) -> None:
        self.total = total
        self.mode = mode  # "bar", "lines" or "off"
        self.json_out = json_out
        self.start = time.time()
        self.saved_at = 0.0

    def __call__(self, state: dict, event: dict) -> None:
        if self.json_out and event.get("event") == "recorded":
            if time.time() - self.saved_at >= self.CHECKPOINT_EVERY_S:
                self.checkpoint(state)
        if self.mode == "off":
            return
        from workers.search.engine import funnel

        f = funnel(state)
        done = f["generated"] - f["pending"]
        best = state.get("best_history") or []
        best_txt = f" best {best[-1]['speedup']:.3f}x" if best and best[-1]["speedup"] else ""
        elapsed = f"{time.time() - self.start:.0f}s"
        if self.mode == "lines":
            if event.get("event") == "recorded":
                rep = event.get("report") or {}
                speed = (rep.get("fitness") or {}).get("speedup")
                sys.stderr.write(
                    f"[{done}/{self.total} {elapsed}] {event['node_id']} {rep.get('verdict')}"
                    + (f" {speed:.3f}x" if isinstance(speed, (int, float)) else "")
                    + (f" at {rep['failed_gate']}" if rep.get("failed_gate") else "")
                    + f": {' '.join(str(rep.get('reason') or '').split())[:160]}"
                    + f" (accepted {f['accepted']}{best_txt})\n"
                )
        else:
            width = 30
            filled = int(width * min(done, self.total) / max(self.total, 1))
            sys.stderr.write(
                f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total} "
                f"accepted {f['accepted']} round {state['round']}{best_txt} {elapsed}"
            )
        if event.get("event") == "finished":
            sys.stderr.write(f"\n{state['outcome']}: {state['message']}\n")
        sys.stderr.flush()

    def checkpoint(self, state: dict) -> None:
        from workers.search.engine import campaign_summary

        _write_json(self.json_out, campaign_summary(state))
        self.saved_at = time.time()


def _write_json(path: str, summary: dict) -> None:
    """Write ``summary`` to ``path`` whole or not at all (a reader never sees half a file)."""
    tmp = f"{path}.part"
    Path(tmp).write_text(json.dumps(summary, indent=2, default=str) + "\n")
    Path(tmp).replace(path)


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def run(args: argparse.Namespace) -> int:
    from workers.search.engine import campaign_new, campaign_summary, run_campaign
    from workers.search.start_cache import StartCache

    try:
        source, workload, name = _inputs(args)
    except (OSError, KeyError, json.JSONDecodeError) as exc:
        print(f"search: cannot read the inputs: {exc}", file=sys.stderr)
        return 2
    incumbent = Path(args.incumbent).read_text() if args.incumbent else None
    generators = [g.strip() for g in args.generator.split(",") if g.strip()]
    state = campaign_new(
        problem_source=source,
        workload=workload,
        platform=args.platform,
        generators=generators,
        policy=args.policy,
        max_candidates=args.budget_candidates,
        max_device_s=args.budget_device_s,
        max_wall_s=args.budget_wall_s,
        branches=args.branches,
        children_per_branch=args.children,
        seeds=args.seeds,
        saturation_rounds=args.saturation_rounds,
        target_speedup=args.target_speedup,
        baseline=args.baseline,
        incumbent_source=incumbent,
        trials=args.trials,
        seed=args.seed,
        time_limit_s=args.time_limit_s,
        problem_name=name,
        tune=args.tune,
    )
    mode = "off" if args.no_progress else "bar" if sys.stderr.isatty() else "lines"
    progress = _Progress(args.budget_candidates, mode, args.json_out)
    # A job's time limit (SIGTERM) stops the campaign as Ctrl-C does: what was evaluated is
    # written out, and the exit status says it did not finish.
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    interrupted = False
    try:
        starts = None if args.fresh_start else StartCache()
        run_campaign(state, progress=progress, jobs=max(1, args.jobs), starts=starts)
    except ValueError as exc:  # e.g. the llm generator without its URL
        print(f"search: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        interrupted = True
    finally:
        signal.signal(signal.SIGTERM, previous)
    summary = campaign_summary(state)
    if interrupted:
        # Out of time as far as the campaign knows (a job's limit): ``import_campaign`` takes it.
        summary["outcome"], summary["stop_reason"] = "budget_exhausted", "interrupted"
        summary["message"] = (
            f"interrupted after {summary['candidates_evaluated']} evaluated candidate(s), "
            "before the campaign finished"
        )
    if args.json_out:
        _write_json(args.json_out, summary)
    f = summary["funnel"]
    best = summary["best"]
    print(
        f"{name}: {summary['outcome']} ({summary['stop_reason']}) - {summary['message']}\n"
        f"funnel: generated {f['generated']}, static {f['static_rejected']}, "
        f"compile {f['compile_failed']}, incorrect {f['incorrect']}, slower {f['slower']}, "
        f"errored {f['errored']}, accepted {f['accepted']}; device {f['device_s_total']:.1f}s"
        + (
            f"\nbest: {best['id']} fitness {json.dumps(best['fitness'])}"
            if best
            else "\nbest: none"
        )
    )
    return 130 if interrupted else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers search", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
