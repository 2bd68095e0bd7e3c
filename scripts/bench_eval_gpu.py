"""GPU measurement of the evaluation core (issue 3): ceilings, per-case medians and CIs of the
good candidates against eager and torch.compile, a handful of adversarial candidates on cuda,
and the harness's own overhead (evaluation wall/device time per candidate and per case).

    python3 scripts/bench_eval_gpu.py --out $OUT
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "workers", "fixtures")

WORKLOADS = {
    "silu": [
        ({"batch_size": 16, "dim": 16384}, None, 100),
        ({"batch_size": 64, "dim": 16384}, None, 50),
        ({"batch_size": 256, "dim": 8192}, None, 20),
        ({"batch_size": 1024, "dim": 4097}, None, 10),
        ({"batch_size": 4096, "dim": 4096}, "bfloat16", 5),
    ],
    "softmax": [
        ({"batch_size": 16, "dim": 16384}, None, 100),
        ({"batch_size": 64, "dim": 16384}, None, 50),
        ({"batch_size": 256, "dim": 8192}, None, 20),
        ({"batch_size": 1024, "dim": 4097}, None, 10),
        ({"batch_size": 4096, "dim": 4096}, "bfloat16", 5),
    ],
    "rmsnorm": [
        ({"batch_size": 4096, "dim": 4096}, None, 100),
        ({"batch_size": 1024, "dim": 8192}, None, 30),
        ({"batch_size": 16384, "dim": 1024}, None, 20),
        ({"batch_size": 2048, "dim": 4096}, "bfloat16", 10),
        ({"batch_size": 8191, "dim": 2048}, None, 5),
    ],
    "matmul": [
        ({"M": 1024, "K": 1024, "N": 1024}, None, 100),
        ({"M": 2048, "K": 2048, "N": 2048}, None, 30),
        ({"M": 512, "K": 1024, "N": 2048}, None, 20),
        ({"M": 1000, "K": 1000, "N": 1000}, None, 10),
        ({"M": 2048, "K": 2048, "N": 2048}, "bfloat16", 5),
    ],
}
ADVERSARIAL = [
    "unwritten",
    "input_mutated",
    "nondeterministic",
    "nan_output",
    "cached",
    "first_row_only",
    "segfault",
    "hidden_fallback",
]


def _workload(name):
    cases = []
    for overrides, dtype, weight in WORKLOADS[name]:
        label = ",".join(f"{k}={v}" for k, v in overrides.items()) + (f",{dtype}" if dtype else "")
        cases.append({"name": label, "overrides": overrides, "dtype": dtype, "weight": weight})
    return {"cases": cases, "tolerance": {"float32": {"atol": 1e-4, "rtol": 1e-4}}}


def _read(*parts):
    with open(os.path.join(FIX, *parts)) as fh:
        return fh.read()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.environ.get("OUT", "."))
    parser.add_argument("--variants", type=int, default=8)
    parser.add_argument("--skip-adversarial", action="store_true")
    opts = parser.parse_args(argv)
    sys.path.insert(0, ROOT)
    from tests.workers.fixtures.adversarial import CASES
    from workers.evaluate import EvaluationRequest, Evaluator

    results = {"started": time.time(), "problems": {}, "adversarial": {}, "throughput": {}}
    out_path = os.path.join(opts.out, "eval_gpu.json")

    def save():
        with open(out_path, "w") as fh:
            json.dump(results, fh, indent=1, default=str)

    with Evaluator() as ev:
        t = time.perf_counter()
        ev.child("cuda")
        results["child_start_s"] = time.perf_counter() - t
        for name in ("silu", "softmax", "rmsnorm", "matmul"):
            problem = _read("problems", f"{name}.py")
            cand = _read("candidates", f"{name}_good.py")
            workload = _workload(name)
            entry = results["problems"][name] = {}
            try:
                t = time.perf_counter()
                base = ev.baseline(
                    EvaluationRequest(problem, "", workload, platform="cuda", time_limit_s=400)
                )
                entry["baseline_wall_s"] = time.perf_counter() - t
                entry["baseline"] = base.to_dict()
                results["fingerprint"] = base.fingerprint
                results["ceilings"] = base.ceilings
                t = time.perf_counter()
                rep = ev.evaluate(
                    EvaluationRequest(
                        problem, cand, workload, platform="cuda", baseline_times=base.to_dict()
                    )
                )
                entry["eval_wall_s"] = time.perf_counter() - t
                entry["report"] = rep.to_dict()
                print(f"== {name}: {rep.verdict} {rep.reason[:200]}", flush=True)
                print(
                    f"   baseline {entry['baseline_wall_s']:.1f}s eval {entry['eval_wall_s']:.2f}s"
                    f" device {rep.device_s:.2f}s",
                    flush=True,
                )
                for c in rep.cases:
                    if c.timing:
                        b = c.baselines
                        print(
                            f"   {c.name:<34} cand {c.timing.median_ms:.4f} "
                            f"eager {b['eager'].median_ms:.4f} "
                            f"compile {b['compile'].median_ms:.4f} floor "
                            f"{c.floor_ms:.4f}",
                            flush=True,
                        )
                    elif c.status != "passed":
                        print(
                            f"   {c.name:<34} {c.status} {c.skip_reason or ''}{c.reason or ''}",
                            flush=True,
                        )
            except Exception as exc:  # noqa: BLE001 - keep measuring the rest
                entry["error"] = f"{type(exc).__name__}: {exc}"
                print(f"== {name}: ERROR {entry['error']}", flush=True)
            save()
        # Harness throughput: distinct variants (a comment changes the source, so Triton
        # recompiles), 5-case workload, baseline timings given.
        for name in ("softmax",):
            entry = results["problems"][name]
            if "baseline" not in entry:
                continue
            problem = _read("problems", f"{name}.py")
            cand = _read("candidates", f"{name}_good.py")
            walls, devices, verdicts = [], [], []
            for i in range(opts.variants):
                src = cand.replace(
                    "    row = tl.program_id(0)", f"    row = tl.program_id(0)  # variant {i}"
                )
                t = time.perf_counter()
                rep = ev.evaluate(
                    EvaluationRequest(
                        problem,
                        src,
                        _workload(name),
                        platform="cuda",
                        baseline_times=entry["baseline"],
                        trials=2,
                    )
                )
                walls.append(time.perf_counter() - t)
                devices.append(rep.device_s)
                verdicts.append(rep.verdict)
            results["throughput"][name] = {
                "wall_s": walls,
                "device_s": devices,
                "verdicts": verdicts,
                "cases": 5,
            }
            mean = sum(walls) / len(walls)
            print(
                f"== throughput {name}: {mean:.2f} s/candidate wall "
                f"({60 / mean:.1f} candidates/min), per case {mean / 5:.3f} s",
                flush=True,
            )
            save()
        if not opts.skip_adversarial:
            for adv in ADVERSARIAL:
                problem_name, src, gate, rule = CASES[adv]
                t = time.perf_counter()
                rep = ev.evaluate(
                    EvaluationRequest(
                        _read("problems", f"{problem_name}.py"),
                        src,
                        platform="cuda",
                        time_limit_s=60,
                    )
                )
                g = rep.gate(rep.failed_gate) if rep.failed_gate else None
                got = (rep.failed_gate, g.rule if g else None)
                results["adversarial"][adv] = {
                    "expected": [gate, rule],
                    "got": list(got),
                    "reason": rep.reason,
                    "wall_s": time.perf_counter() - t,
                }
                ok = "OK " if list(got) == [gate, rule] else "BAD"
                print(f"== adversarial {ok} {adv:<18} {got} {rep.reason[:120]}", flush=True)
                save()
    results["finished"] = time.time()
    save()
    print(
        json.dumps(
            {"fingerprint": results.get("fingerprint"), "ceilings": results.get("ceilings")},
            default=str,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
