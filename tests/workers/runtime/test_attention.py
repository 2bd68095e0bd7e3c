"""The ``attention`` operator kind (grouped-query causal attention over a KV cache): registered
with a fake, its reference keeps the ``gqa_attention`` catalog contract, the decoder's attention
core is the module ``patch_model`` recognises (its inner softmax left alone), a patched decoder
with no region for it falls back per shape to the stock outputs bit for bit, and one with a region
serves the kernel module on the cache's strided slices."""

import math

import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from workers.catalog import catalog_get
from workers.runtime import decoder, ops
from workers.runtime.kinds import kind_of
from workers.runtime.model_check import run_check, template_kernels
from workers.runtime.patch import is_patched, patch_model, unpatch_model

GQA = decoder.DecoderConfig(num_heads=4, num_kv_heads=2)  # two query heads per KV head

# The reference in the KernelBench ModelNew format: what a region serves in these tests.
MODEL_NEW = catalog_get("gqa_attention").problem_source().replace("class Model(", "class ModelNew(")


def _catalog_model(hq, hkv, d):
    namespace: dict = {}
    source = catalog_get("gqa_attention").problem_source()
    exec(compile(source, "gqa_attention.py", "exec"), namespace)  # the trusted catalog source
    return namespace["Model"](hq, hkv, d)


def _qkv(b, hq, hkv, tq, tk, d, *, cache_len=None, dtype=torch.float32):
    """q, and k / v as the decoder hands them: slices of a longer static cache (strided)."""
    g = torch.Generator().manual_seed(tq * 100 + tk)
    q = torch.randn(b, hq, tq, d, generator=g, dtype=dtype)
    cache = cache_len or tk + 7
    k = torch.randn(b, hkv, cache, d, generator=g, dtype=dtype)[:, :, :tk]
    v = torch.randn(b, hkv, cache, d, generator=g, dtype=dtype)[:, :, :tk]
    return q, k, v


def test_the_kind_is_registered_with_a_fake_and_named_in_the_catalog():
    assert "attention" in ops.KINDS and ops.OPERATORS["attention"] is ops.attention
    assert kind_of("GQA-attention") == kind_of("sdpa") == "attention"
    entry = catalog_get("gqa_attention")
    assert entry.family == "attention"
    assert ops.KINDS["attention"].problem_source() == entry.problem_source()
    q, k, v = _qkv(2, 4, 2, 3, 9, 8)
    with FakeTensorMode() as mode:
        fq, fk, fv = (mode.from_tensor(t) for t in (q, k, v))
        out = torch.ops.ke.attention(fq, fk, fv)
    assert out.shape == q.shape and out.dtype == q.dtype


@pytest.mark.parametrize(("tq", "tk"), [(1, 9), (3, 9), (9, 9)], ids=["decode", "chunk", "prefill"])
@pytest.mark.parametrize(("hq", "hkv"), [(4, 2), (4, 4), (4, 1)])
def test_the_reference_keeps_the_catalog_contract(tq, tk, hq, hkv):
    q, k, v = _qkv(2, hq, hkv, tq, tk, 8)
    want = _catalog_model(hq, hkv, 8)(q, k, v)
    got = ops.attention_reference(q, k, v)
    assert got.shape == want.shape == (2, hq, tq, 8)
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    # bottom-right causal: the first query of a chunk does not see the keys after its position
    later = k.clone()
    later[:, :, tk - tq + 1 :] += 1.0
    first = ops.attention_reference(q, later, v)[:, :, 0]
    assert torch.equal(first, got[:, :, 0]) or tq == 1


def test_the_binding_takes_the_cache_slices_as_they_come():
    q, k, v = _qkv(2, 4, 2, 1, 9, 8)
    assert not k.is_contiguous()
    b = ops.KINDS["attention"].bind(q, k, v)
    assert b.constants == {
        "batch": 2, "num_heads": 4, "num_kv_heads": 2, "q_len": 1, "kv_len": 9, "head_dim": 8,
    }  # fmt: skip
    assert all(x is y for x, y in zip(b.inputs, (q, k, v), strict=True))
    assert (b.params, b.out_shape) == ({}, None)


def _old_attention_forward(self, x, cos, sin, start):
    """The decoder's attention before its core became a module (the formula, verbatim)."""
    b, t, _ = x.shape
    cfg, hd = self.cfg, self.cfg.head_dim
    q = self.q_proj(x).view(b, t, cfg.num_heads, hd).transpose(1, 2)
    k = self.k_proj(x).view(b, t, cfg.num_kv_heads, hd).transpose(1, 2)
    v = self.v_proj(x).view(b, t, cfg.num_kv_heads, hd).transpose(1, 2)
    q = q * cos + decoder._rotate_half(q) * sin
    k = k * cos + decoder._rotate_half(k) * sin
    end = start + t
    self.k_cache[:b, :, start:end] = k
    self.v_cache[:b, :, start:end] = v
    keys = self.k_cache[:b, :, :end]
    values = self.v_cache[:b, :, :end]
    groups = cfg.num_heads // cfg.num_kv_heads
    if groups > 1:
        keys = keys.repeat_interleave(groups, dim=1)
        values = values.repeat_interleave(groups, dim=1)
    scores = torch.matmul(q, keys.transpose(2, 3)) * (1.0 / math.sqrt(hd))
    if t > 1:
        rows = torch.arange(start, end, device=x.device)[:, None]
        cols = torch.arange(end, device=x.device)[None, :]
        scores = scores.masked_fill(cols > rows, float("-inf"))
    probs = torch.softmax(scores.float(), dim=-1).to(q.dtype)
    out = torch.matmul(probs, values).transpose(1, 2).reshape(b, t, -1)
    return self.o_proj(out)


def _prefill_then_decode(model, batch=2, tokens=5, seed=3):
    g = torch.Generator().manual_seed(seed)
    prefill = torch.randint(0, model.cfg.vocab_size, (batch, tokens), generator=g)
    step = torch.randint(0, model.cfg.vocab_size, (batch, 1), generator=g)
    model.allocate_cache(batch)
    with torch.inference_mode():
        return model(prefill, 0), model(step, tokens)


@pytest.mark.parametrize("cfg", ["tiny", GQA], ids=["tiny", "gqa"])
def test_the_decoder_with_its_core_module_gives_the_old_outputs_bit_for_bit(cfg):
    model = decoder.build(cfg)
    core = model.layers[0].self_attn.core
    assert isinstance(core, decoder.CoreAttention) and isinstance(core.softmax, torch.nn.Softmax)
    assert core.scale == 1.0 / math.sqrt(core.head_dim)
    new = _prefill_then_decode(model)
    for layer in model.layers:
        layer.self_attn.forward = _old_attention_forward.__get__(layer.self_attn)
    old = _prefill_then_decode(model)
    assert all(torch.equal(a, b) for a, b in zip(new, old, strict=True))


def test_patch_recognises_the_core_skips_its_softmax_and_unpatch_restores():
    model = decoder.build(GQA)
    rt = ops.OpRuntime()
    with ops.using(rt):
        report = patch_model(model, kinds=["attention", "softmax"], runtime=rt)
    assert report.counts() == {"attention": 2}
    skipped = {r["module"]: r["reason"] for r in report.skipped}
    assert skipped["layers.0.self_attn.core.softmax"] == "inside a patched attention"
    assert skipped["layers.1.self_attn.core.softmax"] == "inside a patched attention"
    assert unpatch_model(model) == 2 and not is_patched(model)
    # attention not wanted: its softmax is patched as a softmax
    with ops.using(rt):
        assert patch_model(model, kinds=["softmax"], runtime=rt).counts() == {"softmax": 2}
    unpatch_model(model)


def test_a_core_whose_scale_or_heads_break_the_contract_is_skipped_with_why():
    model = decoder.build("tiny")
    model.layers[0].self_attn.core.scale = 0.5
    model.layers[1].self_attn.core.num_kv_heads = 3
    report = patch_model(model, kinds=["attention"], runtime=ops.OpRuntime())
    assert report.counts() == {}
    skipped = {r["module"]: r["reason"] for r in report.skipped}
    assert "scale 0.5 is not a float 1/sqrt(head_dim)" in skipped["layers.0.self_attn.core"]
    assert "not a multiple" in skipped["layers.1.self_attn.core"]


@pytest.mark.parametrize("cfg", ["tiny", GQA], ids=["tiny", "gqa"])
def test_no_region_falls_back_per_shape_to_the_stock_outputs_exactly(cfg):
    model = decoder.build(cfg)
    stock = _prefill_then_decode(model)
    rt = ops.OpRuntime()
    with ops.using(rt):
        patch_model(model, kinds=["attention"], runtime=rt)
        patched = _prefill_then_decode(model)
    assert all(torch.equal(a, b) for a, b in zip(patched, stock, strict=True))
    cov = rt.coverage()["attention"]
    assert (cov["calls"], cov["kernel_calls"], cov["via_op"]) == (4, 0, 0)
    sigs = {s["signature"]: s for s in cov["signatures"]}
    hq, hkv, d = model.cfg.num_heads, model.cfg.num_kv_heads, model.cfg.head_dim
    assert set(sigs) == {
        f"float32 [[2, {hq}, 5, {d}], [2, {hkv}, 5, {d}], [2, {hkv}, 5, {d}]]",
        f"float32 [[2, {hq}, 1, {d}], [2, {hkv}, 6, {d}], [2, {hkv}, 6, {d}]]",
    }
    assert {s["reason"] for s in sigs.values()} == {"no region serves this operator"}
    unpatch_model(model)


@pytest.mark.parametrize("cfg", ["tiny", GQA], ids=["tiny", "gqa"])
def test_a_served_region_runs_the_kernel_module_on_the_cache_slices(cfg):
    model = decoder.build(cfg)
    stock = _prefill_then_decode(model)
    rt = ops.OpRuntime()
    rt.serve("attention", source=MODEL_NEW)
    with ops.using(rt):
        report = patch_model(model, runtime=rt)
        assert report.counts() == {"attention": 2}
        patched = _prefill_then_decode(model)
        # autograd on: the same calls through torch.ops.ke.attention
        model.allocate_cache(2)
        q, k, v = _qkv(2, model.cfg.num_heads, model.cfg.num_kv_heads, 1, 6, model.cfg.head_dim)
        torch.testing.assert_close(
            torch.ops.ke.attention(q, k, v), ops.attention_reference(q, k, v)
        )
    for a, b in zip(patched, stock, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    cov = rt.coverage()["attention"]
    assert cov["calls"] == cov["kernel_calls"] == 5 and cov["via_op"] == 1
    assert {s["path"] for s in cov["signatures"]} == {"default"}
    unpatch_model(model)


def test_a_kind_with_no_template_is_skipped_by_the_model_check(monkeypatch):
    from workers.search import trace
    from workers.search.lowering import NoTemplate

    real = trace.trace_problem

    def no_attention(problem):
        if "grouped-query" in problem.lower():
            raise NoTemplate("2 matrix products in the reference; templates fuse one")
        return real(problem)

    monkeypatch.setattr(trace, "trace_problem", no_attention)
    (entry,) = template_kernels(["attention"])
    assert entry["kind"] == "attention" and "no template fits" in entry["skipped"]
    assert "source" not in entry
    report = run_check({"platform": "interpret", "config": "tiny", "kernels": [entry]})
    assert report["verdict"] == "pass", report["reason"]
    assert report["skipped_kernels"] == [{"kind": "attention", "reason": entry["skipped"]}]
    assert report["patch"]["counts"] == {}
