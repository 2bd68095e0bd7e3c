"""The back-end table (issue 15): which candidates it re-times, and how it reads their cases."""

from __future__ import annotations

from workers import constants as C
from workers.search.bench_backends import _summarise, best_by_backend, markdown

TRITON = "import triton\n\nclass ModelNew: ...\n"
CUTE = 'BACKEND = "cute"\n\nclass ModelNew: ...\n'
MIXED = 'BACKEND = "cute+triton"\n\nclass ModelNew: ...\n'


def _node(nid, source, status, speedup, failed_gate=None):
    return {"id": nid, "source": source, "status": status, "failed_gate": failed_gate,
            "fitness": {"speedup": speedup}}  # fmt: skip


def test_it_takes_each_back_ends_best_timed_candidate_accepted_first():
    campaign = {
        "nodes": [
            _node("n1", TRITON, C.REJECTED, 1.4, C.GATE_FITNESS),  # fast on its timed cases
            _node("n2", TRITON, C.ACCEPTED, 1.1),
            _node("n3", CUTE, C.REJECTED, 1.2, C.GATE_PERFORMANCE),
            _node("n4", CUTE, C.REJECTED, 9.0, C.GATE_CORRECTNESS),  # wrong: never timed
            _node("n5", MIXED, C.ACCEPTED, 1.3),
        ]
    }
    picked = {backend: node["id"] for backend, node in best_by_backend(campaign).items()}
    assert picked == {C.BACKEND_TRITON: "n2", C.BACKEND_CUTE: "n3", C.BACKEND_MIXED: "n5"}


def test_each_case_compares_the_best_of_ours_with_the_strongest_peer():
    rows = {
        "long": {"weight": 1, "compile": [0.060, 0.062, 0.058], "incumbent": [0.040, 0.041],
                 "triton": 0.045, "cute": 0.032, "floor_ms": 0.024},
        "short": {"weight": 1, "compile": [0.010], "triton": 0.008},
    }  # fmt: skip
    cases = _summarise(rows)
    assert cases["long"]["compile"] == 0.060 and cases["long"]["best_peer"] == 0.0405
    assert cases["long"]["speedup_vs_best_peer"] == round(0.0405 / 0.032, 4)
    assert cases["long"]["bandwidth_fraction"] == 0.75
    assert cases["short"]["speedup_vs_best_peer"] == 1.25  # no incumbent there: compile
    text = markdown({"cases": cases})
    assert "| long | 60.0 us | 40.5 us | 45.0 us | 32.0 us | - | 1.266x | 0.75 |" in text
