"""The model check on a GPU host: a Llama-style decoder stock vs patched, three modes, and the
added dispatch cost per call of ``torch.ops.ke`` against a direct kernel launch.

Needs only torch and triton (no Django, no portal). Kernels: the template generator's defaults
for each kind (rendered here from the kinds' contracts), or ``--kernel KIND=FILE`` sources.

    python scripts/bench_model_gpu.py --platform cuda --out bench-model-h200.json
    python scripts/bench_model_gpu.py --platform interpret --config tiny   # a CPU smoke run

Prints a table (step x mode: stock ms, patched ms, speedup, 95% CI) and writes the JSON report
(with the environment fingerprint) to ``--out``.
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

KINDS = "rms_norm,residual_rms_norm,softmax,silu_and_mul"


def dispatch_overhead(kind: str, source: str, args: tuple, *, cuda: bool, calls: int) -> dict:
    """Host time per call (eager) and device time per call (graph): ``torch.ops.ke.<kind>``
    against the kernel module's own forward with the same arguments."""
    import torch

    from workers.runtime import ops

    rt = ops.OpRuntime(platform="cuda" if cuda else "interpret")
    rt.serve(kind, source=source)
    with ops.using(rt), torch.inference_mode():
        op = ops.KINDS[kind].op
        op(*args)
        launcher = next(iter(rt.launchers.values()))
        direct_call = launcher.serve  # the _KernelCall: bind + ModelNew.forward
        b = ops.KINDS[kind].bind(*args)
        for (owner, name), t in zip(direct_call.params, b.params.values(), strict=True):
            owner._parameters[name] = t
        forward, inputs = direct_call.forward, b.inputs
        sides = {"direct": lambda: forward(*inputs), "ke_op": lambda: op(*args)}
        out: dict = {"kind": kind, "shapes": [list(a.shape) for a in args if hasattr(a, "shape")]}
        for name, fn in sides.items():
            for _ in range(20):
                fn()
            if cuda:
                torch.cuda.synchronize()
            host = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                host.append((time.perf_counter() - t0) * 1e6 / calls)
                if cuda:
                    torch.cuda.synchronize()
            out[f"{name}_host_us"] = statistics.median(host)
            if cuda:
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
        out["added_host_us"] = out["ke_op_host_us"] - out["direct_host_us"]
        if cuda:
            out["added_graph_us"] = out["ke_op_graph_us"] - out["direct_graph_us"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--platform", default="cuda", choices=["cuda", "interpret"])
    parser.add_argument("--config", default=None, help="default: llama3-8b-4l on cuda, else tiny")
    parser.add_argument("--dtype", default=None)
    parser.add_argument("--kinds", default=KINDS, help="kinds served by template kernels")
    parser.add_argument("--kernel", action="append", default=[], help="KIND=FILE")
    parser.add_argument("--modes", default="eager,compile,graph")
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
        x = torch.randn(batch, hidden, device=device, dtype=dtype)
        w = torch.ones(hidden, device=device, dtype=dtype)
        source = next(k["source"] for k in kernels if k["kind"] == "rms_norm")
        report["dispatch_overhead"] = [
            dispatch_overhead(
                "rms_norm", source, (x, w, report["config"]["rms_eps"]), cuda=cuda,
                calls=200 if cuda else 5,
            )
        ]  # fmt: skip
    report["bench_wall_s"] = round(time.perf_counter() - t0, 1)
    report["command"] = " ".join(["python", *sys.argv])
    print(f"verdict: {report['verdict']}: {report['reason']}")
    print(
        f"{'step':8} {'mode':8} {'stock ms':>10} {'patched ms':>11} {'speedup':>8} {'95% CI':>16}"
    )
    for step, modes in (report.get("timing") or {}).items():
        if not isinstance(modes, dict):
            continue
        for mode, row in modes.items():
            if not isinstance(row, dict) or "stock_ms" not in row:
                print(f"{step:8} {mode:8} {row.get('skipped') or row.get('error')}")
                continue
            ci = row["ci95"]
            print(
                f"{step:8} {mode:8} {row['stock_ms']:10.4f} {row['patched_ms']:11.4f} "
                f"{row['speedup']:8.3f} {ci[0]:7.3f}-{ci[1]:.3f}"
            )
    for row in report.get("dispatch_overhead", []):
        print("dispatch overhead:", json.dumps({k: v for k, v in row.items()}, default=str))
    fp = report.get("fingerprint") or {}
    print("fingerprint:", {k: fp.get(k) for k in ("device", "driver", "cuda", "torch", "triton")})
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, default=str))
        print(f"wrote {args.out}")
    return 0 if report["verdict"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
