"""The model check on the interpreter: a good RMSNorm kernel agrees with the stock decoder and
is exercised; a kernel with the wrong epsilon is caught by the logits; the CLI writes JSON; the
timings say what served the patched model in each mode."""

import json
import subprocess
import sys

from tests.registry import helpers
from workers.runtime.model_check import run_check

RMS_PROBLEM = (helpers.PROBLEMS / "rms_norm.py").read_text()
RMS_TEMPLATE_LIKE = (helpers.CANDIDATES / "rmsnorm_good.py").read_text()


def _request(source, digest="a" * 64):
    return {
        "platform": "interpret",
        "config": "tiny",
        "kernels": [
            {
                "operator": "rms-norm",
                "source": source,
                "problem_source": RMS_PROBLEM,
                "digest": digest,
            },
            {
                "operator": "softmax",
                "source": helpers.SOFTMAX_GOOD,
                "digest": "b" * 64,
                "scope": {"dtypes": ["float32"], "inputs": [[[5, 8], [40, 96]]]},
            },
        ],  # fmt: skip
        "under_check": digest,
    }


def test_a_good_kernel_passes_with_agreement_and_coverage():
    report = run_check(_request(RMS_TEMPLATE_LIKE))
    assert report["verdict"] == "pass", report["reason"]
    assert report["exercised"] is True
    assert report["served"]["a" * 64] == report["coverage"]["rms_norm"]["calls"] > 0
    assert report["served"]["b" * 64] == 2  # the decode step's two softmax calls (8 rows x 48)
    for row in report["agreement"]["steps"].values():
        assert row["within_tolerance"] and row["top1_agreement"] == 1.0
    assert report["unpatch"] == {"restored": 5, "outputs_identical": True}
    assert "not measured on the interpreter" in report["timing"]["skipped"]


def test_a_wrong_kernel_fails_on_the_logits():
    wrong = RMS_TEMPLATE_LIKE.replace("/ n_cols + eps)", "/ n_cols + eps * 1e5)")
    assert wrong != RMS_TEMPLATE_LIKE
    report = run_check(_request(wrong))
    assert report["verdict"] == "fail"
    assert "logits out of tolerance" in report["reason"]


def test_cli_writes_the_report(tmp_path):
    out = tmp_path / "check.json"
    proc = subprocess.run(
        [sys.executable, "-m", "workers.runtime", "model-check", "--templates", "softmax",
         "--kernel", f"rms_norm={helpers.CANDIDATES / 'rmsnorm_good.py'}", "--out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=helpers.ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["verdict"] == "pass"
    assert report["coverage"]["rms_norm"]["kernel_calls"] > 0
    assert report["coverage"]["softmax"]["kernel_calls"] > 0


def test_the_report_says_what_served_the_patched_model_in_each_mode():
    request = {**_request(RMS_TEMPLATE_LIKE), "time": True, "modes": ["eager", "compile"]}
    report = run_check({**request, "rounds": 2})
    assert report["under_compile"] == "auto"
    assert report["patch"]["under_compile"] == {"rms_norm": "stock", "softmax": "stock"}
    for step in ("prefill", "decode"):
        eager = report["timing"][step]["eager"]["patched_path"]
        assert eager["path"].endswith("via the lean eager route"), eager
        assert eager["kernel_calls"] > 0 and eager["via_op"] == 0
        compiled = report["timing"][step]["compile"]["patched_path"]
        assert compiled["calls"] == 0 and compiled["path"].startswith("stock code"), compiled
