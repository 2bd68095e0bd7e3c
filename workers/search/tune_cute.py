"""Per-case launch tuning of the CuTe row template (issue 15), against the peers on the device.

The CuTe template (``templates/cute_row.py``) has launch parameters (``cute_row.SPACE``:
threads, elements a thread keeps, the largest cluster, prefetch, online softmax, ...). This
times, for every case of a workload, every distinct launch they give (parameter sets that plan
the same launch for a shape are timed once), beside ``torch.compile`` and an incumbent peer
(QuACK), in one process with the performance gate's graph-replay device time; the leaders are
then timed against the peers in the gate's own paired rounds. A launch whose output differs
from the reference beyond the workload's tolerance is dropped and counted.

It runs the generator's own kernels (code this project writes, as ``tune.py`` does for the
Triton row template), not a user's candidate: what it finds is a proposal, and the candidate
made of it goes through every gate. It is also the instrument for the back end's question, how
far each case is from the strongest peer and from the byte floor.

    python -m workers.search.tune_cute --op softmax --problem workers/catalog/problems/softmax.py \\
        --workload workers/catalog/workloads/softmax_long_rows.json \\
        --incumbent workers/catalog/peers/quack_softmax.py --out $OUT

The compute core: no Django here.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import tempfile
import time
import types

from workers import constants as C
from workers import device_lock
from workers.search.generators.templates import cute_row

# Parameters that only softmax and cross-entropy read.
ONLINE_OPS = ("softmax", "cross_entropy")
# What a campaign's start tunes (workers.search.tune_child, ``campaign_space``): the values that
# won a case in the H200 sweeps of sessions 32-33 (docs/benchmarks.md), about 90 s for five
# long-row cases there.
CAMPAIGN_SPACE = {
    "threads": [64, 128, 256, 512],
    "max_per_thread": [32, 64, 128],
    "max_cluster": [1, 2, 4, 8, 16],
    "prefetch": [1],
    "online": [1],
    "exchange": [0, 1],
    "stage": [0],
    "occupancy": [0],
    "order": [0],
    "pack": [1],
    "cache": [0],
    "reread": [0],
}
# The norms' rows re-read from shared memory (stage 2) won their longest rows on the H200
# (session 33: RMSNorm 262,144 bf16 0.875x -> 1.015x of QuACK); softmax's never did. Streaming
# cache hints (cache 3) won three of the five catalog softmax cases (session 34: 2048x8192 bf16
# 0.988x -> 1.014x of QuACK); the packed pair exchange never lost.
_CAMPAIGN_BY_OP = {
    "rms_norm": {"stage": [0, 2]},
    "layer_norm": {"stage": [0, 2]},
    "softmax": {"cache": [0, 3]},
}


def campaign_space(op: str) -> dict[str, list[int]]:
    """The parameter values a campaign's start tunes for ``op``."""
    return {**CAMPAIGN_SPACE, **_CAMPAIGN_BY_OP.get(op, {})}


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def param_sets(op: str, space: dict[str, list[int]]) -> list[dict]:
    """Every combination of the template's parameters in ``space`` (``online`` only where the
    operator reads it); a parameter ``space`` does not name keeps the template's default."""
    names = [n for n in cute_row.SPACE if n != "online" or op in ONLINE_OPS]
    values = [space.get(n, [cute_row.DEFAULTS[n]]) for n in names]
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]


def launch_key(module, params: dict, n: int, itemsize: int, rows: int) -> tuple:
    """What a parameter set launches for a shape: its plan and the parameters the kernel reads
    (two sets with one key run the same kernel)."""
    plan = module._ke_plan(n, itemsize, rows)
    cluster = plan[3] > 1
    exchange = params.get("exchange", 0) if cluster else 0  # only a cluster exchanges
    vec, per, keep, _ = plan
    stage = module._ke_stage({**params, "stage": params.get("stage", 0)}, vec, per, keep, itemsize)
    online = params.get("online", 0)
    pairs = hasattr(module, "_ke_ce") or (hasattr(module, "_ke_softmax") and online)
    if hasattr(module, "_ke_ce") or (hasattr(module, "_ke_softmax") and not online):
        stage = module._ke_exps_kept(stage)  # their rows stay in registers (the exps replace them)
    occupancy = params.get("occupancy", 0)
    order = params.get("order", 0) if cluster else 0
    pack = params.get("pack", 0) if exchange and pairs else 0  # only pairs are packed
    return (*plan, params["threads"], params["prefetch"], online, exchange, stage, occupancy,
            order, pack, params.get("cache", 0), params.get("reread", 0))  # fmt: skip


def _floating(t) -> bool:
    import torch

    return isinstance(t, torch.Tensor) and t.is_floating_point()


def _within(out, ref, tol) -> tuple[bool, float]:
    import torch

    out, ref = out.float(), ref.float()
    err = (out - ref).abs()
    worst = float(err.max()) if err.numel() else 0.0
    if isinstance(tol, str):
        return bool(torch.equal(out, ref)), worst
    ok = bool((err <= tol["atol"] + tol["rtol"] * ref.abs()).all())
    return ok and bool(torch.isfinite(out).all() == torch.isfinite(ref).all()), worst


class _Bench:
    def __init__(self, args, render=None):
        import torch

        from workers.contract import problem as P
        from workers.contract.workload import load_workload_text
        from workers.gates import performance as G

        self.args, self.G, self.P, self.torch = args, G, P, torch
        self.policy = types.SimpleNamespace(enforcing=False)
        self.folder = tempfile.mkdtemp(prefix="ke-tune-cute-")
        self.problem = P.load_module(open(args.problem).read(), "tune_problem", self.folder)
        self.workload = load_workload_text(open(args.workload).read())
        self.peer = None
        if args.incumbent:
            self.peer = P.load_module(open(args.incumbent).read(), "tune_peer", self.folder)
        self.state = types.SimpleNamespace(
            ceilings=None, lock_fd=device_lock.inherited(), lock_wait_s=C.DEVICE_LOCK_WAIT_S
        )
        self.job = types.SimpleNamespace(
            problem=self.problem, device="cuda", state=self.state, problem_hash="t"
        )
        self.flush = G._flush_buffer()
        self.clocks = G.steady_clocks(self.flush)
        self.ceilings = G.ceilings(self.state)
        self.modules: dict[int, object] = {}
        # the candidate's source for a parameter set: the catalog problem's, or (in a
        # campaign) the cute generator's, with the reference's own constructor
        self.render = render or (lambda params: cute_row.render(args.op, params))

    def module(self, i: int, params: dict):
        if i not in self.modules:
            src = self.render(params)
            self.modules[i] = self.P.load_module(src, f"tune_cute_{i}", self.folder)
        return self.modules[i]

    def _case(self, case):
        dtype = self.P.DTYPES.get(case.dtype) if case.dtype else None
        sets = self.G._input_sets(
            self.job, {"overrides": dict(case.overrides), "dtype": case.dtype}, 0
        )
        # as the correctness gate does: a reduced dtype is checked against the reference in fp32
        high = self.torch.float32 if case.dtype in ("float16", "bfloat16") else None
        high_ref, ref, _ = self.P.make_models(self.problem, None, dict(case.overrides), dtype, 0,
                                              "cuda", high)  # fmt: skip
        return dtype, sets, ref, (high_ref if high_ref is not None else ref)

    def _side(self, name, fn, sets):
        side = self.G.Side(name, fn, sets, self.flush, "graph", self.policy)
        side.prepare()
        return side

    def _ms(self, side, samples):
        import numpy as np

        out = []
        with device_lock.held(device_lock.inherited()):
            for _ in range(samples):
                out.append(self.torch.cuda.Event(enable_timing=True))
                out.append(self.torch.cuda.Event(enable_timing=True))
                self.torch.cuda._sleep(self.G.C.SPIN_CYCLES)
                out[-2].record()
                side.graph.replay()
                out[-1].record()
            self.torch.cuda.synchronize()
        times = [s.elapsed_time(e) / side.calls for s, e in zip(out[::2], out[1::2], strict=True)]
        return float(np.median(times))

    def run_case(self, case, sets_of_params: list[dict]) -> dict:
        torch = self.torch
        dtype, sets, ref, high_ref = self._case(case)
        tol = self.workload.tolerance
        tol = tol if isinstance(tol, str) else tol.get(case.dtype or "float32", tol)
        with torch.no_grad():
            high_in = [t.float() if _floating(t) else t for t in sets[0]]
            expected = high_ref(*(high_in if high_ref is not ref else sets[0]))
        work, _ = self.G._work(ref, sets[0])  # the bytes the op moves, its FLOPs
        floor_ms = 1e3 * work["bytes"] / self.ceilings["bandwidth_bytes_per_s"]
        x = sets[0][getattr(self.args, "x_index", 0)]  # the input whose rows the kernel reads
        k = getattr(self.args, "row_dims", 1)  # a row: the last dimension, or the last k
        rows, n = x.reshape(-1, math.prod(x.shape[-k:])).shape
        key = f"{rows},{n},{str(x.dtype).removeprefix('torch.')}"  # the template's table key
        entry = {"name": case.name, "key": key, "rows": rows, "n": n, "dtype": case.dtype,
                 "weight": case.weight, "floor_us": 1e3 * floor_ms, "peers": {}}  # fmt: skip
        peers = {"compile": self.G._compiled(self.state, (case.name,), ref, None)}
        if self.peer is not None:
            _, _, model = self.P.make_models(self.problem, self.peer, dict(case.overrides),
                                             dtype, 0, "cuda", None)  # fmt: skip
            peers["incumbent"] = model
        peer_sides = {}
        for name, fn in peers.items():
            try:
                peer_sides[name] = self._side(name, fn, sets)
                entry["peers"][name] = 1e3 * self._ms(peer_sides[name], self.args.samples)
            except Exception as exc:  # noqa: BLE001 - a peer that cannot run this case
                entry["peers"][name] = None
                entry.setdefault("peer_errors", {})[name] = repr(exc)[:300]
        seen: dict[tuple, dict] = {}
        wrong, failed = [], []
        for i, params in enumerate(sets_of_params):
            mod = self.module(i, params)
            launch = launch_key(mod, params, n, x.element_size(), rows)
            if launch in seen:
                continue
            seen[launch] = run = {"params": params, "launch": list(launch)}
            _, _, model = self.P.make_models(self.problem, mod, dict(case.overrides), dtype, 0,
                                             "cuda", None)  # fmt: skip
            try:
                t0 = time.perf_counter()
                with torch.no_grad():
                    out = model(*sets[0])
                torch.cuda.synchronize()
                run["compile_s"] = round(time.perf_counter() - t0, 3)
                ok, err = _within(out, expected, tol)
                run["max_abs_err"] = err
                if not ok:
                    wrong.append(params)
                    run["us"] = None
                    continue
                side = self._side("candidate", model, sets)
                run["us"] = 1e3 * self._ms(side, self.args.samples)
                run["model"] = model
                del side
            except Exception as exc:  # noqa: BLE001 - a launch that does not compile or run
                failed.append({"params": params, "error": repr(exc)[:300]})
                run["us"] = None
        timed = sorted((v for v in seen.values() if v.get("us")), key=lambda v: v["us"])
        entry.update(launches=len(seen), wrong=len(wrong), failed=failed[:3],
                     n_failed=len(failed), first_wrong=wrong[:2])  # fmt: skip
        entry["top"] = [{k: v for k, v in t.items() if k != "model"} for t in timed[:5]]
        finals = []
        for t in timed[: self.args.finalists]:
            sides = {"candidate": self._side("candidate", t["model"], sets), **peer_sides}
            timings, paired = self.G.time_sides(sides, 0, device_lock.inherited())
            finals.append(
                {
                    "params": t["params"],
                    "launch": t["launch"],
                    "us": 1e3 * timings["candidate"]["device_median_ms"],
                    "peers_us": {p: 1e3 * timings[p]["device_median_ms"] for p in peer_sides},
                    "speedup": {p: paired[p]["speedup"] for p in peer_sides},
                    "ci95": {p: paired[p]["ci95"] for p in peer_sides},
                }
            )
        finals.sort(key=lambda f: f["us"])
        entry["finals"] = finals
        if finals:
            best = finals[0]
            entry["best_us"] = best["us"]
            entry["bandwidth_fraction"] = round(entry["floor_us"] / best["us"], 3)
            entry["vs_best_peer"] = min(best["speedup"].values()) if best["speedup"] else None
        for t in timed:
            t.pop("model", None)
        del peer_sides, sets
        torch.cuda.empty_cache()
        return entry


def table_of(report: dict) -> dict:
    """The per-case table of a tuning report: each case shape ("rows,n,dtype") to the
    parameters of its fastest launch in the paired finals (the template's ``_KE_TABLE``)."""
    table = {}
    for case in report["cases"]:
        if case.get("finals"):
            table[case["key"]] = dict(case["finals"][0]["params"])
    return table


def markdown(report: dict) -> str:
    lines = [
        "| case | compile | incumbent | best CuTe | launch (vec, per, keep, cluster, threads, "
        "prefetch, online, exchange) | vs best peer | of bandwidth |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in report["cases"]:
        p = c["peers"]
        cells = [f"{p[k]:.1f} us" if p.get(k) else "-" for k in ("compile", "incumbent")]
        best = f"{c['best_us']:.1f} us" if c.get("best_us") else "-"
        launch = c["finals"][0]["launch"] if c.get("finals") else "-"
        vs = f"{c['vs_best_peer']:.3f}x" if c.get("vs_best_peer") else "-"
        bw = f"{c['bandwidth_fraction']:.2f}" if c.get("bandwidth_fraction") else "-"
        lines.append(f"| {c['name']} | {' | '.join(cells)} | {best} | {launch} | {vs} | {bw} |")
    return "\n".join(lines)


def tune(args, space: dict[str, list[int]], render=None, progress=print) -> dict:
    """Time every case of ``args.workload`` (see the module's doc); the report, with its
    ``table`` and the tuned ``candidate``, is also written to ``args.out`` after each case."""
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    bench = _Bench(args, render)
    sets = param_sets(args.op, space)
    render = bench.render
    report = {"op": args.op, "problem": args.problem, "workload": args.workload,
              "incumbent": args.incumbent, "space": space, "clocks": bench.clocks,
              "ceilings": bench.ceilings, "cases": []}  # fmt: skip
    name = os.path.splitext(os.path.basename(args.workload))[0]
    path = os.path.join(args.out, f"tune-cute-{args.op}-{name}.json")
    wanted = getattr(args, "cases", None)
    for case in bench.workload.cases:
        if wanted and case.name not in wanted:
            continue
        entry = bench.run_case(case, sets)
        report["cases"].append(entry)
        progress(json.dumps({k: entry.get(k) for k in ("name", "peers", "best_us", "vs_best_peer",
                                                        "bandwidth_fraction", "launches", "wrong",
                                                        "n_failed")}))  # fmt: skip
        report["wall_s"] = round(time.perf_counter() - start, 1)
        report["table"] = table_of(report)
        report["candidate"] = render({**cute_row.DEFAULTS, "table": report["table"]})
        with open(path, "w") as fh:  # after every case: a run cut short keeps what it timed
            json.dump(report, fh, indent=1, default=str)
        with open(os.path.join(args.out, f"{args.op}-{name}.tuned.py"), "w") as fh:
            fh.write(report["candidate"])
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m workers.search.tune_cute",
                                 description=__doc__.split("\n\n")[0])  # fmt: skip
    ap.add_argument("--op", required=True, choices=cute_row.OPS)
    ap.add_argument("--problem", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--incumbent", help="a peer in candidate form (workers/catalog/peers)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--finalists", type=int, default=2)
    ap.add_argument("--cases", help="only these cases of the workload (names, comma-separated)")
    for name, allowed in cute_row.SPACE.items():
        ap.add_argument(f"--{name.replace('_', '-')}", default=",".join(map(str, allowed)),
                        help=f"values to try (of {allowed})")  # fmt: skip
    args = ap.parse_args(argv)
    if args.cases:
        from workers.contract.workload import load_workload_text

        names = {c.name for c in load_workload_text(open(args.workload).read()).cases}
        args.cases = [c for c in args.cases.split(",") if c.strip()]
        unknown = [c for c in args.cases if c not in names]
        if unknown:
            ap.error(f"--cases: {unknown} not in the workload ({', '.join(sorted(names))})")
    space = {name: _ints(getattr(args, name)) for name in cute_row.SPACE}
    for name, values in space.items():
        bad = [v for v in values if v not in cute_row.SPACE[name]]
        if bad:
            ap.error(f"--{name.replace('_', '-')}: {bad} not in {cute_row.SPACE[name]}")
    report = tune(args, space, progress=lambda line: print(line, flush=True))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
