"""The model check on a GPU host: a Llama-style decoder stock vs patched, three modes, and the
added dispatch cost per call of each route to a kernel (the lean eager route a patched module
takes, ``torch.ops.ke``) against a direct kernel launch.

Needs only torch and triton (no Django, no portal). Kernels: the template generator's defaults
for each kind (rendered here from the kinds' contracts), or ``--kernel KIND=FILE`` sources.

    python scripts/bench_model_gpu.py --platform cuda --out bench-model-h200.json
    python scripts/bench_model_gpu.py --platform interpret --config tiny   # a CPU smoke run

Prints a table (step x mode: stock ms, patched ms, speedup, 95% CI, and what served the patched
model: kernels via the lean route, via ``torch.ops.ke``, or the stock code under compile, as
``--under-compile`` says) and writes the JSON report (with the fingerprint) to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KINDS = "rms_norm,residual_rms_norm,softmax,silu_and_mul,attention"


def dispatch_overhead(source: str, x, eps: float, *, cuda: bool, calls: int) -> dict:
    """Host time per call (eager) and device time per call (graph) of an RMSNorm on ``x`` by
    each route, against the kernel module's own forward on the problem's 2-D input:

    - ``direct``: ``ModelNew.forward`` with its weight bound once (the floor);
    - ``lean``: ``ops.call`` (the route a patched module takes in eager inference);
    - ``patched``: a patched ``RMSNorm`` module called as the decoder calls it (``Module`` call,
      the compile and autograd checks, ``ops.call``); ``stock``: the same module unpatched;
    - ``ke_op``: ``torch.ops.ke.rms_norm`` (the dispatcher route compiled graphs take).

    ``added_*``: each route minus ``direct``; ``patched_vs_stock_host``: the stock module's host
    time over the patched one's (above 1: patching saves host time per call in eager mode)."""
    import torch

    from workers.runtime import decoder, ops
    from workers.runtime.patch import patch_model

    rt = ops.OpRuntime(platform="cuda" if cuda else "interpret")
    rt.serve("rms_norm", source=source)
    hidden = x.shape[-1]
    stock = decoder.RMSNorm(hidden, eps).to(device=x.device, dtype=x.dtype)
    patched = decoder.RMSNorm(hidden, eps).to(device=x.device, dtype=x.dtype)
    with ops.using(rt), torch.inference_mode():
        patch_model(patched, runtime=rt)
        args = (x, patched.weight, eps)
        torch.ops.ke.rms_norm(*args)
        (launcher,) = rt.launchers.values()
        kernel = launcher.serve  # the _KernelCall: parameters bound by position, then forward
        kernel(args)  # binds the weight
        forward, flat = kernel.forward, x.reshape(-1, hidden)
        sides = {
            "direct": lambda: forward(flat),
            "lean": lambda: ops.call("rms_norm", args),
            "patched": lambda: patched(x),
            "stock": lambda: stock(x),
            "ke_op": lambda: torch.ops.ke.rms_norm(*args),
        }
        out: dict = {"kind": "rms_norm", "shape": list(x.shape), "dtype": str(x.dtype)}
        host: dict = {name: [] for name in sides}
        for _ in range(5):  # the routes interleaved, so drift hits them alike
            for name, fn in sides.items():
                for _ in range(20):
                    fn()
                if cuda:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                host[name].append((time.perf_counter() - t0) * 1e6 / calls)
                if cuda:
                    torch.cuda.synchronize()
        for name in sides:
            out[f"{name}_host_us"] = statistics.median(host[name])
        if cuda:
            for name, fn in sides.items():
                stream = torch.cuda.Stream()
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    fn()
                torch.cuda.current_stream().wait_stream(stream)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    for _ in range(calls):
                        fn()
                dev = []
                for _ in range(5):
                    s = torch.cuda.Event(enable_timing=True)
                    e = torch.cuda.Event(enable_timing=True)
                    s.record()
                    graph.replay()
                    e.record()
                    torch.cuda.synchronize()
                    dev.append(s.elapsed_time(e) * 1e3 / calls)
                out[f"{name}_graph_us"] = statistics.median(dev)
        for name in ("lean", "patched", "ke_op"):
            out[f"added_{name}_host_us"] = out[f"{name}_host_us"] - out["direct_host_us"]
            if cuda:
                out[f"added_{name}_graph_us"] = out[f"{name}_graph_us"] - out["direct_graph_us"]
        out["patched_vs_stock_host"] = out["stock_host_us"] / out["patched_host_us"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--platform", default="cuda", choices=["cuda", "interpret"])
    parser.add_argument("--config", default=None, help="default: llama3-8b-4l on cuda, else tiny")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--kinds", default=KINDS, help="kinds served by template kernels")
    parser.add_argument("--kernel", action="append", default=[], help="KIND=FILE")
    parser.add_argument("--modes", default="eager,compile,graph")
    parser.add_argument(
        "--under-compile",
        default="auto",
        choices=["auto", "stock", "kernel"],
        help="what torch.compile sees of a patched module (default auto: the stock code, as no "
        "template kernel is marked as beating compile)",
    )
    parser.add_argument(
        "--beats-compile",
        default="",
        help="comma-separated kinds whose kernel a campaign measured faster than compile: with "
        "--under-compile auto, compiled models call their operator (the registry marks it so)",
    )
    parser.add_argument("--rounds", type=int, default=0)
    parser.add_argument("--prefill", default=None, help="BATCH,TOKENS")
    parser.add_argument("--decode", default=None, help="BATCH,POSITION")
    parser.add_argument("--no-overhead", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    cuda = args.platform == "cuda"
    if not cuda:
        os.environ["TRITON_INTERPRET"] = "1"
    import torch

    from workers.runtime.model_check import DEFAULT_SHAPES, run_check, template_kernels

    config = args.config or ("llama3-8b-4l" if cuda else "tiny")
    kernels = template_kernels([k for k in args.kinds.split(",") if k])
    for spec in args.kernel:
        kind, _, path = spec.partition("=")
        kernels = [k for k in kernels if k["kind"] != kind]
        kernels.append({"kind": kind, "source": Path(path).read_text()})
    beats = {k for k in args.beats_compile.split(",") if k}
    for k in kernels:
        k["beats_compile"] = k["kind"] in beats
    for k in kernels:
        if k.get("skipped"):
            print(f"{k['kind']}: not served (the reference serves its calls): {k['skipped']}")
    shapes = dict(DEFAULT_SHAPES.get(config, DEFAULT_SHAPES["tiny"]))
    if args.prefill:
        shapes["prefill"] = [int(x) for x in args.prefill.split(",")]
    if args.decode:
        shapes["decode"] = [int(x) for x in args.decode.split(",")]
    request = {
        "platform": args.platform,
        "config": config,
        "dtype": args.dtype,
        "kernels": kernels,
        "modes": args.modes.split(","),
        "shapes": shapes,
        "time": True,
        "under_compile": args.under_compile,
    }
    if args.rounds:
        request["rounds"] = args.rounds
    t0 = time.perf_counter()
    report = run_check(request)
    if not args.no_overhead:
        device = "cuda" if cuda else "cpu"
        dtype = torch.bfloat16 if cuda else torch.float32
        hidden = report["config"]["hidden_size"]
        batch = shapes["decode"][0]
        # A decode step's norm input: (sequences, 1 token, hidden), reshaped to rows per call.
        x = torch.randn(batch, 1, hidden, device=device, dtype=dtype)
        source = next(k["source"] for k in kernels if k["kind"] == "rms_norm")
        report["dispatch_overhead"] = [
            dispatch_overhead(
                source, x, report["config"]["rms_eps"], cuda=cuda, calls=200 if cuda else 5
            )
        ]
    report["bench_wall_s"] = round(time.perf_counter() - t0, 1)
    report["command"] = " ".join(["python", *sys.argv])
    print(f"verdict: {report['verdict']}: {report['reason']}")
    print(
        f"{'step':8} {'mode':8} {'stock ms':>10} {'patched ms':>11} {'speedup':>8} {'95% CI':>16}"
        "  patched served by"
    )
    for step, modes in (report.get("timing") or {}).items():
        if not isinstance(modes, dict):
            continue
        for mode, row in modes.items():
            if not isinstance(row, dict) or "stock_ms" not in row:
                print(f"{step:8} {mode:8} {row.get('skipped') or row.get('error')}")
                continue
            ci = row["ci95"]
            served = row.get("patched_path") or {}
            print(
                f"{step:8} {mode:8} {row['stock_ms']:10.4f} {row['patched_ms']:11.4f} "
                f"{row['speedup']:8.3f} {ci[0]:7.3f}-{ci[1]:.3f}  {served.get('path', '?')} "
                f"({served.get('calls', 0)} calls, {served.get('via_op', 0)} via torch.ops.ke)"
            )
    for kind, row in (report.get("coverage") or {}).items():
        for sig in row["signatures"]:
            print(f"  {kind:18} {sig['signature']:32} launch: {sig.get('launch', '?')}")
    for row in report.get("dispatch_overhead", []):
        print(f"dispatch cost per call, rms_norm {row['shape']} {row['dtype']} (us):")
        for name in ("direct", "lean", "patched", "stock", "ke_op"):
            graph = row.get(f"{name}_graph_us")
            added = row.get(f"added_{name}_host_us")
            print(
                f"  {name:8} host {row[f'{name}_host_us']:9.2f}"
                + (f"  added {added:8.2f}" if added is not None else " " * 17)
                + (f"  graph {graph:8.3f}" if graph is not None else "")
                + (
                    f"  added {row[f'added_{name}_graph_us']:7.3f}"
                    if f"added_{name}_graph_us" in row
                    else ""
                )
            )
        print(f"  stock / patched host time per call: {row['patched_vs_stock_host']:.2f}x")
    fp = report.get("fingerprint") or {}
    print("fingerprint:", {k: fp.get(k) for k in ("device", "driver", "cuda", "torch", "triton")})
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=str))
        print(f"wrote {args.out}")
    return 0 if report["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
