"""Small suite-run documents shaped like the rows ``scripts/bench_kernelbench.py`` writes (a
hand-made excerpt: six problems, one of each kind a run has)."""

import copy

FINGERPRINT = {
    "platform": "cuda",
    "device": "NVIDIA H100 80GB HBM3",
    "driver": "580.159.04",
    "cuda": "13.0",
    "torch": "2.11.0+cu130",
    "triton": "3.6.0",
    "python": "3.12.3",
}


def _node(key, status, speedup, candidate_us=None, compile_us=None, gate=None, reason=""):
    return {
        "id": key,
        "status": status,
        "edge": "seed",
        "params": {"block": 1024, "warps": 4},
        "failed_gate": gate,
        "reason": reason,
        "fitness": None if speedup is None else {"speedup": speedup, "baseline": "compile"},
        "timed": []
        if candidate_us is None
        else [
            {
                "case": "kb_scaled",
                "candidate_us": candidate_us,
                "baselines_us": {"eager": compile_us * 1.01, "compile": compile_us},
                "floor_us": 2.5,
                "bytes": 33554432,
            }
        ],
    }


REGRESSION = "fitness: [regression] speedup 0.974x over compile but case kb_scaled regresses"

CUDA_DOC = {
    "meta": {
        "kernelbench_commit": "423217d9fda91e0c2d67e4a43bf62f96f6d104f1",
        "argv": ["scripts/bench_kernelbench.py", "--platform", "cuda", "--out", "/tmp/kb.json"],
        "platform": "cuda",
        "baseline": "compile",
        "max_elements": 4194304,
        "candidates": 3,
        "started_at": "2026-12-05T19:46:38Z",
        "done": 6,
        "of": 6,
    },
    "rows": [
        {
            "fits": True,
            "family": "elementwise",
            "summary": "elementwise relu",
            "result": "accepted",
            "outcome": "improved",
            "evaluated": 2,
            "accepted": 1,
            "first_failure": {"node": "n1", "gate": "fitness", "reason": "recheck disagrees"},
            # n1 measured faster but was rejected: the run's speedup is the accepted n2's.
            "nodes": [
                _node("n1", "rejected", 1.2, 8.0, 9.6, gate="fitness"),
                _node("n2", "accepted", 1.05, 10.0, 10.5),
            ],
            "best_speedup": 1.2,
            "fingerprint": FINGERPRINT,
            "wall_s": 40.1,
            "problem": "19_ReLU.py",
            "process_wall_s": 41.99,
        },
        {
            "fits": True,
            "family": "row",
            "summary": "softmax over the last dim",
            "result": "accepted",
            "outcome": "improved",
            "evaluated": 3,
            "accepted": 2,
            "first_failure": None,
            "nodes": [
                _node("n1", "accepted", 1.4, 20.0, 28.0),
                _node("n2", "accepted", 1.6, 17.5, 28.0),
            ],
            "best_speedup": 1.6,
            "fingerprint": {**FINGERPRINT, "device": "a later row's device"},
            "problem": "23_Softmax.py",
            "process_wall_s": 60.5,
        },
        {
            "fits": True,
            "family": "elementwise",
            "summary": "elementwise swish",
            "result": "rejected",
            "outcome": "budget_exhausted",
            "evaluated": 3,
            "accepted": 0,
            "first_failure": {"node": "n1", "gate": "fitness", "reason": REGRESSION},
            "nodes": [_node("n1", "rejected", 0.974, 10.3, 10.0, gate="fitness")],
            "best_speedup": 0.974,
            "problem": "25_Swish.py",
            "process_wall_s": 32.73,
        },
        {
            "fits": False,
            "family": None,
            "summary": "no template fits: the reference uses convolution.default (a convolution);"
            " no template fits",
            "result": "no_template",
            "wall_s": 1.61,
            "problem": "50_conv_standard_2D__square_input__square_kernel.py",
            "process_wall_s": 2.85,
        },
        {
            "fits": False,
            "family": None,
            "summary": "no template fits: the reference uses cumsum.default, which no template "
            "expresses",
            "result": "no_template",
            "problem": "89_cumsum.py",
            "process_wall_s": 2.1,
        },
        {
            "fits": True,
            "family": "row",
            "summary": "cross entropy",
            "result": "error",
            "error": "timed out after 240s (baseline and first candidates at 239s)",
            "log_tail": "...",
            "problem": "95_CrossEntropyLoss.py",
            "process_wall_s": 240.3,
        },
    ],
}


def cuda_doc() -> dict:
    """A fresh copy of the cuda run (tests may break it)."""
    return copy.deepcopy(CUDA_DOC)


def interpret_doc() -> dict:
    """The same problems on the interpreter: nothing timed, accepted means correct."""
    doc = cuda_doc()
    doc["meta"].update(platform="interpret", baseline=None, max_elements=None)
    for row in doc["rows"]:
        row.pop("best_speedup", None)
        for node in row.get("nodes", []):
            node["fitness"], node["timed"] = None, []
        if "fingerprint" in row:
            row["fingerprint"] = {"platform": "interpret", "device": "cpu (Triton interpreter)"}
    return doc
