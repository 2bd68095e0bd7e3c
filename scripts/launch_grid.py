"""Time launch variants of one rendered candidate against torch.compile, in one process.

A measuring tool, outside the gates: it says which launch of a template is worth seeding; the
bench (``bench_kernelbench.py``) gives the verdicts. Each variant is a JSON object with a
``name`` and any of ``table`` (the candidate's ``_TABLE``: "M,N,dtype" -> launch), ``params``
(rendered from the problem with these template parameters instead of ``--candidate``) and
``patch`` (pairs of [old, new] source text, each of which must occur). Every variant is
checked against the problem's reference first (a wrong one is reported, not timed). Timing:
a CUDA graph of 4 x 8 calls over 8 input sets (rotated, so most reads miss the L2), 60
rounds, the order shuffled each round; the median per call. It runs the problem and the
variants in this process, not behind the sandbox the gates use: use it on problems you trust.

    python scripts/launch_grid.py --problem P.py --shapes '[[128,128,255]]' --init '[1]' \\
        --variants V.json --out grid.json [--candidate C.py]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the compute core (workers)
SETS, CALLS, ROUNDS = 8, 4, 60


def _source(variant: dict, problem: str, candidate: str | None) -> str:
    if "params" in variant:
        from workers.search.generators.template import render
        from workers.search.trace import trace_problem

        src = render(trace_problem(problem), variant["params"])
    else:
        with open(candidate) as fh:
            src = fh.read()
    for old, new in variant.get("patch", []):
        if old not in src:
            raise SystemExit(f"{variant['name']}: the patch's text is not in the source: {old!r}")
        src = src.replace(old, new)
    return src


def _graph(torch, fn, sets):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for x in sets:
            fn(*x)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS):
            for x in sets:
                fn(*x)
    return graph


def main(argv=None) -> int:
    import torch

    from workers.contract.problem import load_module

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", required=True)
    ap.add_argument("--shapes", required=True, help="JSON list of input shapes (torch.rand)")
    ap.add_argument("--init", default="[]", help="JSON list: the model's constructor arguments")
    ap.add_argument("--variants", required=True)
    ap.add_argument("--candidate", help="a rendered candidate (variants without params)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    with open(args.problem) as fh:
        problem = fh.read()
    with open(args.variants) as fh:
        variants = json.load(fh)
    init = json.loads(args.init)
    folder = tempfile.mkdtemp(prefix="launch-grid-")
    sets = [[torch.rand(*s, device="cuda") for s in json.loads(args.shapes)] for _ in range(SETS)]
    ref = load_module(problem, "grid_reference", folder).Model(*init).cuda()
    want = ref(*sets[0])
    fns = {"eager": ref, "compile": torch.compile(ref)}
    faults = {}
    for i, v in enumerate(variants):
        module = load_module(_source(v, problem, args.candidate), f"grid_variant_{i}", folder)
        if hasattr(module, "_TABLE"):
            module._TABLE = dict(v.get("table", {}))
            module._CONFIGS.clear()
        model = module.ModelNew(*init).cuda()
        try:
            got = model(*sets[0])
            torch.cuda.synchronize()
        except Exception as exc:  # noqa: BLE001 - reported per variant
            faults[v["name"]] = repr(exc)[:300]
            continue
        if not torch.allclose(got, want, rtol=1e-3, atol=1e-4):
            faults[v["name"]] = f"wrong: max error {float((got - want).abs().max()):.3g}"
            continue
        fns[v["name"]] = model
    graphs = {name: _graph(torch, fn, sets) for name, fn in fns.items()}
    times: dict[str, list[float]] = {name: [] for name in graphs}
    order = list(graphs)
    for _ in range(ROUNDS):
        random.shuffle(order)
        for name in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graphs[name].replay()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) * 1e3 / (CALLS * SETS))
    median = {name: statistics.median(v) for name, v in times.items()}
    for name, us in sorted(median.items(), key=lambda kv: kv[1]):
        print(f"{name:40s} {us:8.2f} us  {median['compile'] / us:6.3f}x of compile")
    for name, why in faults.items():
        print(f"{name:40s} {why}")
    report = {
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "median_us": median,
        "faults": faults,
    }
    with open(args.out, "w") as fh:
        json.dump(report, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
