"""Where a chain candidate's time goes, beside compile's kernels, on the GPU (issue 11).

For each problem: the template's first candidates at the bench's scaled sizes, each timed
whole and stage by stage (CUDA events, median of repeated calls), beside eager, torch.compile
and compile's own kernels (torch.profiler, CUDA time per kernel). A developer's tool: it runs
the problem and its candidates in this process, not behind the sandbox the gates use, so use
it on problems you trust (a KernelBench copy, your own probes).

    python scripts/profile_stages.py --dir .bench/probe --candidates 3 --out stages.json
    # one problem at sizes of your own, parameter sets of your own, the reference checked on
    # the CPU too (a candidate wrong on the GPU only: KernelBench 77's tail case, session 46)
    python scripts/profile_stages.py --dir .bench/kb --only 77_conv_transposed_3D_... \
        --overrides '{"in_channels": 9, "depth": 9, "height": 9, "width": 9, "batch_size": 2}' \
        --params '[{}, {"layout": "cl"}, {"stages": 1}, {"block_k": 16}]' --cpu-check --out d.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _median_us(fn, calls: int = 30) -> float:
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    return round(statistics.median(times), 1)


def _compile_kernels(model, inputs) -> list[dict]:
    """compile's kernels by CUDA time (us per call), the largest first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    calls = 10
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            model(*inputs)
        torch.cuda.synchronize()
    rows = [
        {"kernel": e.key[:90], "us": round(e.device_time_total / calls, 1)}
        for e in prof.key_averages()
        if e.device_time_total > 0
    ]
    return sorted(rows, key=lambda r: -r["us"])[:12]


def _ieee_us(model, inputs) -> float:
    """Eager with cuDNN's float32 convolutions in IEEE products (the precision the correctness
    gate asks of a candidate; cuDNN's default is TF32)."""
    import torch

    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        return _median_us(lambda: model(*inputs))
    finally:
        torch.backends.cudnn.allow_tf32 = before


def _max_err(out, ref) -> float:
    return float((out.double() - ref.double()).abs().max())


def profile_problem(
    source: str, candidates: int, folder: str, params=None, overrides=None, cpu_check=False
) -> dict:
    import torch
    from bench_kernelbench import scaled_workload

    from workers.contract import problem as P
    from workers.search.generators.base import GenerationContext, Proposal
    from workers.search.generators.template import DEFAULTS, TemplateGenerator, render

    workload, _ = scaled_workload(source, 4194304)
    if overrides is None:  # the bench's scaled sizes, else the sizes asked for
        overrides = workload["cases"][0]["overrides"]
    gen = TemplateGenerator()
    proposals = gen.propose(GenerationContext(problem_source=source, workload=workload), candidates)
    if params:  # these parameters over the template's defaults, in place of its proposals
        plan = gen.plan(source, False)
        proposals = [
            Proposal(source=render(plan, {**DEFAULTS[plan.family], **p}), edge="seed", params=p)
            for p in params
        ]
    prob = P.load_module(source, "profiled_problem", folder)
    inputs = P.make_inputs(prob, overrides, torch.float32, 0, "cuda")
    _, ref, _ = P.make_models(prob, None, overrides, torch.float32, 0, "cuda", None)
    compiled = torch.compile(ref)
    with torch.no_grad():
        result = {
            "overrides": overrides,
            "summary": gen.describe(source)["summary"],
            "eager_us": _median_us(lambda: ref(*inputs)),
            "compile_us": _median_us(lambda: compiled(*inputs)),
            "eager_ieee_us": _ieee_us(ref, inputs),
            "compile_kernels": _compile_kernels(compiled, inputs),
            "candidates": [],
        }
        torch.backends.cudnn.allow_tf32 = False
        expected = ref(*inputs)
        if cpu_check and isinstance(expected, torch.Tensor):  # is the device's reference right?
            on_cpu = ref.cpu()(*[t.cpu() if isinstance(t, torch.Tensor) else t for t in inputs])
            ref.to(expected.device)
            result["reference_vs_cpu"] = _max_err(expected.cpu(), on_cpu)
        torch.backends.cudnn.allow_tf32 = True
        for k, proposal in enumerate(proposals):
            cand = P.load_module(proposal.source, f"profiled_{k}", folder)
            _, _, new = P.make_models(prob, cand, overrides, torch.float32, 0, "cuda", None)
            row = {"params": proposal.params, "us": _median_us(lambda n=new: n(*inputs))}
            if isinstance(expected, torch.Tensor):
                row["max_err"] = _max_err(new(*inputs), expected)
            stages = sorted(
                int(name[2:].split("_", 1)[0])
                for name in dir(cand)
                if name.startswith("_s") and name.endswith("_ModelNew")
            )
            outs: list = []
            row["stages"] = []
            for i in stages:
                forward = getattr(cand, f"_s{i}_ModelNew").forward
                given = {f"_ke_s{j}": outs[j] for j in range(i)}
                outs.append(forward(new, *inputs, **given))
                row["stages"].append(
                    {
                        "stage": i,
                        "us": _median_us(lambda f=forward, g=given, n=new: f(n, *inputs, **g)),
                    }
                )
            result["candidates"].append(row)
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="problem files (KernelBench format)")
    ap.add_argument("--only", help="file names, comma-separated")
    ap.add_argument("--candidates", type=int, default=3)
    ap.add_argument(
        "--params", help="a JSON list of parameter sets to time in place of the proposals"
    )
    ap.add_argument("--overrides", help="a JSON object of sizes in place of the scaled ones")
    ap.add_argument(
        "--cpu-check", action="store_true", help="also the device's reference against the CPU's"
    )
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    names = sorted(p.name for p in Path(args.dir).glob("*.py"))
    if args.only:
        names = [n for n in names if n in set(args.only.split(","))]
    report = {}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            try:
                report[name] = profile_problem(
                    (Path(args.dir) / name).read_text(),
                    args.candidates,
                    folder,
                    json.loads(args.params) if args.params else None,
                    json.loads(args.overrides) if args.overrides else None,
                    args.cpu_check,
                )
            except Exception as exc:  # noqa: BLE001 - one problem's failure is its row
                report[name] = {"error": f"{type(exc).__name__}: {exc}"}
            print(name, json.dumps(report[name])[:600], flush=True)
            Path(args.out).write_text(json.dumps(report, indent=1))  # kept if a limit stops it
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
