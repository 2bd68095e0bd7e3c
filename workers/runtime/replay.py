"""Traffic replay: drive a dispatch client with a workload's shape distribution.

Cases are drawn by weight; each call gets fresh seeded inputs from the problem's
``get_inputs()`` with the case's constants (scaled down on the interpreter the same way the
evaluation core scales them), so shadow and canary stages see real calls in demos and tests.
"""

from __future__ import annotations

import random
import tempfile
import time
from dataclasses import dataclass, field

from workers.contract.workload import parse_workload


@dataclass
class ReplaySummary:
    calls: int = 0
    seconds: float = 0.0
    by_case: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"calls": self.calls, "seconds": round(self.seconds, 3), "by_case": self.by_case}


def replay_cases(problem_source: str, workload: dict | None, platform: str) -> list[dict]:
    """[{"name", "constants", "dtype", "weight"}] with interpreter scaling applied."""
    from workers.contract import problem as P

    parsed = parse_workload(workload)
    with tempfile.TemporaryDirectory(prefix="ke-replay-") as folder:
        module = P.load_module(problem_source, "ke_replay_problem", folder)
        out = []
        for case in parsed.cases:
            used = dict(case.overrides)
            if platform == "interpret":
                used, _ = P.scale_for_interpreter(module, used)
            out.append(
                {"name": case.name, "constants": used, "dtype": case.dtype, "weight": case.weight}
            )
    return out


def replay(
    client,
    *,
    operator: str,
    problem_source: str,
    workload: dict | None,
    calls: int,
    seed: int | None = None,
    duration_s: float | None = None,
    on_call=None,
) -> ReplaySummary:
    """Make ``calls`` calls (or call until ``duration_s`` passes) through ``client``."""
    import torch

    from workers.contract import problem as P

    cases = replay_cases(problem_source, workload, client.platform)
    if seed is None:  # a fresh draw of cases and inputs each replay
        seed = random.randrange(2**31)
    rng = random.Random(seed)
    summary = ReplaySummary()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ke-replay-") as folder:
        module = P.load_module(problem_source, "ke_replay_inputs", folder)
        i = 0
        while True:
            if duration_s is None and i >= calls:
                break
            if duration_s is not None and time.perf_counter() - t0 >= duration_s:
                break
            case = rng.choices(cases, weights=[c["weight"] for c in cases])[0]
            dtype = P.DTYPES.get(case["dtype"]) if case["dtype"] else None
            inputs = P.make_inputs(module, case["constants"], dtype, seed + i, client.device)
            with torch.no_grad():
                client.call(operator, *inputs, constants=case["constants"], case=case["name"])
            summary.by_case[case["name"]] = summary.by_case.get(case["name"], 0) + 1
            summary.calls += 1
            i += 1
            if on_call is not None:
                on_call(i)
    summary.seconds = time.perf_counter() - t0
    return summary
