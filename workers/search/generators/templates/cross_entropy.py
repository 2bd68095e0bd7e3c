"""The ``cross_entropy`` family: per-row log-sum-exp losses and a deterministic reduction."""

from __future__ import annotations

from workers.search.generators.templates.common import _header, _model_head
from workers.search.trace import Plan

_CE_KERNELS = """@triton.jit
def _ke_ce_rows(x_ptr, t_ptr, loss_ptr, valid_ptr, M, V, IGNORE: tl.constexpr,
                BLOCK_V: tl.constexpr, ONLINE: tl.constexpr, SMOOTH: tl.constexpr):
    row = tl.program_id(0)
    base = x_ptr + row.to(tl.int64) * V
    offs = tl.arange(0, BLOCK_V)
    total = 0.0  # the row's sum of logits, for label smoothing
    if ONLINE:
        m = -float("inf")
        s = 0.0
        for start in range(0, V, BLOCK_V):
            cols = start + offs
            x = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), axis=0)
            m = m_new
            if SMOOTH > 0:
                total += tl.sum(tl.where(cols < V, x, 0.0), axis=0)
    else:
        acc = tl.full([BLOCK_V], -float("inf"), tl.float32)
        for start in range(0, V, BLOCK_V):
            cols = start + offs
            x = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
            acc = tl.maximum(acc, x)
        m = tl.max(acc, axis=0)
        sacc = tl.zeros([BLOCK_V], tl.float32)
        for start in range(0, V, BLOCK_V):
            cols = start + offs
            x = tl.load(base + cols, mask=cols < V, other=-float("inf")).to(tl.float32)
            sacc += tl.exp(x - m)
            if SMOOTH > 0:
                total += tl.sum(tl.where(cols < V, x, 0.0), axis=0)
        s = tl.sum(sacc, axis=0)
    tgt = tl.load(t_ptr + row)
    valid = tgt != IGNORE
    safe = tl.where(valid, tgt, 0)
    xt = tl.load(base + safe).to(tl.float32)
    lse = m + tl.log(s)
    # label smoothing e: (1 - e)(lse - x_t) + e (lse - mean x) = lse - (1 - e) x_t - e mean x
    loss = tl.where(valid, lse - (1.0 - SMOOTH) * xt - SMOOTH * (total / V), 0.0)
    tl.store(loss_ptr + row, loss)
    tl.store(valid_ptr + row, valid.to(tl.float32))


@triton.jit
def _ke_ce_reduce(loss_ptr, valid_ptr, out_ptr, M, MEAN: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    total = tl.zeros([BLOCK], tl.float32)
    count = tl.zeros([BLOCK], tl.float32)
    for start in range(0, M, BLOCK):
        idx = start + offs
        total += tl.load(loss_ptr + idx, mask=idx < M, other=0.0)
        count += tl.load(valid_ptr + idx, mask=idx < M, other=0.0)
    result = tl.sum(total, axis=0)
    if MEAN:
        result = result / tl.sum(count, axis=0)
    tl.store(out_ptr, result)
"""


def _source_cross_entropy(plan: Plan, p: dict) -> str:
    x, t = plan.extra["logits"], plan.extra["target"]
    red = plan.extra["reduction"]
    if red == "none":
        finish = "        return loss.to(x2.dtype)\n"
    else:
        finish = (
            "        out = torch.empty((), dtype=x2.dtype, device=x2.device)\n"
            f"        _ke_ce_reduce[(1,)](loss, valid, out, M, MEAN={red == 'mean'}, BLOCK=1024,"
            " num_warps=4)\n"
            "        return out\n"
        )
    warps = max(1, min(16, p["block_v"] // (32 * p["vec"])))
    return (
        _header(plan, p)
        + _CE_KERNELS
        + _model_head(plan, p)
        + f"""        x2 = {x}.contiguous()
        t2 = {t}.contiguous()
        M, V = x2.shape
        loss = torch.empty((M,), dtype=torch.float32, device=x2.device)
        valid = torch.empty((M,), dtype=torch.float32, device=x2.device)
        if M > 0:
            block_v = min(p["block_v"], triton.next_power_of_2(max(V, 1)))
            _ke_ce_rows[(M,)](x2, t2, loss, valid, M, V, IGNORE={plan.extra["ignore_index"]},
                              BLOCK_V=block_v, ONLINE=p["strategy"] == "online",
                              SMOOTH={float(plan.extra.get("label_smoothing") or 0.0)!r},
                              num_warps={warps})
{finish}"""
    )
