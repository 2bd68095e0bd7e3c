"""patch_model / unpatch_model on the repository's decoder: the one call swaps the recognised
modules for torch.ops.ke operators (coverage counted per kind and shape), eager calls take the
lean route (no dispatcher) with the same outputs and counts as the operator's, torch.compile
sees the stock code by default and the kernel when asked (no graph break either way), and
unpatching gives back the stock model exactly."""

import pytest
import torch

from tests.registry import helpers
from workers.runtime import decoder, ops
from workers.runtime.patch import is_patched, patch_model, unpatch_model

RMSNORM_GOOD = (helpers.CANDIDATES / "rmsnorm_good.py").read_text()


def _runtime():
    rt = ops.OpRuntime()
    rt.serve("rms_norm", source=RMSNORM_GOOD, problem_source=helpers.PROBLEMS.joinpath(
        "rms_norm.py").read_text())  # fmt: skip
    rt.serve("softmax", source=helpers.SOFTMAX_GOOD,
             scope={"dtypes": ["float32"], "inputs": [[[1, 8], [8, 96]]]})  # fmt: skip
    return rt


def _run(model, tokens, start=0):
    model.allocate_cache(tokens.shape[0])
    with torch.inference_mode():
        return model(tokens, start)


def test_patch_swaps_served_kinds_reports_coverage_and_unpatch_restores_exactly():
    model = decoder.build("tiny")
    tokens = torch.randint(0, 128, (4, 1))
    stock = _run(model, tokens, 0)
    forwards = {n: type(m).forward for n, m in model.named_modules()}
    state = {k: v.clone() for k, v in model.state_dict().items()}
    rt = _runtime()
    with ops.using(rt):
        report = patch_model(model, runtime=rt)
        # Only the kinds the runtime serves: 2 layers x input norm + the final norm; 2 softmax.
        assert report.counts() == {"rms_norm": 3, "softmax": 2}
        skipped = {r["module"]: r["reason"] for r in report.skipped}
        assert skipped["layers.0.post_attention_layernorm"] == "no region serves this kind"
        assert skipped["loss_fn"] == "no region serves this kind"
        patched = _run(model, tokens, 0)
        # A prefill of 5 tokens: softmax rows of 5 keys fall outside the region (dim 8-96).
        _run(model, torch.randint(0, 128, (1, 5)), 0)
    torch.testing.assert_close(patched, stock, atol=1e-4, rtol=1e-4)
    cov = rt.coverage()
    assert cov["rms_norm"]["calls"] == cov["rms_norm"]["kernel_calls"] == 6
    assert cov["rms_norm"]["via_op"] == 0, "inference calls take the lean route"
    soft = {s["signature"]: s for s in cov["softmax"]["signatures"]}
    assert soft["float32 [[8, 1]]"]["path"] == "fallback"  # decode at position 0: 1 key
    assert soft["float32 [[10, 5]]"]["reason"] == "outside every region's scope"

    assert unpatch_model(model) == 5 and not is_patched(model)
    assert {n: type(m).forward for n, m in model.named_modules()} == forwards
    assert all("forward" not in vars(m) for m in model.modules())
    assert all(torch.equal(state[k], v) for k, v in model.state_dict().items())
    assert torch.equal(_run(model, tokens, 0), stock)


def test_the_lean_eager_route_gives_the_operators_outputs_and_counts():
    model = decoder.build("tiny")
    tokens = torch.randint(0, 128, (4, 1))
    rt = _runtime()
    with ops.using(rt):
        patch_model(model, runtime=rt)
        lean = _run(model, tokens, 10)  # inference mode: ops.call, no dispatcher
        lean_cov = rt.coverage()
        rt.reset_counts()
        model.allocate_cache(4)
        with torch.no_grad():
            for p in model.parameters():
                p.requires_grad_(True)
        op = model(tokens, 10).detach()  # autograd on: torch.ops.ke
    assert torch.equal(lean, op)
    op_cov = rt.coverage()
    for kind in ("rms_norm", "softmax"):
        assert lean_cov[kind]["calls"] == op_cov[kind]["calls"] > 0
        assert lean_cov[kind]["kernel_calls"] == op_cov[kind]["kernel_calls"] > 0
        assert (lean_cov[kind]["via_op"], op_cov[kind]["via_op"]) == (0, op_cov[kind]["calls"])
    assert len(rt.launchers) == 2, "one launcher per signature (norm, softmax) for both routes"


def test_patch_all_kinds_and_compile_fullgraph_sees_the_stock_code_by_default():
    model = decoder.build("tiny")
    tokens = torch.randint(0, 128, (4, 5))
    model.allocate_cache(4)
    with torch.inference_mode():
        stock = model(tokens, 0, labels=tokens)
    rt = ops.OpRuntime()  # nothing served: every call is a reference fallback
    with ops.using(rt):
        report = patch_model(model, kinds="all", runtime=rt)
        assert report.counts() == {
            "rms_norm": 3, "residual_rms_norm": 2, "attention": 2, "silu_and_mul": 2,
            "cross_entropy": 1,
        }  # fmt: skip
        assert set(report.under_compile().values()) == {"stock"}
        assert {r["module"] for r in report.skipped} == {
            "layers.0.mlp.act_fn",
            "layers.1.mlp.act_fn",
            "layers.0.self_attn.core.softmax",
            "layers.1.self_attn.core.softmax",
        }
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        model.allocate_cache(4)
        with torch.inference_mode():
            logits, loss = compiled(tokens, 0, labels=tokens)
    torch.testing.assert_close(logits, stock[0])
    torch.testing.assert_close(loss, stock[1])
    assert rt.coverage() == {}, "the compiled graph holds the stock code, no torch.ops.ke"
    assert unpatch_model(model) == 10


@pytest.mark.parametrize("how", ["option", "region"])
def test_under_compile_kernel_serves_the_kernel_through_the_operator(how):
    model = decoder.build("tiny")
    tokens = torch.randint(0, 128, (4, 1))
    stock = _run(model, tokens, 0)
    rt = _runtime()
    if how == "region":  # the region says its kernel beat compile in a model: "auto" keeps it
        rt.routes["rms_norm"][0].beats_compile = True
    with ops.using(rt):
        option = "kernel" if how == "option" else "auto"
        report = patch_model(model, runtime=rt, under_compile=option)
        assert report.under_compile()["rms_norm"] == "kernel"
        assert report.under_compile()["softmax"] == ("kernel" if how == "option" else "stock")
        torch._dynamo.reset()
        compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
        model.allocate_cache(4)
        with torch.inference_mode():
            logits = compiled(tokens, 0)
    torch.testing.assert_close(logits, stock, atol=1e-4, rtol=1e-4)
    cov = rt.coverage()
    assert cov["rms_norm"]["kernel_calls"] == cov["rms_norm"]["via_op"] == 3
    assert ("softmax" in cov) == (how == "option")
    unpatch_model(model)


def test_patch_refuses_an_unknown_under_compile():
    with pytest.raises(ValueError, match="under_compile"):
        patch_model(decoder.build("tiny"), runtime=_runtime(), under_compile="fastest")
