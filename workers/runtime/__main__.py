"""Command line: ``python -m workers.runtime replay ...`` and the ``scope`` helper.

``model-check`` runs the decoder stock vs patched with kernels (``workers.runtime.model_check``);
``replay`` drives a dispatch client against a portal with a workload's shape distribution;
``scope`` reads ``{"problem_source", "cases"}`` JSON on stdin and prints the derived region
scope (the portal runs it in a child process so problem code never runs in the web server).
"""

from __future__ import annotations

import argparse
import json
import sys


def _replay(args) -> int:
    from workers.runtime.client import DispatchClient
    from workers.runtime.manifest import ManifestSource
    from workers.runtime.replay import replay

    source = ManifestSource(args.url, args.token, platform=args.platform, cache_dir=args.cache_dir)
    if args.problem:
        with open(args.problem) as fh:
            problem_source = fh.read()
        workload = json.load(open(args.workload)) if args.workload else None
    else:
        _, _, op = source.request(f"/api/registry/operators/{args.operator}/traffic/")
        problem_source, workload = op["problem_source"], op["workload"]
    client = DispatchClient(
        args.url,
        args.token,
        platform=args.platform,
        cache_dir=args.cache_dir,
        poll_interval_s=args.poll_interval,
        report_interval_s=args.report_interval,
        seed=args.seed,
    )
    try:
        summary = replay(
            client,
            operator=args.operator,
            problem_source=problem_source,
            workload=workload,
            calls=args.calls,
            seed=args.seed,
            duration_s=args.duration,
        )
    finally:
        client.close()
    print(json.dumps({**summary.to_dict(), "serving": client.serving(args.operator)}, indent=2))
    return 0


def _scope(_args) -> int:
    from workers.runtime.scope import derive

    request = json.load(sys.stdin)
    print(json.dumps(derive(request["problem_source"], request["cases"])))
    return 0


def _model_check(args) -> int:
    import os

    if args.platform == "interpret":  # before triton is first imported
        os.environ["TRITON_INTERPRET"] = "1"
    from workers.runtime import ops
    from workers.runtime.model_check import run_check, template_kernels

    kinds = [k for k in (args.templates or "").split(",") if k]
    kernels = template_kernels(kinds)
    for spec in args.kernel or []:
        kind, _, path = spec.partition("=")
        if kind not in ops.KINDS:
            raise SystemExit(f"--kernel {spec}: no kind {kind!r} ({', '.join(ops.KINDS)})")
        with open(path) as fh:
            kernels.append({"kind": kind, "source": fh.read()})
    request = {
        "platform": args.platform,
        "config": args.config,
        "dtype": args.dtype,
        "kernels": kernels,
        "modes": args.modes.split(","),
        "seed": args.seed,
    }
    if args.time is not None:
        request["time"] = args.time
    if args.rounds:
        request["rounds"] = args.rounds
    report = run_check(request)
    text = json.dumps(report, indent=1, default=str)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
    print(json.dumps({k: report[k] for k in ("verdict", "reason", "wall_s")}, indent=1))
    return 0 if report["verdict"] == "pass" else 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workers.runtime", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("replay", help="replay a workload's traffic through a dispatch client")
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--token", required=True, help="API token (manage.py or /api/auth/token/)")
    p.add_argument("--operator", required=True, help="problem name, e.g. softmax")
    p.add_argument("--platform", default="interpret", choices=["interpret", "cuda"])
    p.add_argument("--calls", type=int, default=200)
    p.add_argument("--duration", type=float, default=None, help="seconds (instead of --calls)")
    p.add_argument("--problem", help="problem file (default: fetched from the portal)")
    p.add_argument("--workload", help="workload JSON file (with --problem)")
    p.add_argument("--cache-dir", default=".kernelevolve-runtime")
    p.add_argument("--poll-interval", type=float, default=10.0)
    p.add_argument("--report-interval", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=None, help="default: a fresh one")
    p.set_defaults(func=_replay)
    m = sub.add_parser("model-check", help="a decoder, stock vs patched with kernels (JSON)")
    m.add_argument("--platform", default="interpret", choices=["interpret", "cuda"])
    m.add_argument("--config", default="tiny", help="decoder config: tiny, small, llama3-8b-4l")
    m.add_argument("--dtype", default=None, help="default: bfloat16 on cuda, float32 otherwise")
    m.add_argument("--templates", default="rms_norm,softmax", help="kinds served by template "
                   "kernels (comma-separated; '' for none)")  # fmt: skip
    m.add_argument("--kernel", action="append", help="KIND=FILE: serve this ModelNew source")
    m.add_argument("--modes", default="eager,compile,graph")
    m.add_argument("--time", action=argparse.BooleanOptionalAction, default=None,
                   help="time steps (default: on cuda only)")  # fmt: skip
    m.add_argument("--rounds", type=int, default=0)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--out", help="write the JSON report here")
    m.set_defaults(func=_model_check)
    s = sub.add_parser("scope", help="derive a region scope (JSON on stdin)")
    s.set_defaults(func=_scope)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
