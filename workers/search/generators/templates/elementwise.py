"""The ``elementwise`` family: pointwise graphs over flattened tensors."""

from __future__ import annotations

from workers.search.generators.templates.common import (
    _dtype_line,
    _Emitter,
    _header,
    _kernel,
    _refs,
)
from workers.search.trace import Plan


def _elementwise_kernel(plan: Plan) -> str:
    em = _Emitter(plan, "tl.load({ptr} + offs, mask=mask, other=0.0)", "")
    body = [
        "pid = tl.program_id(0)",
        "for t in tl.static_range(TILES):",
    ]
    inner = [
        "offs = (pid * TILES + t).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "mask = offs < n_elements",
    ]
    for node in plan.nodes:
        s = em.stmt(node)
        if s:
            inner.append(s)
    for j, o in enumerate(plan.outputs):
        inner.append(f"tl.store(out{j}_ptr + offs, {em.name(plan.nodes[o])}, mask=mask)")
    body += ["    " + s for s in inner]
    return _kernel("_ke_elementwise", plan, ["BLOCK", "TILES"], body, ["n_elements"])


def _source_elementwise(plan: Plan, p: dict) -> str:
    refs = _refs(plan)
    warps = max(1, min(32, p["block"] // (32 * p["vec"])))
    loads = "".join(f"        in{i} = {r}.contiguous()\n" for i, r in enumerate(refs))
    outs = "".join(
        f"        out{j} = torch.empty({refs[0]}.shape, dtype=odt, device={refs[0]}.device)\n"
        for j in range(len(plan.outputs))
    )
    args = ", ".join(
        [f"in{i}" for i in range(len(refs))] + [f"out{j}" for j in range(len(plan.outputs))]
    )
    ret = ", ".join(f"out{j}" for j in range(len(plan.outputs)))
    return (
        _header(plan, p)
        + _elementwise_kernel(plan)
        + "\n\nclass ModelNew(nn.Module):\n"
        + plan.init_source
        + f"\n    def forward(self, {', '.join(plan.forward_args)}):\n"
        + _dtype_line(refs)
        + loads
        + outs
        + f"        n = out0.numel()\n        if n == 0:\n            return {ret}\n"
        + f"        grid = (triton.cdiv(n, {p['block']} * {p['tiles']}),)\n"
        + f"        _ke_elementwise[grid]({args}, n, BLOCK={p['block']}, TILES={p['tiles']}, "
        f"num_warps={warps})\n" + f"        return {ret}\n"
    )
