"""torch.ops.ke: registered operators with fake implementations, routing resolved once per
shape, per-shape fallback with its reason, canary share, shadow mismatches off the hot path,
a raising kernel falling back, no graph break under torch.compile(fullgraph=True), and the lean
eager route (ops.call) reaching the same launchers without the dispatcher."""

import pytest
import torch

from tests.registry import helpers
from workers.runtime import ops

RMSNORM_GOOD = (helpers.CANDIDATES / "rmsnorm_good.py").read_text()
RMS_SCOPE = {"dtypes": ["float32"], "inputs": [[[1, 8], [16, 128]]]}
SOFTMAX_SCOPE = {"dtypes": ["float32"], "inputs": [[[1, 64], [8, 128]]]}


def _runtime(**kw):
    rt = ops.OpRuntime()
    rt.serve("softmax", source=helpers.SOFTMAX_GOOD, scope=SOFTMAX_SCOPE, **kw)
    return rt


def test_every_kind_is_a_registered_operator_that_passes_opcheck():
    rt = ops.OpRuntime()  # nothing served: the references answer, the fakes are checked
    x = torch.randn(3, 16)
    w = torch.rand(16) + 0.5
    samples = {
        "rms_norm": (x, w, 1e-6),
        "layer_norm": (x, w, torch.randn(16), 1e-5),
        "softmax": (x,),
        "silu": (x,),
        "silu_and_mul": (x, torch.randn(3, 16)),
        "residual_rms_norm": (x, torch.randn(3, 16), w, 1e-6),
        "cross_entropy": (x, torch.randint(0, 16, (3,))),
        # q, and k / v as strided slices of a longer KV cache
        "attention": (
            torch.randn(2, 4, 3, 8),
            torch.randn(2, 2, 12, 8)[:, :, :7],
            torch.randn(2, 2, 12, 8)[:, :, :7],
        ),
    }
    assert set(samples) == set(ops.KINDS)
    with ops.using(rt):
        for kind, args in samples.items():
            op = getattr(torch.ops.ke, kind).default
            torch.library.opcheck(op, args)
            assert torch.allclose(op(*args), ops.KINDS[kind].reference(*args))


def test_routing_is_per_shape_with_fallbacks_counted_and_explained():
    rt = _runtime()
    with ops.using(rt):
        inside = torch.randn(2, 3, 40)
        out = torch.ops.ke.softmax(inside)
        torch.testing.assert_close(out, torch.softmax(inside, -1))
        for _ in range(3):
            torch.ops.ke.softmax(torch.randn(2, 300))  # dim 300: outside the scope
        torch.ops.ke.softmax(torch.randn(2, 40, dtype=torch.float64))  # dtype outside
    cov = rt.coverage()["softmax"]
    assert (cov["calls"], cov["kernel_calls"]) == (5, 1)
    by_sig = {s["signature"]: s for s in cov["signatures"]}
    assert by_sig["float32 [[6, 40]]"]["path"] == "default"
    assert by_sig["float32 [[2, 300]]"]["calls"] == 3
    assert by_sig["float32 [[2, 300]]"]["reason"] == "outside every region's scope"
    assert by_sig["float64 [[2, 40]]"]["path"] == "fallback"
    # Resolved once per signature: three calls of one shape made one launcher.
    assert len(rt.launchers) == 3


def test_a_float_argument_the_kernel_was_not_evaluated_with_falls_back():
    rt = ops.OpRuntime()
    rt.serve("rms_norm", source=RMSNORM_GOOD, scope=RMS_SCOPE)
    x, w = torch.randn(4, 32), torch.rand(32) + 0.5
    with ops.using(rt):
        torch.testing.assert_close(
            torch.ops.ke.rms_norm(x, w, 1e-6), ops.rms_norm_reference(x, w, 1e-6)
        )
        torch.ops.ke.rms_norm(x, w, 1e-3)
    sigs = {s["path"]: s for s in rt.coverage()["rms_norm"]["signatures"]}
    assert "differs from the region's contract" in sigs["fallback"]["reason"]
    assert sigs["default"]["calls"] == 1


def test_canary_serves_its_share_and_shadow_mismatches_are_caught_off_the_hot_path():
    rt = ops.OpRuntime()
    rt.serve("softmax", source=helpers.SOFTMAX_GOOD, scope=SOFTMAX_SCOPE, stage="canary",
             canary_percent=25.0)  # fmt: skip
    rt.serve("softmax", source=helpers.SOFTMAX_WRONG_SHORT_ROWS, scope=SOFTMAX_SCOPE,
             stage="shadow", shadow_rate=0.5)  # fmt: skip
    x = torch.randn(4, 40)
    with ops.using(rt):
        outs = [torch.ops.ke.softmax(x) for _ in range(8)]
        rt.shadow_wait()
    # The caller never sees the wrong shadow's output.
    for out in outs:
        torch.testing.assert_close(out, torch.softmax(x, -1))
    canary_launchers = [ln for ln in rt.launchers.values()]
    # Two routes for one kind: the first in scope (the canary one) serves.
    assert sum(ln.canary_calls for ln in canary_launchers) == 2
    assert rt.shadow_results == [], "the shadow sits on the second route: not reached"
    rt2 = ops.OpRuntime()
    rt2.serve("softmax", source=helpers.SOFTMAX_WRONG_SHORT_ROWS, scope=SOFTMAX_SCOPE,
              stage="shadow", shadow_rate=0.5)  # fmt: skip
    with ops.using(rt2):
        for _ in range(4):
            torch.testing.assert_close(torch.ops.ke.softmax(x), torch.softmax(x, -1))
        rt2.shadow_wait()
    assert len(rt2.shadow_results) == 2
    assert all(
        r["mismatch"] and "out of tolerance" in r["mismatch"]["reason"] for r in rt2.shadow_results
    )


def test_a_kernel_that_raises_falls_back_for_that_shape_and_says_why():
    broken = helpers.SOFTMAX_GOOD.replace("out = torch.empty_like(x)", "raise RuntimeError('boom')")
    rt = ops.OpRuntime()
    rt.serve("softmax", source=broken, scope=SOFTMAX_SCOPE)
    x = torch.randn(3, 40)
    with ops.using(rt):
        torch.testing.assert_close(torch.ops.ke.softmax(x), torch.softmax(x, -1))
        torch.ops.ke.softmax(x)
    (sig,) = rt.coverage()["softmax"]["signatures"]
    assert sig["errors"] == 1 and sig["path"] == "fallback" and "boom" in sig["error"]
    assert sig["failed"] is not None


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_no_graph_break_under_torch_compile_fullgraph(backend):
    rt = _runtime()
    torch._dynamo.reset()

    def f(x):
        return torch.ops.ke.softmax(x * 2.0) + 1.0

    compiled = torch.compile(f, fullgraph=True, backend=backend)
    x = torch.randn(4, 40)
    with ops.using(rt):
        torch.testing.assert_close(compiled(x), torch.softmax(x * 2.0, -1) + 1.0)
    assert rt.coverage()["softmax"]["kernel_calls"] == 1


def test_the_lean_route_serves_the_same_launcher_as_the_operator_without_the_dispatcher():
    rt = _runtime()
    x = torch.randn(2, 3, 40)
    with ops.using(rt):
        via_op = torch.ops.ke.softmax(x)
        lean = [ops.call("softmax", (x,)) for _ in range(3)]
    for out in lean:
        assert torch.equal(out, via_op) and out.shape == x.shape
    (launcher,) = rt.launchers.values()
    assert launcher.plain and launcher.calls == 4
    cov = rt.coverage()["softmax"]
    assert (cov["calls"], cov["kernel_calls"], cov["via_op"]) == (4, 4, 1)


def test_a_cute_kernel_on_a_client_without_the_dsl_falls_back_and_says_why(monkeypatch):
    """A CuTe DSL artifact is served like a Triton one; a client without nvidia-cutlass-dsl
    keeps serving the reference for it and says why, instead of failing on import."""
    from workers.search.generators.templates import cute_row

    monkeypatch.setattr(ops.cute_dsl, "available", lambda: False)
    rt = ops.OpRuntime()
    rt.serve("softmax", source=cute_row.render("softmax"), scope=SOFTMAX_SCOPE)
    x = torch.randn(3, 40)
    with ops.using(rt):
        torch.testing.assert_close(torch.ops.ke.softmax(x), torch.softmax(x, -1))
    (sig,) = rt.coverage()["softmax"]["signatures"]
    assert sig["path"] == "fallback" and sig["errors"] == 0
    assert sig["reason"] == (
        "the kernel is written for CuTe DSL and nvidia-cutlass-dsl is not installed here"
    )
