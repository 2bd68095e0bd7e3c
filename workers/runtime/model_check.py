"""The model check: a Llama-style decoder, stock vs patched with promoted kernels (no Django).

``run_check(request)`` builds ``workers.runtime.decoder`` with seeded random weights, serves the
request's kernels through ``torch.ops.ke`` (``workers.runtime.ops``), and compares:

- **output agreement**: logits (and the loss) of a prefill step and of a decode step deep in a
  sequence, patched vs stock, in the contract's tolerance; where the dtype is reduced and they
  differ by more, the patched model passes only if it is no further from a float32/float64 copy
  of the stock model than the stock model is (x1.25 + atol): rounding, not a wrong kernel.
  Greedy next-token agreement is reported beside it. Then ``unpatch_model`` must give back the
  stock outputs bit for bit.
- **coverage**: per operator kind, which shapes the kernels served and which fell back (why);
  the artifact under check must have served at least one call, or the check says it proves
  nothing about it.
- **time per step** (``cuda``): prefill and decode, in ``eager``, ``compile`` (``torch.compile``,
  default mode) and ``graph`` (the step captured in a CUDA graph and replayed), stock vs patched
  in paired, interleaved rounds (``workers.gates.timing``): per-round device time from CUDA
  events around a batch of steps; median, the paired speedup and its bootstrap 95% interval.
  The patched model fails the check when it is slower than stock beyond the tolerance in any
  mode (the interval's top below 1 / (1 + tolerance)). Each mode's row says what served the
  patched model (``patched_path``): the kernels through the lean eager route, through
  ``torch.ops.ke`` (compiled with ``under_compile="kernel"``), or the stock code (compiled with
  ``under_compile="stock"``, the default unless a region beats compile), with the call counts.

On ``interpret`` the kernels run in Triton's interpreter: agreement and coverage are real, times
are not measured (``"time": true`` times CPU eager and compile anyway, labelled as such).

Run confined by the registry's worker (``python -m workers.runtime.model_check`` reads the
request as JSON on stdin), or from the command line: ``python -m workers.runtime model-check``.
"""

from __future__ import annotations

import copy
import os
import time

from workers import device_lock

DEFAULT_SHAPES = {
    # (batch, tokens) for prefill; (batch, position) for a decode step at that cache position.
    "tiny": {"prefill": [1, 5], "decode": [4, 47]},
    "small": {"prefill": [2, 64], "decode": [8, 127]},
    "llama3-8b-4l": {"prefill": [1, 1024], "decode": [32, 1023]},
}
MODES = ("eager", "compile", "graph")
LATENCY_TOLERANCE = 0.05
ACCURACY_SLACK = 1.25  # patched may be this much further from high precision than stock


def _torch_dtype(name: str):
    import torch

    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[name]


def runtime_from(kernels: list[dict], platform: str):
    """An OpRuntime serving each kernel ({"kind" or "operator", "source", "problem_source"?,
    "scope"?, "digest"?, "tolerance"?, "beats_compile"?}) at default; unknown operators are
    listed, not served; entries ``template_kernels`` skipped (``"skipped"``) are passed over."""
    from workers.runtime import ops

    rt = ops.OpRuntime(platform=platform)
    unknown = []
    for k in kernels:
        if k.get("skipped"):
            continue
        kind = k.get("kind") or ops.kind_of(k.get("operator", ""))
        if kind is None:
            unknown.append(k.get("operator"))
            continue
        rt.serve(
            kind,
            source=k["source"],
            problem_source=k.get("problem_source"),
            scope=k.get("scope"),
            digest=k.get("digest"),
            operator=k.get("operator") or kind,
            tolerance=k.get("tolerance"),
            beats_compile=bool(k.get("beats_compile")),
        )
    return rt, unknown


def _steps(model, shapes: dict, seed: int, device: str):
    """{"prefill": (tokens, start, labels), "decode": (...)} with seeded tokens."""
    import torch

    g = torch.Generator().manual_seed(seed)
    vocab = model.cfg.vocab_size
    bp, tp = shapes["prefill"]
    bd, pos = shapes["decode"]
    prefill = torch.randint(0, vocab, (bp, tp), generator=g).to(device)
    decode = torch.randint(0, vocab, (bd, 1), generator=g).to(device)
    return {"prefill": (prefill, 0, prefill), "decode": (decode, pos, None)}


def _prepare(model, step: str, shapes: dict, seed: int) -> None:
    """The cache a step runs on: empty for prefill, seeded random for a decode step."""
    import torch

    batch = shapes[step][0]
    torch.manual_seed(seed + 1)
    model.allocate_cache(batch, fill=step == "decode")


def _outputs(model, steps: dict, shapes: dict, seed: int) -> dict:
    import torch

    out = {}
    with torch.inference_mode():
        for step, (tokens, start, labels) in steps.items():
            _prepare(model, step, shapes, seed)
            result = model(tokens, start, labels=labels)
            logits, loss = result if isinstance(result, tuple) else (result, None)
            out[step] = {
                "logits": logits.float().cpu(),
                "loss": loss.float().cpu() if loss is not None else None,
            }
    return out


def _agreement(stock: dict, patched: dict, high: dict | None, tolerance, dtype: str) -> dict:
    from workers.runtime.client import DEFAULT_TOLERANCE, compare

    tol = tolerance if tolerance == "exact" else (tolerance or {}).get(dtype)
    tol = tol or DEFAULT_TOLERANCE.get(dtype, DEFAULT_TOLERANCE["float32"])
    out = {"tolerance": tol, "steps": {}}
    ok = True
    for step in stock:
        a, b = patched[step]["logits"], stock[step]["logits"]
        diff = (a.double() - b.double()).abs()
        row = {
            "max_abs_err": float(diff.max()) if diff.numel() else 0.0,
            "top1_agreement": float((a.argmax(-1) == b.argmax(-1)).float().mean()),
            "loss_stock": _num(stock[step]["loss"]),
            "loss_patched": _num(patched[step]["loss"]),
        }
        # The logits were brought to float32 for comparison: the model dtype's tolerance applies.
        mismatch = compare(a, b, {"float32": tol} if tol != "exact" else "exact")
        row["within_tolerance"] = mismatch is None
        row["rule"] = "patched vs stock in the contract's tolerance"
        if mismatch is not None and high is not None:
            h = high[step]["logits"].double()
            err_stock = float((b.double() - h).abs().max())
            err_patched = float((a.double() - h).abs().max())
            atol = tol["atol"] if isinstance(tol, dict) else 0.0
            row.update(
                err_stock_vs_high=err_stock,
                err_patched_vs_high=err_patched,
                rule=f"patched no further from the high-precision model than stock "
                f"(x{ACCURACY_SLACK} + atol {atol})",
            )
            row["within_tolerance"] = err_patched <= ACCURACY_SLACK * err_stock + atol
        if not row["within_tolerance"]:
            row["mismatch"] = mismatch
            ok = False
        out["steps"][step] = row
    out["ok"] = ok
    return out


def _num(t):
    return None if t is None else float(t)


# ------------------------------------------------------------------------------------- timing


def _step_fn(model, step, steps):
    tokens, start, _ = steps[step]

    def run():
        return model(tokens, start)

    return run


def _cuda_sampler(fn, reps: int):
    import torch

    def sample() -> float:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        torch.cuda.synchronize()
        return s.elapsed_time(e) / reps

    return sample


def _cpu_sampler(fn, reps: int):
    def sample() -> float:
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) * 1e3 / reps

    return sample


def _graphed(fn):
    """fn captured in a CUDA graph (after warm-up on a side stream): a replay callable."""
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph.replay


def patched_path(coverage: dict, mode: str) -> dict:
    """What served the patched model's operator calls in one mode, from the runtime's counts
    over that mode (warm-up, capture and timing): the route and the kernels' share."""
    calls = sum(r["calls"] for r in coverage.values())
    kernel = sum(r["kernel_calls"] for r in coverage.values())
    via_op = sum(r["via_op"] for r in coverage.values())
    counts = {"calls": calls, "kernel_calls": kernel, "via_op": via_op}
    if calls == 0:
        why = " (under_compile=stock: Inductor fuses it)" if mode == "compile" else ""
        return {"path": f"stock code{why}", **counts}
    if via_op == calls:
        route = "torch.ops.ke"
    elif via_op == 0:
        route = "the lean eager route"
    else:
        route = "the lean eager route and torch.ops.ke"
    if kernel == calls:
        what = "kernels"
    elif kernel == 0:
        what = "reference fallback"
    else:
        what = f"kernels ({kernel} of {calls} calls; the rest fall back)"
    captured = " (captured in the graph)" if mode == "graph" else ""
    return {"path": f"{what} via {route}{captured}", **counts}


def _time_modes(
    stock, patched, steps, shapes, seed, modes, *, cuda: bool, rounds: int, runtime=None
) -> dict:
    import torch

    from workers.gates import timing as T

    out: dict = {}
    for step in steps:
        out[step] = {}
        for mode in modes:
            if mode == "graph" and not cuda:
                out[step][mode] = {"skipped": "CUDA graphs need a GPU"}
                continue
            t0 = time.perf_counter()
            if runtime is not None:
                runtime.reset_counts()
            try:
                with torch.inference_mode():
                    fns = {}
                    for name, model in (("stock", stock), ("patched", patched)):
                        _prepare(model, step, shapes, seed)
                        target = torch.compile(model, dynamic=False) if mode == "compile" else model
                        fn = _step_fn(target, step, steps)
                        for _ in range(2):  # compile / warm up
                            fn()
                        if cuda:
                            torch.cuda.synchronize()
                        fns[name] = _graphed(fn) if mode == "graph" else fn
                    sampler = _cuda_sampler if cuda else _cpu_sampler
                    probe = sampler(fns["stock"], 1)()
                    reps = max(1, min(50, int(20.0 / max(probe, 1e-3))))
                    samplers = {name: sampler(fn, reps) for name, fn in fns.items()}
                    for s in samplers.values():  # settle clocks and caches
                        s()
                    # No other process's kernels on the device meanwhile (workers.device_lock).
                    with device_lock.held(device_lock.inherited() if cuda else None):
                        samples = T.paired_rounds(samplers, rounds)
            except Exception as exc:  # noqa: BLE001 - one mode failing is evidence, not a crash
                out[step][mode] = {"error": f"{type(exc).__name__}: {exc}"[:500]}
                continue
            paired = T.paired_speedup(samples["stock"], samples["patched"], seed=seed)
            served = patched_path(runtime.coverage(), mode) if runtime is not None else None
            out[step][mode] = {
                "patched_path": served,
                "stock_ms": float(_median(samples["stock"])),
                "patched_ms": float(_median(samples["patched"])),
                "speedup": paired.get("speedup"),
                "ci95": paired.get("ci95"),
                "rounds": rounds,
                "steps_per_sample": reps,
                "wall_s": round(time.perf_counter() - t0, 2),
            }
    return out


def _median(values):
    ordered = sorted(values)
    n = len(ordered)
    return (ordered[n // 2] + ordered[(n - 1) // 2]) / 2


def timing_method(cuda: bool) -> str:
    if not cuda:
        return (
            "CPU wall clock around a batch of steps (interpreted kernels: not a performance "
            "measurement)"
        )
    return (
        "CUDA events around a batch of steps (graph: replays of one captured step); stock and "
        "patched in paired interleaved rounds, median and the paired speedup's bootstrap 95% CI"
    )


# --------------------------------------------------------------------------------- the check


def run_check(request: dict) -> dict:
    """Run the model check (see the module docstring); a JSON-able report."""
    t_start = time.perf_counter()
    platform = request.get("platform", "interpret")
    if platform == "interpret":
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    from workers.runtime import decoder as D
    from workers.runtime import ops
    from workers.runtime.patch import patch_model, unpatch_model

    cuda = platform == "cuda"
    device = "cuda" if cuda else "cpu"
    config_name = request.get("config", "tiny")
    cfg = D.config_get(config_name)
    dtype = request.get("dtype") or ("bfloat16" if cuda else "float32")
    shapes = request.get("shapes") or DEFAULT_SHAPES.get(
        config_name if isinstance(config_name, str) else "", DEFAULT_SHAPES["tiny"]
    )
    seed = int(request.get("seed", 0))
    under = request.get("under_check")
    under_compile = request.get("under_compile") or "auto"
    rt, unknown = runtime_from(request.get("kernels") or [], platform)
    tolerance = next(
        (k.get("tolerance") for k in request.get("kernels") or [] if k.get("digest") == under),
        None,
    )
    report: dict = {
        "platform": platform,
        "config": cfg.to_dict(),
        "config_name": config_name if isinstance(config_name, str) else None,
        "dtype": dtype,
        "shapes": shapes,
        "under_check": under,
        "under_compile": under_compile,
        "unknown_operators": unknown,
        "skipped_kernels": [
            {"kind": k.get("kind"), "reason": k["skipped"]}
            for k in request.get("kernels") or []
            if k.get("skipped")
        ],
    }

    stock = D.build(cfg, dtype=_torch_dtype(dtype), device=device, seed=seed)
    steps = _steps(stock, shapes, seed, device)
    stock_out = _outputs(stock, steps, shapes, seed)
    high = None
    if dtype != "float32" or not cuda:
        high_model = copy.deepcopy(stock).to(torch.float64 if not cuda else torch.float32)
        high = _outputs(high_model, steps, shapes, seed)
        del high_model
    with ops.using(rt):
        patch = patch_model(stock, runtime=rt, under_compile=under_compile)
        patched_out = _outputs(stock, steps, shapes, seed)
        rt.shadow_wait()
        coverage = rt.coverage()
        restored = unpatch_model(stock)
    again = _outputs(stock, steps, shapes, seed)
    unpatch_exact = all(torch.equal(again[s]["logits"], stock_out[s]["logits"]) for s in stock_out)
    agreement = _agreement(stock_out, patched_out, high, tolerance, dtype)
    served: dict[str, int] = {}
    for row in coverage.values():
        for sig in row["signatures"]:
            if sig["artifact"]:
                served[sig["artifact"]] = served.get(sig["artifact"], 0) + sig["calls"]
    report.update(
        patch=patch.to_dict(),
        coverage=coverage,
        served=served,
        agreement=agreement,
        unpatch={"restored": restored, "outputs_identical": unpatch_exact},
    )

    want_time = request.get("time", cuda)
    modes = [m for m in request.get("modes") or MODES if m in MODES]
    if want_time:
        patched_model = copy.deepcopy(stock)
        with ops.using(rt):
            patch_model(patched_model, runtime=rt, under_compile=under_compile)
            report["timing"] = _time_modes(
                stock, patched_model, steps, shapes, seed, modes, cuda=cuda,
                rounds=int(request.get("rounds", 10 if cuda else 3)), runtime=rt,
            )  # fmt: skip
            unpatch_model(patched_model)
        report["timing_method"] = timing_method(cuda)
    else:
        report["timing"] = {
            "skipped": "times are not measured on the interpreter (it measures numpy, not kernels)"
            if not cuda
            else "not requested"
        }
    report["fingerprint"] = _fingerprint(platform)
    report.update(_verdict(report, under, cuda))
    report["wall_s"] = round(time.perf_counter() - t_start, 2)
    return report


def _verdict(report: dict, under: str | None, cuda: bool) -> dict:
    agreement = report["agreement"]
    raised = [
        sig for row in report["coverage"].values() for sig in row["signatures"] if sig.get("failed")
    ]
    if raised:
        sig = raised[0]
        return {
            "verdict": "fail",
            "reason": f"kernel {sig['failed'][:12]} raised on {sig['signature']}: {sig['error']}",
        }
    if not report["unpatch"]["outputs_identical"]:
        return {"verdict": "fail", "reason": "unpatching did not restore the stock outputs"}
    if not agreement["ok"]:
        bad = [s for s, row in agreement["steps"].items() if not row["within_tolerance"]]
        row = agreement["steps"][bad[0]]
        return {
            "verdict": "fail",
            "reason": f"{bad[0]} logits out of tolerance: max |patched - stock| "
            f"{row['max_abs_err']:.3g} ({row['rule']})",
        }
    worst = _slowest(report.get("timing") or {}) if cuda else None
    if worst is not None and worst[2] < 1.0 / (1.0 + LATENCY_TOLERANCE):
        step, mode, top = worst
        return {
            "verdict": "fail",
            "reason": f"patched {step} step slower than stock in {mode} mode (speedup CI top "
            f"{top:.3f} < {1 / (1 + LATENCY_TOLERANCE):.3f})",
        }
    calls = sum(r["calls"] for r in report["coverage"].values())
    kernel = sum(r["kernel_calls"] for r in report["coverage"].values())
    summary = (
        f"outputs agree ({', '.join(_agree_text(s, r) for s, r in agreement['steps'].items())}); "
        f"kernels served {kernel} of {calls} patched calls"
    )
    if cuda and report.get("timing"):
        summary += "; " + _time_text(report["timing"])
    if under and not report["served"].get(under):
        return {
            "verdict": "pass",
            "exercised": False,
            "reason": "the decoder's shapes never reached this artifact's region, so the check "
            f"proves nothing about it; {summary}",
        }
    return {"verdict": "pass", "exercised": bool(under), "reason": summary}


def _agree_text(step: str, row: dict) -> str:
    return f"{step} max |Δ| {row['max_abs_err']:.2g}, top-1 {row['top1_agreement']:.0%}"


def _slowest(timing: dict):
    worst = None
    for step, modes in timing.items():
        if not isinstance(modes, dict):
            continue
        for mode, row in modes.items():
            ci = (row or {}).get("ci95") if isinstance(row, dict) else None
            if ci and (worst is None or ci[1] < worst[2]):
                worst = (step, mode, ci[1])
    return worst


def _time_text(timing: dict) -> str:
    parts = []
    for step, modes in timing.items():
        if not isinstance(modes, dict):
            continue
        for mode, row in modes.items():
            if isinstance(row, dict) and row.get("speedup"):
                served = (row.get("patched_path") or {}).get("path", "")
                stock_code = " (stock code)" if served.startswith("stock code") else ""
                parts.append(f"{step} {mode} ×{row['speedup']:.2f}{stock_code}")
    return "step time " + ", ".join(parts) if parts else "no step time measured"


def _fingerprint(platform: str) -> dict:
    from workers.fingerprint import collect

    return {k: v for k, v in collect(platform).items() if k != "executable"}


def template_kernels(kinds) -> list[dict]:
    """Kernels for ``kinds`` from the template generator's defaults on each kind's contract
    (trusted catalog sources, traced here): what the GPU bench serves when no registry does.

    A kind no template fits yet comes back as ``{"kind", "skipped": why}`` (no source):
    ``run_check`` serves nothing for it (its calls fall back to the reference) and lists it
    under ``skipped_kernels``."""
    from workers.runtime import ops
    from workers.search.generators.template import render
    from workers.search.trace import NoTemplate, trace_problem

    out = []
    for kind in kinds:
        problem = ops.KINDS[kind].problem_source()
        try:
            source = render(trace_problem(problem), {})
        except NoTemplate as exc:
            out.append({"kind": kind, "skipped": f"no template fits its contract: {exc}"})
            continue
        out.append({"kind": kind, "source": source, "problem_source": problem})
    return out


def _serve(request: dict) -> dict:
    return run_check(request)


if __name__ == "__main__":
    # Run behind the sandbox by the registry's worker: kernel code runs here, not in the portal.
    from workers.confined import serve_json

    serve_json(_serve)
