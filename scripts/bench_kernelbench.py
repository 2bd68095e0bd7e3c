"""KernelBench level 1 on a platform (issue 11): which problems a template claims, and whether
a small template campaign ends with an accepted (correct) kernel.

The problems are read at run time from a local git copy of ScalingIntelligence/KernelBench
(never copied into this repository), unmodified. For each one: the template generator says
which family fits or why none does (it traces behind the sandbox); where one fits, a small
campaign runs with the engine's own driver. Each problem runs in its own process under a
timeout, so one crash or hang is recorded and the run goes on; rows are written to ``--out``
after every problem.

    python scripts/bench_kernelbench.py --out /tmp/kb1.json            # all 100, interpret
    python scripts/bench_kernelbench.py --out /tmp/kb1.json --only 19_ReLU.py,23_Softmax.py
    python scripts/bench_kernelbench.py --out /tmp/kb1.json --limit 5
    python scripts/bench_kernelbench.py --render /tmp/kb1.json  # the Markdown tables

The sandbox is whatever ``KERNELEVOLVE_SANDBOX`` says (the default: the operating-system
boundary). No Django.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # the compute core (workers), run from anywhere
DEFAULT_KERNELBENCH = "/work/.mirror/ScalingIntelligence+KernelBench/repo"
LEVEL_DIR = "KernelBench/level1"


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", git_dir, *args], check=True, capture_output=True, text=True
    ).stdout


def problem_files(args) -> list[str]:
    """Level-1 file names in problem-number order (``1_...py`` .. ``100_...py``)."""
    if args.dir:
        names = [p.name for p in Path(args.dir).glob("*.py")]
    else:
        names = _git(args.kernelbench, "ls-tree", "--name-only", args.rev, f"{LEVEL_DIR}/").split()
        names = [Path(n).name for n in names if n.endswith(".py")]
    names = [n for n in names if re.match(r"\d+_", n)]
    return sorted(names, key=_number_order)


def _number_order(name: str) -> tuple[int, str]:
    """A problem file's place in problem-number order (``2_...`` before ``10_...``)."""
    m = re.match(r"(\d+)", name)
    return (int(m.group(1)) if m else 0, name)


def problem_source(args, name: str) -> str:
    if args.dir:  # a plain copy of the level-1 folder (a GPU host has no git copy)
        return (Path(args.dir) / name).read_text()
    return _git(args.kernelbench, "show", f"{args.rev}:{LEVEL_DIR}/{name}")


def scaled_workload(source: str, max_elements: int) -> tuple[dict, dict | None]:
    """One case at the problem's own sizes, halved until no input exceeds ``max_elements``
    (the sizes are read behind the sandbox: the problem's code never runs here)."""
    from workers.reference_check import reference_check

    answer = reference_check(
        source=source,
        case={"name": "default"},
        scale_cases=[{"name": "default"}],
        scale_cap=max_elements,
    )
    if not answer.get("ok"):
        raise RuntimeError(f"the sizes could not be read: {answer.get('error')}")
    scaled = answer["interpret_cases"][0]
    case = {"name": "kb_scaled", "overrides": scaled["overrides"], "weight": 1}
    return {"cases": [case]}, scaled["scaled"]


def _one_line(text: str, limit: int = 240) -> str:
    line = " ".join((text or "").split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _first_failure(nodes: list[dict]) -> dict | None:
    for node in nodes:
        if node.get("status") == "rejected":
            return {
                "node": node.get("id"),
                "gate": node.get("failed_gate") or "error",
                "reason": _one_line(node.get("reason") or ""),
            }
    return None


BASE_TIMEOUT_S = 240.0
# The per-case tuner's time for one problem on an H100 (60-100 s, session 51); the tuners of
# problems run at once take turns on the GPU, so one problem may wait for the others'.
TUNER_S = 100.0


def default_timeout_s(args, problems: int) -> float:
    """The per-problem limit when none is given: a tuning run waits for up to ``jobs`` tuners
    (its own and those started beside it); at session 51's 240 s, four tuned losses and norms
    run four at a time all timed out before their first candidate."""
    if not (args.tune and args.platform == "cuda"):
        return BASE_TIMEOUT_S
    return BASE_TIMEOUT_S + TUNER_S * max(1, min(args.jobs, problems))


def bench_one(source: str, args) -> dict:
    """Describe, then (where a template fits) run a small campaign; one result row.

    The row is written to ``args.row_out`` once the family is known too, so a problem killed
    at its timeout still says which family claimed it."""
    from workers.evaluate import Evaluator
    from workers.search.engine import campaign_new, campaign_summary, run_campaign
    from workers.search.generators.template import TemplateGenerator

    t0 = time.time()
    gen = TemplateGenerator()
    train = args.mode == "train"
    fit = gen.describe(source, train)
    row: dict = {
        "fits": bool(fit.get("fits")),
        "family": fit.get("family"),
        "summary": _one_line(fit.get("summary") or ""),
        "describe_s": round(time.time() - t0, 2),
    }
    if not row["fits"] or args.candidates == 0:  # --candidates 0: which problems are claimed
        row["result"] = "no_template" if not row["fits"] else "claimed"
        row["wall_s"] = round(time.time() - t0, 2)
        return row

    def unfinished(phase: str, nodes: list[dict] | None = None) -> None:
        """The row so far: a problem killed at its timeout says where its time went."""
        part = {**row, "result": "unfinished", "phase": phase, "at_s": round(time.time() - t0, 1)}
        if nodes is not None:
            part["nodes"] = _node_rows(nodes)
        Path(args.row_out).write_text(json.dumps(part, default=str))

    unfinished("reading the sizes")
    workload = None
    if args.platform == "cuda":
        workload, row["scaled"] = scaled_workload(source, args.max_elements)
        row["overrides"] = workload["cases"][0]["overrides"]
    tuning = args.tune and args.platform == "cuda"
    # the tuner runs with the baseline (about 60-100 s a problem on an H100; problems run at
    # once take turns on the GPU), so a timeout here names it
    unfinished(
        "baseline, the per-case tuner and first candidates"
        if tuning
        else "baseline and first candidates"
    )
    if args.tolerance:
        tolerance = json.loads(args.tolerance)
        workload = {**(workload or {"cases": [{"name": "default"}]}), "tolerance": tolerance}
    if train:  # the module as KernelBench runs it: BatchNorm by batch statistics
        workload = {**(workload or {"cases": [{"name": "default"}]}), "mode": "train"}
    state = campaign_new(
        problem_source=source,
        workload=workload,
        platform=args.platform,
        max_candidates=args.candidates,
        max_wall_s=args.wall_s,
        trials=args.trials,
        problem_name=args.problem_name,
        baseline=args.baseline,
        tune=args.tune,
        time_limit_s=args.time_limit_s,
    )

    def progress(st: dict, _event: dict) -> None:
        nodes = campaign_summary(st, with_sources=False)["nodes"]
        unfinished(f"{len(nodes)} candidate(s) recorded", nodes)

    with Evaluator() as ev:
        # The same generator instance: its traced plan is reused, not traced again.
        run_campaign(state, evaluator=ev, generators={"template": gen}, progress=progress)
    summary = campaign_summary(state, with_sources=False)
    nodes = summary["nodes"]
    accepted = [n for n in nodes if n.get("status") == "accepted"]
    row.update(
        {
            "result": "accepted" if accepted else "rejected",
            "outcome": summary["outcome"],
            "stop_reason": summary["stop_reason"],
            "message": _one_line(summary["message"], 400),
            "evaluated": summary["candidates_evaluated"],
            "accepted": len(accepted),
            "first_accepted": summary["first_accepted"],
            "first_failure": _first_failure(nodes),
            "funnel": {k: v for k, v in summary["funnel"].items() if isinstance(v, int)},
            "nodes": _node_rows(nodes),
            "best_speedup": _best_speedup(nodes),
            "baseline": args.baseline if args.platform == "cuda" else None,
            "device_s": summary["device_s"],
            "generator_stats": summary["generator_stats"],
            "fingerprint": summary["fingerprint"],
            "harness_hash": summary["harness_hash"],
        }
    )
    row["wall_s"] = round(time.time() - t0, 2)
    return row


def _node_rows(nodes: list[dict]) -> list[dict]:
    return [
        {
            "id": n.get("id"),
            "status": n.get("status"),
            "edge": n.get("edge"),
            "params": n.get("params"),
            "failed_gate": n.get("failed_gate"),
            "reason": _one_line(n.get("reason") or "", 600),
            "wall_s": n.get("wall_s"),
            "device_s": n.get("device_s"),
            "fitness": _fitness_row(n.get("fitness")),
            "timed": _timed_cases(n.get("report")),
        }
        for n in nodes
    ]


def _fitness_row(fit: dict | None) -> dict | None:
    if not fit:
        return None
    keep = ("speedup", "ci95", "baseline", "per_case", "recheck")
    return {k: fit[k] for k in keep if k in fit}


def _us(timing: dict | None) -> float | None:
    if not isinstance(timing, dict):
        return None
    ms = timing.get("device_median_ms")
    ms = timing.get("median_ms") if ms is None else ms
    return None if ms is None else round(1e3 * ms, 3)


def _timed_cases(report: dict | None) -> list[dict]:
    """Per timed case: the candidate's and each baseline's median (us), the floor and bytes
    (what a ratio alone does not say: which side moved)."""
    out = []
    for case in (report or {}).get("cases") or []:
        if not case.get("timing"):
            continue
        floor = case.get("floor_ms")
        out.append(
            {
                "case": case.get("name"),
                "candidate_us": _us(case["timing"]),
                "baselines_us": {k: _us(v) for k, v in (case.get("baselines") or {}).items()},
                "floor_us": None if floor is None else round(1e3 * floor, 3),
                "bytes": case.get("bytes"),
            }
        )
    return out


def _best_speedup(nodes: list[dict]) -> float | None:
    """The highest weighted speedup any candidate measured (accepted or not)."""
    found = [(n.get("fitness") or {}).get("speedup") for n in nodes]
    found = [s for s in found if isinstance(s, (int, float))]
    return max(found) if found else None


def stopped_row(row: dict, why: str) -> dict:
    """A problem stopped before its campaign ended (its timeout, a crash): "accepted" where a
    candidate it recorded had passed every gate (that kernel is its result, and the stop is
    said beside it), else an error saying why."""
    nodes = row.get("nodes") or []
    accepted = [n for n in nodes if n.get("status") == "accepted"]
    if not accepted:
        return {**row, "result": "error", "error": why}
    return {
        **row,
        "result": "accepted",
        "stopped": why,
        "accepted": len(accepted),
        "evaluated": sum(n.get("status") in ("accepted", "rejected") for n in nodes),
        "best_speedup": _best_speedup(nodes),
    }


def _child(args) -> int:
    source = problem_source(args, args.one)
    try:
        row = bench_one(source, args)
    except Exception as exc:  # noqa: BLE001 - the parent records it as this problem's result
        row = {"result": "error", "error": _one_line(f"{type(exc).__name__}: {exc}", 600)}
    Path(args.row_out).write_text(json.dumps(row, default=str))
    return 0


def _run_child(name: str, args) -> dict:
    """One problem in its own process group, killed whole when it overruns its timeout."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        row_out = fh.name
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--one",
        name,
        "--row-out",
        row_out,
        "--kernelbench",
        args.kernelbench,
        "--rev",
        args.rev,
        *(["--dir", args.dir] if args.dir else []),
        "--baseline",
        args.baseline,
        "--max-elements",
        str(args.max_elements),
        "--tune" if args.tune else "--no-tune",
        "--time-limit-s",
        str(args.time_limit_s),
        "--platform",
        args.platform,
        "--candidates",
        str(args.candidates),
        "--wall-s",
        str(args.wall_s),
        "--trials",
        str(args.trials),
        "--mode",
        args.mode,
        *(["--tolerance", args.tolerance] if args.tolerance else []),
        "--out",
        "-",
    ]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(
            os.pathsep
        ),
    }
    t0 = time.time()
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=REPO_ROOT,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        log, _ = proc.communicate(timeout=args.timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        log, _ = proc.communicate()
        timed_out = True
    wall = round(time.time() - t0, 2)
    try:
        row = json.loads(Path(row_out).read_text() or "null")
    except (OSError, json.JSONDecodeError):
        row = None
    finally:
        Path(row_out).unlink(missing_ok=True)
    if row is None or row.get("result") == "unfinished":
        why = (
            f"timed out after {args.timeout_s:.0f}s"
            if timed_out
            else f"exited {proc.returncode} without a result"
        )
        if (row or {}).get("phase"):
            why += f" ({row['phase']} at {row['at_s']:.0f}s)"
        row = {**stopped_row(row or {}, why), "log_tail": (log or "")[-2000:]}
    row["problem"] = name
    row["process_wall_s"] = wall
    return row


def _print_row(i: int, total: int, row: dict) -> None:
    what = row.get("family") or row.get("summary") or row.get("error", "")
    detail = ""
    if row.get("result") == "accepted":
        detail = f"{row['accepted']}/{row['evaluated']} accepted"
        if row.get("stopped"):
            detail += f" ({row['stopped']})"
    elif row.get("result") == "rejected":
        ff = row.get("first_failure") or {}
        detail = f"0/{row['evaluated']} accepted; {ff.get('gate')}: {ff.get('reason', '')}"
    elif row.get("result") == "error":
        detail = row.get("error", "")
    print(
        f"[{i}/{total}] {row['problem']}: {row['result']} ({_one_line(what, 120)}) "
        f"{detail[:200]} {row['process_wall_s']:.0f}s",
        flush=True,
    )


def _result_cell(row: dict) -> str:
    if row["result"] == "accepted":
        stop = f"; then {row['stopped']}" if row.get("stopped") else ""
        return f"**accepted** ({row['accepted']} of {row['evaluated']} correct{stop})"
    if row["result"] == "rejected":
        ff = row.get("first_failure") or {}
        reason = (ff.get("reason") or "").removeprefix(f"{ff.get('gate')}: ")
        reason = _one_line(reason, 160).replace("|", "\\|")
        return f"rejected (0 of {row['evaluated']}); first: {ff.get('gate')}: {reason}"
    if row["result"] == "no_template":
        return "-"
    if row["result"] == "claimed":  # --candidates 0: no campaign ran
        return "claimed (no campaign run)"
    return f"error: {_one_line(row.get('error', ''), 160)}"


def _speedup_cell(row: dict) -> str:
    best = row.get("best_speedup")
    return "-" if best is None else f"{best:.3f}x"


def merge(docs: list[dict]) -> dict:
    """One run from runs made in parts (device calls have a time limit): rows by problem, a
    later part's row replacing an earlier one's; the first part's settings, every part's
    command and start under ``parts``."""
    rows: dict[str, dict] = {}
    for doc in docs:
        rows.update({row["problem"]: row for row in doc["rows"]})
    for name, row in rows.items():  # parts written before a stopped row kept its kernel
        if row.get("result") == "error" and row.get("nodes"):
            rows[name] = stopped_row(row, row.get("error", ""))

    parts = [{k: d["meta"].get(k) for k in ("argv", "started_at", "done", "of")} for d in docs]
    meta = {**docs[0]["meta"], "done": len(rows), "of": len(rows), "parts": parts}
    return {"meta": meta, "rows": [rows[k] for k in sorted(rows, key=_number_order)]}


def render(doc: dict) -> str:
    """The summary and per-problem table (Markdown) of a finished or partial run."""
    from workers.suite_run import reason_group  # the portal groups no-template reasons alike

    rows = doc["rows"]
    fams: dict[str, list[dict]] = {}
    groups: dict[str, list[str]] = {}
    for r in rows:
        if r.get("fits"):
            fams.setdefault(r["family"], []).append(r)
        elif r["result"] == "no_template":
            groups.setdefault(reason_group(r["summary"]), []).append(r["problem"].split("_")[0])
    errors = [r for r in rows if r["result"] == "error"]
    out = [f"{len(rows)} of 100 problems run.", ""]
    out += ["| family | claimed | accepted (correct) kernel | all rejected | error |"]
    out += ["|---|---|---|---|---|"]
    for fam, rs in sorted(fams.items(), key=lambda kv: -len(kv[1])):
        n_acc = sum(r["result"] == "accepted" for r in rs)
        n_rej = sum(r["result"] == "rejected" for r in rs)
        n_err = sum(r["result"] == "error" for r in rs)
        out.append(f"| {fam} | {len(rs)} | {n_acc} | {n_rej} | {n_err} |")
    claimed = [r for rs in fams.values() for r in rs]
    out.append(
        f"| **all** | {len(claimed)} | {sum(r['result'] == 'accepted' for r in claimed)} | "
        f"{sum(r['result'] == 'rejected' for r in claimed)} | "
        f"{sum(r['result'] == 'error' for r in claimed)} |"
    )
    out += ["", f"No template fits: {sum(len(v) for v in groups.values())} problems.", ""]
    out += ["| reason | problems | which (number) |", "|---|---|---|"]
    for label, nums in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        out.append(f"| {label} | {len(nums)} | {', '.join(nums)} |")
    if errors:
        which = ", ".join(f"{r['problem']} ({r.get('error', '')})" for r in errors)
        out += ["", f"No result (crashed or timed out): {len(errors)}: {which}."]
    cuda = doc["meta"].get("platform") == "cuda"
    if cuda:
        base = doc["meta"].get("baseline") or "the baseline"
        out += ["", f"On the device, judged against {base}:", ""]
        out += ["| family | claimed | accepted (faster, every gate) | best measured > 1 |"]
        out += ["|---|---|---|---|"]
        for fam, rs in sorted(fams.items(), key=lambda kv: -len(kv[1])):
            fast = sum((r.get("best_speedup") or 0) > 1.0 for r in rs)
            n_acc = sum(r["result"] == "accepted" for r in rs)
            out.append(f"| {fam} | {len(rs)} | {n_acc} | {fast} |")
        n_acc = sum(r["result"] == "accepted" for r in claimed)
        fast = sum((r.get("best_speedup") or 0) > 1.0 for r in claimed)
        out.append(f"| **all** | {len(claimed)} | {n_acc} | {fast} |")
    speed_col = " best speedup |" if cuda else ""
    head = f"| problem | family / no-template reason | result | evaluated |{speed_col} wall s |"
    out += ["", head]
    out += ["|---|---|---|---|---|" + ("---|" if cuda else "")]
    for r in rows:
        what = r.get("family") or "not recorded (timed out)"
        if not r.get("fits") and r.get("summary"):
            what = _one_line(r["summary"].removeprefix("no template fits: "), 140)
        what = what.replace("|", "\\|")
        out.append(
            f"| {r['problem'].removesuffix('.py')} | {what} | {_result_cell(r)} | "
            f"{r.get('evaluated', '-') if r.get('fits') else '-'} |"
            + (f" {_speedup_cell(r)} |" if cuda else "")
            + f" {r['process_wall_s']:.0f} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="JSON file, rewritten after each problem")
    parser.add_argument("--kernelbench", default=DEFAULT_KERNELBENCH, help="KernelBench git dir")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--dir", help="a plain folder of level-1 files instead of the git copy")
    parser.add_argument(
        "--baseline", default="compile", help="what a cuda campaign is judged against"
    )
    parser.add_argument(
        "--max-elements",
        type=int,
        default=1 << 24,
        help="cuda: halve the size constants until no input exceeds this many elements",
    )
    parser.add_argument(
        "--tune",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="cuda: the per-case tuner's table as the first seed (off: device time; on, give "
        "--timeout-s room for it: 60-100 s a problem on an H100, taking turns on the GPU)",
    )
    parser.add_argument("--platform", default="interpret", choices=["interpret", "cuda"])
    parser.add_argument(
        "--candidates", type=int, default=3, help="per campaign; 0: only which problems fit"
    )
    parser.add_argument("--wall-s", type=float, default=60.0, help="campaign wall budget")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument(
        "--tolerance",
        help="the contract's tolerance as JSON (KernelBench judges float32 at "
        '\'{"float32": {"atol": 1e-2, "rtol": 1e-2}}\', which admits TF32 products); '
        "default: the contract's own (1e-4 for float32)",
    )
    parser.add_argument(
        "--mode",
        default="eval",
        choices=["eval", "train"],
        help="the module's mode (KernelBench's harness leaves its modules in training mode)",
    )
    parser.add_argument(
        "--time-limit-s", type=float, default=120.0, help="each gate's limit in a campaign"
    )
    parser.add_argument(
        "--timeout-s",
        type=float,
        help=f"per-problem hard limit (default {BASE_TIMEOUT_S:.0f} s; with --tune on cuda, "
        f"{TUNER_S:.0f} s more for each problem whose tuner may run before its own)",
    )
    parser.add_argument("--jobs", type=int, default=1, help="problems run at once")
    parser.add_argument("--only", help="comma-separated file names (e.g. 19_ReLU.py)")
    parser.add_argument("--limit", type=int, help="only the first N problems")
    parser.add_argument("--render", help="print a run's JSON as Markdown tables, run nothing")
    parser.add_argument(
        "--merge",
        nargs="+",
        metavar="RUN",
        help="write one run to --out from runs made in parts (a later run's row replaces an "
        "earlier one's for the same problem), run nothing",
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--row-out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.render:
        print(render(json.loads(Path(args.render).read_text())), end="")
        return 0
    if not args.out:
        parser.error("--out is required (or --render)")
    if args.merge:
        doc = merge([json.loads(Path(p).read_text()) for p in args.merge])
        Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
        return 0
    if args.one:
        args.problem_name = Path(args.one).stem
        return _child(args)
    names = problem_files(args)
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        missing = [n for n in wanted if n not in names]
        if missing:
            print(f"not in level 1: {', '.join(missing)}", file=sys.stderr)
            return 2
        names = wanted  # in the order given: the first ones run first
    if args.limit:
        names = names[: args.limit]
    if args.timeout_s is None:
        args.timeout_s = default_timeout_s(args, len(names))
    meta = {
        "kernelbench_commit": (
            f"folder {args.dir}"
            if args.dir
            else _git(args.kernelbench, "rev-parse", args.rev).strip()
        ),
        "argv": sys.argv,
        "platform": args.platform,
        "baseline": args.baseline if args.platform == "cuda" else None,
        "max_elements": args.max_elements if args.platform == "cuda" else None,
        "tune": args.tune if args.platform == "cuda" else None,
        "candidates": args.candidates,
        "wall_s": args.wall_s,
        "trials": args.trials,
        "mode": args.mode,
        "tolerance": json.loads(args.tolerance) if args.tolerance else None,
        "timeout_s": args.timeout_s,
        "sandbox": os.environ.get("KERNELEVOLVE_SANDBOX", "(default)"),
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    order = {name: i for i, name in enumerate(names)}
    rows: list[dict] = []
    # Problems run side by side only with --jobs > 1; each still has its own process and limit.
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(_run_child, name, args) for name in names]
        for done, fut in enumerate(as_completed(futures), 1):
            row = fut.result()
            rows.append(row)
            rows.sort(key=lambda r: order[r["problem"]])
            doc = {"meta": {**meta, "done": len(rows), "of": len(names)}, "rows": rows}
            Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
            _print_row(done, len(names), row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
