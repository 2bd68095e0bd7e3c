"""Gate 2 — compile (runs in the sandbox child).

``load`` imports the problem and builds the cases (workload cases, scaled for the interpreter
where needed, plus edge cases). ``run`` imports the candidate, runs its forward once per case
while recording Triton launches and torch ops, and keeps the compiled artifacts: on ``cuda`` the
JIT-compiled kernels of every case; on ``interpret`` an ahead-of-time compile of every launched
specialisation for the named target (TTIR, TTGIR, LLVM IR, PTX, cubin, ptxas resource report).
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import time

import torch

from workers import constants as C
from workers import cute_dsl
from workers.contract import problem as P
from workers.gates.artifacts import cap_ir as _cap
from workers.instrument import OpCensus, TorchOpMode


def _fail(rule: str, reason: str, **evidence) -> dict:
    return {"status": C.FAILED, "rule": rule, "reason": reason, "evidence": evidence}


def _case_label(case: dict) -> str:
    return case["name"]


def load(job, args: dict) -> dict:
    """Import the problem and build the case list."""
    job.problem_name = f"problem_{job.state.jobs}"
    job.problem_hash = hashlib.sha256(args["problem_source"].encode()).hexdigest()
    try:
        job.problem = P.load_module(args["problem_source"], job.problem_name, job.folder)
        job.train = bool(args.get("train"))  # the module's mode (workload "mode")
    except BaseException as exc:  # noqa: BLE001 - any failure of untrusted code
        if isinstance(exc, SystemExit):
            return _fail(C.RULE_PROBLEM_LOAD, f"problem called sys.exit({exc.code}) on import")
        return _fail(C.RULE_PROBLEM_LOAD, f"problem failed to import: {type(exc).__name__}: {exc}")
    job.modules.append(job.problem_name)
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(job.problem, attr):
            return _fail(C.RULE_PROBLEM_LOAD, f"problem defines no {attr}")
    constants = set(vars(job.problem))
    interpret = job.platform == C.PLATFORM_INTERPRET
    cases = []
    for i, raw in enumerate(args["cases"]):
        for key in raw.get("overrides", {}):
            if key not in constants:
                return {
                    "status": C.FAILED,
                    "rule": "workload",
                    "reason": f"cases[{i}].overrides.{key}: the problem has no such constant",
                    "workload_error": True,
                }
        used, scaled = dict(raw.get("overrides", {})), None
        if interpret:
            used, scaled = P.scale_for_interpreter(job.problem, used)
        cases.append(
            {
                "name": raw["name"],
                "kind": C.CASE_WORKLOAD,
                "weight": raw.get("weight", 1.0),
                "overrides": used,
                "dtype": raw.get("dtype"),
                "transform": None,
                "scaled_for_interpreter": scaled,
            }
        )
    if args.get("edge_cases", True) and cases:
        base = max(cases, key=lambda c: c["weight"])
        for edge in P.edge_cases(job.problem, base["overrides"]):
            cases.append(
                {
                    "name": edge["name"],
                    "kind": C.CASE_EDGE,
                    "weight": 0.0,
                    "overrides": edge["overrides"],
                    "dtype": base["dtype"],
                    "transform": edge["transform"],
                    "scaled_for_interpreter": base["scaled_for_interpreter"],
                    "derived_from": base["name"],
                }
            )
    job.cases = cases
    return {"status": C.PASSED, "cases": cases}


def _dtype(case):
    return P.DTYPES.get(case["dtype"]) if case.get("dtype") else None


def import_candidate(job, source: str, label: str):
    name = f"{label}_{job.state.jobs}"
    module = P.load_module(source, name, job.folder)
    job.modules.append(name)
    return module


def run(job, args: dict) -> dict:
    state = job.state
    recorder = state.recorder
    start = time.perf_counter()
    try:
        job.candidate = import_candidate(job, args["candidate_source"], "candidate")
    except SystemExit as exc:
        return _fail(C.RULE_EXIT, f"candidate called sys.exit({exc.code}) on import")
    except BaseException as exc:  # noqa: BLE001
        return _fail(C.RULE_IMPORT, f"candidate failed to import: {type(exc).__name__}: {exc}")
    if not hasattr(job.candidate, "ModelNew"):
        return _fail(C.RULE_IMPORT, "candidate module defines no ModelNew")
    recorder.modules = {job.candidate.__name__}
    cute = state.cute
    if cute is not None:
        # CuTe kernels compile for the device's architecture, or ahead of time for the named
        # target where there is no GPU, and then only compile: nothing runs them there.
        arch = _device_arch() if job.device == "cuda" else _target(args)[1]
        cute.reset(arch=arch, folder=job.folder, compile_only=job.device != "cuda")
    elif cute_dsl.uses_cute(declared := getattr(job.candidate, "BACKEND", C.BACKEND_TRITON)):
        why = state.cute_error or "nvidia-cutlass-dsl is not installed in this environment"
        return _fail(C.RULE_BACKEND, f"the candidate's back end is {declared}, and {why}")
    per_case = {}
    workload_cases = [c for c in job.cases if c["kind"] == C.CASE_WORKLOAD]
    for case in workload_cases:
        recorder.launches = []
        if cute is not None:
            cute.launches = []
        try:
            _, _, model = P.make_models(
                job.problem,
                job.candidate,
                case["overrides"],
                _dtype(case),
                args.get("seed", 0),
                job.device,
                None,
            )
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, SystemExit):
                return _fail(C.RULE_EXIT, f"ModelNew() called sys.exit({exc.code})")
            return _fail(
                C.RULE_INSTANTIATE,
                f"ModelNew(*get_init_inputs()) failed for case {case['name']}: "
                f"{type(exc).__name__}: {exc}",
                case=case["name"],
            )
        inputs = P.make_inputs(
            job.problem, case["overrides"], _dtype(case), args.get("seed", 0), job.device
        )
        mode = TorchOpMode(recorder, poison_variant=0)
        census = OpCensus(recorder)
        recorder.active = True
        if cute is not None:
            cute.active = True
        try:
            with census, torch.no_grad(), mode, mode.host_reads():
                model(*inputs)
            if job.device == "cuda":
                torch.cuda.synchronize()
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, SystemExit):
                return _fail(C.RULE_EXIT, f"forward called sys.exit({exc.code})")
            if isinstance(exc, cute_dsl.CompileFailed):
                return _fail(C.RULE_CUTE_COMPILE, str(exc)[:1500], case=case["name"])
            return _fail(
                C.RULE_FORWARD_ERROR,
                f"forward failed for case {case['name']}: {cute_dsl.clean_error(exc)[:500]}",
                case=case["name"],
            )
        finally:
            recorder.active = False
            if cute is not None:
                cute.active = False
        launches = list(recorder.launches) + (list(cute.launches) if cute is not None else [])
        per_case[case["name"]] = {
            "launches": len(launches),
            "kernels": sorted({launch["kernel"] for launch in launches}),
        }
        if mode.compute_ops:
            ops = ", ".join(f"{k} x{v}" for k, v in sorted(mode.compute_ops.items()))
            return _fail(
                C.RULE_TORCH_COMPUTE,
                f"forward runs torch compute ops outside Triton kernels ({ops}) in case "
                f"{case['name']}",
                case=case["name"],
                ops=mode.compute_ops,
            )
        hidden = census.missed(mode.compute_ops)
        if hidden:
            return _fail(
                C.RULE_INSTRUMENTATION_ESCAPE,
                f"{hidden}, in case {case['name']}",
                case=case["name"],
            )
        if not launches:
            return _fail(
                C.RULE_NO_LAUNCH,
                f"forward launched no Triton or CuTe kernel of the candidate in case "
                f"{case['name']}",
                case=case["name"],
            )
        for launch in launches:
            job.launches.setdefault(launch["key"], launch)
    changed = state.guard.changed()
    if changed:
        return _fail(C.RULE_MONKEY_PATCH, f"candidate rebound {', '.join(changed)}")
    if state.guard.extra_threads() > 0:
        return _fail(
            C.RULE_THREAD, f"candidate left {state.guard.extra_threads()} thread(s) running"
        )
    run_s = time.perf_counter() - start
    triton_launches = {k: v for k, v in job.launches.items() if v.get("backend") != "cute"}
    cute_keys = [k for k in job.launches if k not in triton_launches]
    job.backend = (
        (C.BACKEND_MIXED if triton_launches else C.BACKEND_CUTE) if cute_keys else C.BACKEND_TRITON
    )
    if job.device == "cuda":
        artifacts = [
            _jit_artifact(launch, recorder.compiled.get(key))
            for key, launch in triton_launches.items()
        ]
        mode_name = "jit"
    else:
        try:
            artifacts = _aot_compile(job, args, triton_launches) if triton_launches else []
        except BaseException as exc:  # noqa: BLE001
            return _fail(
                C.RULE_AOT_FAILED,
                f"ahead-of-time compile for {tuple(_target(args))} failed: "
                f"{type(exc).__name__}: {str(exc)[:800]}",
            )
        mode_name = "aot"
    artifacts += [cute.artifacts[k] for k in cute_keys if k in cute.artifacts]
    kernels = sorted({a["kernel"] for a in artifacts})
    backend = f" ({job.backend})" if job.backend != C.BACKEND_TRITON else ""
    return {
        "status": C.PASSED,
        "rule": None,
        "reason": f"{mode_name}{backend}: {len(artifacts)} specialisation(s) of "
        f"{', '.join(kernels)}",
        "evidence": {
            "mode": mode_name,
            "backend": job.backend,
            "cases": per_case,
            "artifacts": artifacts,
            "run_s": run_s,
        },
    }


def _target(args: dict) -> list:
    return list(args.get("aot_target") or C.DEFAULT_AOT_TARGET)


def _device_arch() -> int:
    major, minor = torch.cuda.get_device_capability()
    return major * 10 + minor


def _artifact(launch: dict, asm: dict, target) -> dict:
    cubin = asm.get("cubin") or b""
    if isinstance(cubin, str):
        cubin = cubin.encode()
    out = {
        "kernel": launch["kernel"],
        "signature": launch["signature"],
        "constexprs": launch["constexprs"],
        "options": launch["options"],
        "target": list(target) if target else None,
        "ir": {k: _cap(asm[k]) for k in C.IR_KINDS if isinstance(asm.get(k), str)},
        "ir_chars": {k: len(asm[k]) for k in C.IR_KINDS if isinstance(asm.get(k), str)},
        "cubin_sha256": hashlib.sha256(cubin).hexdigest() if cubin else None,
        "cubin_bytes": len(cubin),
    }
    if cubin and len(cubin) <= C.CUBIN_INLINE_BYTES:
        out["cubin_b64"] = base64.b64encode(cubin).decode()
    return out


def _jit_artifact(launch: dict, kernel) -> dict:
    if kernel is None:
        return {**launch, "ir": {}, "note": "compiled kernel not captured"}
    meta = kernel.metadata
    target = getattr(meta, "target", None)
    out = _artifact(
        launch,
        kernel.asm,
        (target.backend, target.arch, target.warp_size) if target is not None else None,
    )
    out.update(
        {
            "registers": getattr(kernel, "n_regs", None),
            "spills": getattr(kernel, "n_spills", None),
            "shared_bytes": getattr(meta, "shared", None),
            "num_warps": getattr(meta, "num_warps", None),
            "num_stages": getattr(meta, "num_stages", None),
        }
    )
    return out


def _unwrap_jit(obj):
    from triton.runtime.jit import JITFunction

    seen = 0
    while not isinstance(obj, JITFunction) and hasattr(obj, "fn") and seen < 8:
        obj = obj.fn
        seen += 1
    if not isinstance(obj, JITFunction):
        raise TypeError(f"{obj!r} is not a Triton JIT function")
    return obj


_CODE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_AOT_ENTRY = (
    "import runpy, sys; sys.path.insert(0, sys.argv.pop(1)); "
    "runpy.run_module('workers.gates.aot', run_name='__main__', alter_sys=True)"
)


def _aot_compile(job, args: dict, launches: dict) -> list[dict]:
    import json
    import sys

    target = _target(args)
    payload = {
        "candidate_path": os.path.join(job.folder, f"{job.candidate.__name__}.py"),
        "launches": list(launches.values()),
        "target": target,
        "folder": job.folder,
        "writable": job.state.policy.roots,
    }
    env = dict(os.environ)
    env.pop("TRITON_INTERPRET", None)
    policy = job.state.policy
    policy.enforcing = False  # our own trusted helper; it installs the same policy itself
    try:
        proc = subprocess.run(
            # -I: neither the job folder (the candidate can write there) nor PYTHON* variables
            # decide what this trusted helper imports.
            [sys.executable, "-I", "-c", _AOT_ENTRY, _CODE_ROOT],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=env,
            cwd=job.folder,
            timeout=float(args.get("cpu_seconds", 300)),
        )
    finally:
        policy.enforcing = True
    try:
        reply = json.loads(proc.stdout)
    except json.JSONDecodeError as exc:
        raise RuntimeError(f"AOT helper exited {proc.returncode}: {proc.stderr[-1500:]}") from exc
    if "error" in reply:
        raise RuntimeError(reply["error"])
    return reply["artifacts"]
