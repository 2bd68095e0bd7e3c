"""Per-case launch tuning for template candidates (issue 11: "per-case specialisation").

A template candidate of the ``row`` family picks its launch configuration (one pass or looped,
rows per program, block, warps, stages) from a policy over the shape; a config table keyed by
shape overrides the policy. This module finds, for each case of a workload, the configuration
that is fastest on the device, so that one candidate can carry the best configuration of every
case it serves (the way Inductor's and Liger's autotuning keys do).

It times configurations of the generator's own kernels (code this project writes, not a user's
candidate) in one process on the GPU, with the performance gate's graph-replay device time;
what it finds is a *proposal*: the specialised candidate then goes through every gate like any
other. Compilation of the configurations is spread over several processes first (they fill
Triton's cache), so the timing process only loads binaries.

    python -m workers.search.tune --problem P.py --workload P.json --out DIR [--jobs 12]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import types

from workers import device_lock

# One configuration: (one_pass, ROWS, BLOCK_N, num_warps, num_stages), the first five fields of
# what the row template's ``_ke_config`` returns (then programs, hints, constant shape); rows
# in segments (one_pass 3) carry their segment count as the programs field from the start.
Config = tuple[int, ...]


def _pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def row_space(
    m: int, n: int, *, max_per_thread: int = 64, segmentable: bool = False
) -> list[Config]:
    """The launch configurations worth timing for ``m`` rows of length ``n`` (``segmentable``:
    the graph's partials combine, so few long rows may be cut into segments)."""
    full = _pow2(n)
    out: list[Config] = []
    if segmentable and m < 128:
        # Few long rows: (row, segment) programs, 512 to 2048 of them over the device (the
        # default policy takes 1024; on the H200 a loss over 4M elements sat within 4% of
        # compile there, and the block and warps decide the rest).
        for block in (512, 1024, 2048, 4096):
            if 2 * block > n:
                break
            for warps in (2, 4, 8):
                if not 1 <= block // (32 * warps) <= 32:
                    continue
                for programs in (512, 1024, 2048):
                    segs = max(2, min(-(-n // block), programs // m))
                    out.append((3, 1, block, warps, 1, segs, 0))
        out = list(dict.fromkeys(out))
    rows_max = min(64, _pow2(m))
    if full <= 65536:
        rows = 1
        while rows <= rows_max and rows * full <= 65536:
            for warps in (1, 2, 4, 8, 16, 32):
                per_thread = rows * full // (32 * warps)
                if 1 <= per_thread <= max_per_thread:
                    out.append((1, rows, full, warps, 1))
            rows *= 2
    if full != n and n > 256:  # one pass over two chunks: full / 2 and the rest
        lanes = full // 2 + _pow2(n - full // 2)
        rows = 1
        while rows <= rows_max and rows * lanes <= 65536:
            for warps in (1, 2, 4, 8, 16, 32):
                per_thread = rows * lanes // (32 * warps)
                if 1 <= per_thread <= max_per_thread:
                    out.append((2, rows, full // 2, warps, 1))
            rows *= 2
    # Looped, the block up to the whole row: a block of the whole row reads it twice (the
    # second read from L2, kept there by the first read's hint) and holds fewer registers than
    # one pass; on the H200 that beat one pass on 8192-wide bf16 rows.
    for block in (256, 512, 1024, 2048, 4096, 8192):
        if block > full:
            break
        for warps in (2, 4, 8, 16):
            per_thread = block // (32 * warps)
            if not 1 <= per_thread <= 32:
                continue
            for stages in (1, 2, 3):
                out.append((0, 1, block, warps, stages))
                if block <= 1024 and m > 1:  # two rows per program for short blocks
                    out.append((0, 2, block, warps, stages))
    return out


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _load(problem_path: str, workload_path: str, folder: str):
    from workers.contract import problem as P
    from workers.contract.workload import load_workload_text
    from workers.search.generators.template import DEFAULTS, render
    from workers.search.trace import trace_problem

    src = open(problem_path).read()
    problem = P.load_module(src, "tune_problem", folder)
    workload = load_workload_text(open(workload_path).read())
    plan = trace_problem(src)
    if plan.family != "row":
        raise SystemExit(f"tune: only the row family is tuned here (this is {plan.family})")
    cand = P.load_module(render(plan, DEFAULTS["row"]), "tune_candidate", folder)
    return problem, workload, cand


def _cases(workload) -> list[dict]:
    return [
        {"name": c.name, "overrides": dict(c.overrides), "dtype": c.dtype, "weight": c.weight}
        for c in workload.cases
    ]


def _key_of(problem, cand, case, device="cuda"):
    """The (M, N, dtype) the candidate computes for the case (recorded from a real call)."""
    import torch

    from workers.contract import problem as P

    dtype = P.DTYPES.get(case["dtype"]) if case["dtype"] else None
    _, _, model = P.make_models(problem, cand, case["overrides"], dtype, 0, device, None)
    inputs = P.make_inputs(problem, case["overrides"], dtype, 0, device)
    seen = []
    original = cand._ke_config

    def spy(m, n, dt):
        seen.append((m, n, dt))
        return original(m, n, dt)

    cand._ke_config = spy
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        cand._ke_config = original
    return seen[0], model, inputs


def set_config(cand, key, cfg) -> None:
    """Make the candidate launch ``cfg`` for ``key`` (padded to the full launch tuple: a
    stage-one configuration leaves programs, hints and shape constants at 0)."""
    cand._CONFIGS[key] = (tuple(cfg) + (0, 0, 0))[:8]


def _compile_worker(args) -> None:
    """Child: call the candidate once per (case, config) given on stdin, to fill the cache."""
    import torch

    with tempfile.TemporaryDirectory() as folder:
        problem, workload, cand = _load(args.problem, args.workload, folder)
        cases = {c["name"]: c for c in _cases(workload)}
        todo = json.loads(sys.stdin.read())
        for name, cfgs in todo.items():
            key, model, inputs = _key_of(problem, cand, cases[name])
            for cfg in cfgs:
                set_config(cand, key, cfg)
                try:
                    with torch.no_grad():
                        model(*inputs)
                    torch.cuda.synchronize()
                except Exception as exc:  # noqa: BLE001 - a config that does not compile
                    print(json.dumps({"case": name, "config": cfg, "error": repr(exc)[:300]}))


def _device_ms(side, samples: int) -> float:
    import numpy as np
    import torch

    from workers import constants as C

    out = []
    with device_lock.held(device_lock.inherited()):  # no other process's kernels meanwhile
        for _ in range(samples):
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(C.SPIN_CYCLES)
            s.record()
            side.graph.replay()
            e.record()
            torch.cuda.synchronize()
            out.append(s.elapsed_time(e) / side.calls)
    return float(np.median(out))


def _compile_all(args, spaces: dict[str, list]) -> list[dict]:
    """Compile every (case, configuration) in ``args.jobs`` processes sharing Triton's cache;
    return the ones that failed."""
    import subprocess

    jobs: list[dict] = [dict() for _ in range(args.jobs)]
    i = 0
    for name, space in spaces.items():
        for cfg in space:
            jobs[i % args.jobs].setdefault(name, []).append(list(cfg))
            i += 1
    # The workers import this package from where it lies, whatever the caller's working folder
    # (behind the sandbox it is a scratch folder, and a relative PYTHONPATH points into it).
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [root, *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(os.path.abspath(p) for p in paths)}
    procs = []
    for todo in jobs:
        if not todo:
            continue
        err = tempfile.TemporaryFile(mode="w+")
        p = subprocess.Popen(
            [sys.executable, "-m", "workers.search.tune", "--compile-worker",
             "--problem", args.problem, "--workload", args.workload, "--out", args.out],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True, env=env,
        )  # fmt: skip
        p.stdin.write(json.dumps(todo))
        p.stdin.close()
        procs.append((p, err))
    failures = []
    broken = []
    for p, err in procs:
        failures += [json.loads(line) for line in p.stdout.read().splitlines() if line]
        if p.wait() != 0:
            err.seek(0)
            broken.append(f"exit {p.returncode}: {' '.join(err.read().split()[-40:])}")
        err.close()
    if broken:
        # Without its compile workers the sweep would compile every configuration one by one
        # in the timing process: minutes instead of seconds. Say why instead.
        raise RuntimeError(f"{len(broken)} tuner compile worker(s) failed: {broken[0][:600]}")
    return failures


def variants(best: list[Config], tiles: int, sms: int) -> list[tuple]:
    """Second stage around the leaders: eviction hints, persistent launches, pipelining, and
    the launch compiled for its shape (M and N constants: no loop or column masks left where
    the row is a whole number of blocks, as in Inductor's static-shape kernels)."""
    out = []
    for cfg in best:
        if cfg[0] == 3:  # segments: the count stays; only the eviction hints vary
            out += [tuple(cfg[:6]) + (hints,) for hints in (0, 1)]
            continue
        base = tuple(cfg[:5])
        for hints in (0, 1):
            out.append(base + (0, hints))
            out.append(base + (0, hints, 1))
            for k in (1, 2, 4):
                if sms * k < tiles:
                    for stages in (1, 3):
                        out.append(base[:4] + (stages, sms * k, hints))
    return list(dict.fromkeys(out))


class _Tuner:
    def __init__(self, args):
        import torch

        from workers.gates import performance as G

        self.args, self.G, self.torch = args, G, torch
        self.policy = types.SimpleNamespace(enforcing=False)
        self.folder = tempfile.mkdtemp(prefix="ke-tune-")
        self.problem, self.workload, self.cand = _load(args.problem, args.workload, self.folder)
        self.cases = _cases(self.workload)
        self.job = types.SimpleNamespace(
            problem=self.problem, device="cuda", state=types.SimpleNamespace(), problem_hash="t"
        )
        self.flush = None
        self.keys = {c["name"]: _key_of(self.problem, self.cand, c)[0] for c in self.cases}

    def _sides(self, case):
        G = self.G
        sets = G._input_sets(self.job, {**case, "kind": "workload"}, 1)
        key, model, _ = _key_of(self.problem, self.cand, case)
        _, ref, _ = G.P.make_models(
            self.problem, None, case["overrides"], G.P.DTYPES.get(case["dtype"]), 0, "cuda", None
        )
        compiled = G._compiled(self.job.state, (case["name"],), ref, None)
        return key, model, compiled, sets

    def sweep(self, spaces: dict[str, list], samples: int = 8) -> dict[str, list]:
        """{case: [(ms, config)] fastest first} over every configuration that compiled."""
        failures = _compile_all(self.args, spaces)
        bad = {(f["case"], tuple(f["config"])) for f in failures}
        if failures:
            first = failures[0]
            print(f"tune: {len(failures)} configurations failed, first: {first}", file=sys.stderr)
        if self.flush is None:
            self.flush = self.G._flush_buffer()
            self.clocks = self.G.steady_clocks(self.flush)
        out = {}
        for case in self.cases:
            key, model, _, sets = self._sides(case)
            timed = []
            for cfg in spaces[case["name"]]:
                if (case["name"], tuple(cfg)) in bad:
                    continue
                set_config(self.cand, key, cfg)
                side = self.G.Side("candidate", model, sets, self.flush, "graph", self.policy)
                try:
                    side.prepare()
                    timed.append((_device_ms(side, samples), tuple(cfg)))
                except Exception as exc:  # noqa: BLE001 - a configuration that fails to run
                    print(f"{case['name']} {cfg}: {exc!r}"[:300], file=sys.stderr)
                del side
            if not timed:
                raise SystemExit(
                    f"tune: no configuration of case {case['name']} ran"
                    + (f" (first failure: {failures[0]['error']})" if failures else "")
                )
            timed.sort()
            out[case["name"]] = timed
            del sets
            self.torch.cuda.empty_cache()
        return out

    def finals(self, case, leaders: list[tuple]) -> list[dict]:
        """The leaders against compile in the performance gate's own paired rounds."""
        key, model, compiled, sets = self._sides(case)
        rows = []
        for cfg in leaders:
            set_config(self.cand, key, cfg)
            sides = {
                "candidate": self.G.Side(
                    "candidate", model, sets, self.flush, "graph", self.policy
                ),
                "compile": self.G.Side("compile", compiled, sets, self.flush, "graph", self.policy),
            }
            timings, paired = self.G.time_sides(sides, 0, device_lock.inherited())
            rows.append(
                {
                    "config": list(cfg),
                    "device_us": 1e3 * timings["candidate"]["device_median_ms"],
                    "compile_us": 1e3 * timings["compile"]["device_median_ms"],
                    "speedup": paired["compile"]["speedup"],
                    "ci95": paired["compile"]["ci95"],
                }
            )
        rows.sort(key=lambda r: -r["speedup"])
        return rows


def tune(args) -> dict:
    import torch

    from workers.search.generators.template import DEFAULTS, render
    from workers.search.trace import trace_problem

    os.makedirs(args.out, exist_ok=True)
    t = _Tuner(args)
    start = time.perf_counter()
    segmentable = bool(t.cand._SEGMENTS[0])
    first = {c["name"]: row_space(*t.keys[c["name"]][:2], segmentable=segmentable) for c in t.cases}
    # A looped kernel reads its row again: whether the first read keeps it in L2 (hints)
    # decides whether it can compete, so looped configurations are timed with hints at once.
    one = t.sweep(
        {
            k: [cfg if len(cfg) > 5 else cfg + (0, 0) for cfg in v]
            + [cfg + (0, 1) for cfg in v if cfg[0] == 0]
            for k, v in first.items()
        }
    )
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    second = {}
    for c in t.cases:
        m, n = t.keys[c["name"]][:2]
        rows_best = [cfg for _, cfg in one[c["name"]][: args.leaders]]
        # The fastest looped configurations too: compiled for the shape, a looped kernel loses
        # its loop and masks, which is what Inductor's reduction has over ours.
        looped = [cfg for _, cfg in one[c["name"]] if cfg[0] == 0][:2]
        tiles = max(1, m // max(1, rows_best[0][1])) if rows_best else 1
        second[c["name"]] = variants(rows_best, tiles, sms) + variants(looped, 1, sms)
    two = t.sweep(second)
    report: dict = {"problem": args.problem, "clocks": t.clocks, "sms": sms, "cases": []}
    table = {}
    for case in t.cases:
        merged = sorted(one[case["name"]] + two[case["name"]])
        leaders = list(dict.fromkeys(cfg for _, cfg in merged))[:3]
        finals = t.finals(case, leaders)
        key = t.keys[case["name"]]
        label = f"{key[0]},{key[1]},{_dtype_name(key[2])}"
        table[label] = finals[0]["config"]
        entry = {
            "name": case["name"],
            "key": label,
            "stage1_best": [[1e3 * ms, list(c)] for ms, c in one[case["name"]][:5]],
            "stage2_best": [[1e3 * ms, list(c)] for ms, c in two[case["name"]][:5]],
            "finals": finals,
        }
        report["cases"].append(entry)
        print(json.dumps({"case": case["name"], "finals": finals[:2]}), flush=True)
    report["wall_s"] = time.perf_counter() - start
    report["table"] = table
    src = open(args.problem).read()
    plan = trace_problem(src)
    report["candidate"] = render(plan, {**DEFAULTS["row"], "table": table})
    return report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", required=True)
    ap.add_argument("--workload", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--leaders", type=int, default=4, help="stage-1 leaders varied in stage 2")
    ap.add_argument("--compile-worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.compile_worker:
        _compile_worker(args)
        return 0
    report = tune(args)
    name = os.path.splitext(os.path.basename(args.problem))[0]
    with open(os.path.join(args.out, f"tune-{name}.json"), "w") as fh:
        json.dump(report, fh, indent=1)
    with open(os.path.join(args.out, f"{name}.tuned.py"), "w") as fh:
        fh.write(report["candidate"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
