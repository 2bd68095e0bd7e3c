"""Gate 4 — performance (runs in the sandbox child, ``cuda`` only).

Method (stated in every result): warm-up calls, then repetitions timed with CUDA events, the L2
cache flushed (a 256 MiB buffer zeroed) before each repetition, inputs rotated over several sets,
the device synchronised (all streams) before reading events; median, p10/p90 and a bootstrap
95% CI of the median. The reference is timed the same way in the same process, eagerly and
under ``torch.compile`` (and ``max-autotune`` on request), and so is the incumbent when given.
A median under the physical floor (bytes over the measured copy bandwidth, FLOPs over the
measured matrix rate, both measured once per process) is a measurement fault.
"""

from __future__ import annotations

import time

import numpy as np
import torch

from workers import constants as C
from workers.contract import problem as P
from workers.gates.compile import import_candidate

METHOD = (
    f"CUDA events; {C.WARMUP_CALLS} warm-up calls; {C.MIN_REPS}-{C.MAX_REPS} repetitions "
    f"(~{C.TARGET_TIMED_MS:.0f} ms timed); L2 flushed ({C.L2_FLUSH_BYTES >> 20} MiB zeroed) before "
    f"each repetition; inputs rotated over up to {C.ROTATING_INPUT_SETS} sets; device-wide "
    f"synchronize before reading events; median, p10/p90, bootstrap ({C.BOOTSTRAP_RESAMPLES}) "
    "95% CI of the median"
)


def summarize(samples_ms: list[float], seed: int = 0) -> dict:
    arr = np.asarray(samples_ms, dtype=np.float64)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(arr), size=(C.BOOTSTRAP_RESAMPLES, len(arr)))
    medians = np.median(arr[idx], axis=1)
    return {
        "median_ms": float(np.median(arr)),
        "p10_ms": float(np.percentile(arr, 10)),
        "p90_ms": float(np.percentile(arr, 90)),
        "ci95_ms": [float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))],
        "samples": int(len(arr)),
        "samples_ms": [float(f"{x:.5g}") for x in arr],
    }


def _event():
    return torch.cuda.Event(enable_timing=True)


def _median_event_ms(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        s, e = _event(), _event()
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e))
    return float(np.median(times))


def ceilings(state) -> dict:
    """Copy bandwidth and bf16 matrix rate, measured once per child process."""
    if state.ceilings is None:
        start = time.perf_counter()
        n = 1 << 28  # 1 GiB of float32
        src = torch.randn(n, device="cuda")
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        copy_ms = _median_event_ms(lambda: dst.copy_(src), 10)
        del src, dst
        m = 8192
        a = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(m, m, device="cuda", dtype=torch.bfloat16)
        for _ in range(3):
            a @ b
        mm_ms = _median_event_ms(lambda: a @ b, 10)
        del a, b
        torch.cuda.empty_cache()
        state.ceilings = {
            "bandwidth_bytes_per_s": 2 * (n * 4) / (copy_ms / 1e3),
            "matmul_flops_per_s": 2 * m**3 / (mm_ms / 1e3),
            "method": "1 GiB device-to-device copy (bytes read + written) and an 8192^3 bf16 "
            "matmul on random data; median of 10 after 3 warm-ups",
            "measured_s": time.perf_counter() - start,
        }
    return state.ceilings


def time_callable(fn, input_sets: list, flush: torch.Tensor, seed: int = 0) -> dict:
    with torch.no_grad():
        for i in range(C.WARMUP_CALLS):
            fn(*input_sets[i % len(input_sets)])
        torch.cuda.synchronize()
        s, e = _event(), _event()
        s.record()
        fn(*input_sets[0])
        e.record()
        torch.cuda.synchronize()
        estimate = max(s.elapsed_time(e), 1e-3)
        reps = int(min(C.MAX_REPS, max(C.MIN_REPS, C.TARGET_TIMED_MS / estimate)))
        starts = [_event() for _ in range(reps)]
        ends = [_event() for _ in range(reps)]
        for r in range(reps):
            flush.zero_()
            starts[r].record()
            fn(*input_sets[r % len(input_sets)])
            ends[r].record()
        torch.cuda.synchronize()
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)], seed)


def _nbytes(tensors) -> int:
    seen, total = set(), 0
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.numel():
            ptr = t.untyped_storage().data_ptr()
            if ptr not in seen:
                seen.add(ptr)
                total += t.numel() * t.element_size()
    return total


def _outputs(out) -> list:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (list, tuple)):
        return [o for o in out if isinstance(o, torch.Tensor)]
    return []


def _work(model, inputs) -> tuple[int, float]:
    """(bytes the op must move at least, FLOPs counted by torch's flop counter)."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        out = model(*inputs)
    params = [p for p in model.parameters()] + [b for b in model.buffers()]
    nbytes = _nbytes(list(inputs) + params) + _nbytes(_outputs(out))
    return nbytes, float(counter.get_total_flops())


def _input_sets(job, case, seed: int) -> list:
    dtype = P.DTYPES.get(case["dtype"]) if case.get("dtype") else None
    first = P.make_inputs(job.problem, case["overrides"], dtype, seed, job.device)
    size = _nbytes(first)
    count = C.ROTATING_INPUT_SETS if size * C.ROTATING_INPUT_SETS <= (2 << 30) else 1
    sets = [first]
    for k in range(1, count):
        sets.append(P.make_inputs(job.problem, case["overrides"], dtype, seed + k, job.device))
    return sets


def _compiled(model, mode: str | None):
    import torch._dynamo

    torch._dynamo.reset()
    if mode == "max-autotune":
        return torch.compile(model, mode="max-autotune-no-cudagraphs")
    return torch.compile(model)


def _time_references(job, case, model, sets, flush, wanted: list[str], seed: int) -> dict:
    out = {}
    for name in wanted:
        start = time.perf_counter()
        if name == C.BASELINE_EAGER:
            fn = model
        elif name == C.BASELINE_COMPILE:
            fn = _compiled(model, None)
        elif name == C.BASELINE_MAX_AUTOTUNE:
            fn = _compiled(model, "max-autotune")
        elif name == C.BASELINE_INCUMBENT:
            dtype = P.DTYPES.get(case["dtype"]) if case.get("dtype") else None
            _, _, fn = P.make_models(
                job.problem, job.incumbent, case["overrides"], dtype, seed, job.device, None
            )
        else:
            continue
        # The references are trusted code: torch.compile writes caches and runs helpers freely.
        policy = job.state.policy
        policy.enforcing = False
        try:
            timing = time_callable(fn, sets, flush, seed)
        finally:
            policy.enforcing = True
        timing["wall_s"] = time.perf_counter() - start
        out[name] = timing
    return out


def _wanted(args: dict, have: dict) -> list[str]:
    wanted = [C.BASELINE_EAGER, C.BASELINE_COMPILE]
    if args.get("baseline") == C.BASELINE_MAX_AUTOTUNE or args.get("max_autotune"):
        wanted.append(C.BASELINE_MAX_AUTOTUNE)
    if args.get("incumbent_source"):
        wanted.append(C.BASELINE_INCUMBENT)
    return [w for w in wanted if w not in have]


def _prepare_incumbent(job, args):
    if args.get("incumbent_source") and job.incumbent is None:
        job.incumbent = import_candidate(job, args["incumbent_source"], "incumbent")


def _flush_buffer():
    return torch.empty(C.L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")


def run(job, args: dict) -> dict:
    """Time the candidate (and the references not given in ``baseline_times``) per case."""
    ceil = ceilings(job.state)
    flush = _flush_buffer()
    seed = int(args.get("seed", 0))
    given = args.get("baseline_times") or {}
    _prepare_incumbent(job, args)
    records, fault = [], None
    for case in job.cases:
        if case["kind"] != C.CASE_WORKLOAD:
            continue
        start = time.perf_counter()
        dtype = P.DTYPES.get(case["dtype"]) if case.get("dtype") else None
        _, ref, cand = P.make_models(
            job.problem, job.candidate, case["overrides"], dtype, seed, job.device, None
        )
        sets = _input_sets(job, case, seed + 1)
        nbytes, flops = _work(ref, sets[0])
        floor_ms = 1e3 * max(
            nbytes / ceil["bandwidth_bytes_per_s"], flops / ceil["matmul_flops_per_s"]
        )
        timing = time_callable(cand, sets, flush, seed)
        have = dict(given.get(case["name"]) or {})
        baselines = {
            **have,
            **_time_references(job, case, ref, sets, flush, _wanted(args, have), seed),
        }
        record = {
            "name": case["name"],
            "timing": timing,
            "baselines": baselines,
            "bytes": nbytes,
            "flops": flops,
            "floor_ms": floor_ms,
            "wall_s": time.perf_counter() - start,
        }
        if timing["median_ms"] < C.PHYSICAL_FLOOR_SLACK * floor_ms and fault is None:
            fault = record
        records.append(record)
        del sets
    evidence = {"ceilings": ceil, "method": METHOD}
    if fault is not None:
        return {
            "status": C.FAILED,
            "rule": C.RULE_BELOW_FLOOR,
            "reason": f"case {fault['name']}: median {fault['timing']['median_ms']:.4g} ms is "
            f"under the physical floor {fault['floor_ms']:.4g} ms (measurement fault)",
            "cases": records,
            "evidence": evidence,
        }
    return {
        "status": C.PASSED,
        "rule": None,
        "reason": "timed",
        "cases": records,
        "evidence": evidence,
    }


def baseline(job, args: dict) -> dict:
    """Time the reference (eager, compile, optionally max-autotune) and the incumbent alone."""
    if job.device != "cuda":
        return {"status": C.SKIPPED, "reason": f"skipped: {C.RULE_NO_DEVICE}", "cases": []}
    ceil = ceilings(job.state)
    flush = _flush_buffer()
    seed = int(args.get("seed", 0))
    _prepare_incumbent(job, args)
    records = []
    for case in job.cases:
        if case["kind"] != C.CASE_WORKLOAD:
            continue
        start = time.perf_counter()
        dtype = P.DTYPES.get(case["dtype"]) if case.get("dtype") else None
        _, ref, _ = P.make_models(
            job.problem, None, case["overrides"], dtype, seed, job.device, None
        )
        sets = _input_sets(job, case, seed + 1)
        nbytes, flops = _work(ref, sets[0])
        timings = _time_references(job, case, ref, sets, flush, _wanted(args, {}), seed)
        records.append(
            {
                "name": case["name"],
                "weight": case["weight"],
                "overrides": case["overrides"],
                "dtype": case["dtype"],
                "timings": timings,
                "bytes": nbytes,
                "flops": flops,
                "floor_ms": 1e3
                * max(nbytes / ceil["bandwidth_bytes_per_s"], flops / ceil["matmul_flops_per_s"]),
                "wall_s": time.perf_counter() - start,
            }
        )
    return {
        "status": C.PASSED,
        "reason": "timed",
        "cases": records,
        "evidence": {"ceilings": ceil, "method": METHOD},
    }
