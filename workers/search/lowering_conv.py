"""Lower a convolution reference (``nn.Conv1d/2d/3d``, ``nn.ConvTranspose1d/2d/3d`` and their
functional forms: ``aten.convolution`` with any stride, padding, dilation, groups and output
padding) into the ``conv`` family's plan: one implicit-GEMM kernel per convolution.

The traced graph is the convolution, reading an input (a forward argument, or an earlier
stage's output in a chain) with the weight and the bias as they are, then pointwise ops on its
output (an epilogue on the accumulator: KernelBench level 2's bias, activation and scaling);
ops before it, or a reduction after it, are stages of their own
(:mod:`workers.search.lowering_staged` cuts there, as at a pooling op). The
geometry is read from the convolution module at run time where the weight is one's (its
constructor may be given other sizes than the trace's), else as traced."""

from __future__ import annotations

import torch

from workers.search.ir import NoTemplate, Plan
from workers.search.lowering import CONVS, _categorise, _Lowerer, refuse_unwritable

aten = torch.ops.aten
# Views that reshape without moving elements (a stage's output read as the convolution's input,
# a per-channel vector read as (C, 1, 1)).
_RESHAPES = {aten.view.default, aten.reshape.default, aten._unsafe_view.default}


def is_conv(calls: list[torch.fx.Node]) -> bool:
    return any(n.target in CONVS for n in calls)


def lower_conv(gm: torch.fx.GraphModule, refs: list[str]) -> Plan:
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    ph_ref = dict(zip(placeholders, refs, strict=True))
    calls = [n for n in graph.nodes if n.op == "call_function"]
    refuse_unwritable(calls)  # the reason that stands whatever chain the graph is cut into
    convs = [n for n in calls if n.target in CONVS]
    if len(convs) != 1:
        raise NoTemplate(f"{len(convs)} convolutions in the reference; the template convolves once")
    conv = convs[0]
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = conv.args[:9]
    spatial = w.meta["val"].dim() - 2
    x, merged = _merged_channels(x, ph_ref, spatial)
    for operand, what in ((x, "input"), (w, "weight"), (b, "bias")):
        if operand is None and what == "bias":
            continue
        if operand not in ph_ref:
            raise NoTemplate(f"the convolution's {what} is computed by other ops")
        if not operand.meta["val"].is_floating_point():
            raise NoTemplate(f"the convolution's {what} is not floating point")
    if spatial not in (1, 2, 3):
        raise NoTemplate(f"a convolution over {spatial} spatial dimensions")
    if calls.index(conv) != len(merged):
        name = getattr(calls[0].target, "__name__", calls[0].target)
        raise NoTemplate(f"{name} before the convolution; the template convolves an input")

    # The epilogue: pointwise ops on the convolution's output, each other operand one of its
    # shape (a residual), one value per output channel (a bias of shape (C, 1, 1)) or one value.
    low = _Lowerer(gm, refs)
    shape = tuple(int(d) for d in conv.meta["val"].shape)
    low.row_shape = shape
    low.matmul_epilogue = True
    low.new("input", attrs={"ref": ph_ref[x], "role": "tile", "conv_input": True})
    low.env[conv] = low.new("input", attrs={"ref": "acc", "role": "tile"})
    after = calls[len(merged) + 1 :]
    # Views of a per-channel operand that keep it per channel (a BatchNorm's running mean of
    # shape (C,) viewed as (1, C, 1, 1)): the operand itself, read at the channel.
    channel_views = _channel_views(placeholders, shape)
    for p in placeholders:
        if p in (x, w, b) or not any(u in after for u in p.users):
            continue
        val = p.meta["val"]
        if not val.is_floating_point():
            raise NoTemplate("an integer or boolean operand after the convolution")
        if p in channel_views:
            attrs = {"ref": ph_ref[p], "role": "vec", "length": shape[1]}
            low.env[p] = low.new("input", attrs=attrs)
        elif tuple(val.shape) == shape:
            low.env[p] = low.new("input", attrs={"ref": ph_ref[p], "role": "tile"})
        elif val.numel() == 1 and (val.dim() or ph_ref[p].startswith("self")):
            # one value (a 0-d parameter, a (1,) bias), read from its memory; a 0-d forward
            # argument is a Python number (refused below, as the matmul epilogue does)
            low.env[p] = low.new("input", attrs={"ref": ph_ref[p], "role": "cell"})
        elif _per_channel(tuple(val.shape), shape):
            attrs = {"ref": ph_ref[p], "role": "vec", "length": shape[1]}
            low.env[p] = low.new("input", attrs=attrs)
        else:
            raise NoTemplate(
                f"an operand of shape {list(val.shape)} after the convolution (of shape "
                f"{list(shape)}): the template reads ones of its shape, one value per channel "
                "or one value"
            )
    for n in after:
        if n.target in (aten.tril.default, aten.triu.default):
            # the tile's rows are output positions, its columns channels: no matrix's diagonal
            raise NoTemplate(
                "a tril or triu after the convolution; the template's epilogue is pointwise"
            )
        if n in channel_views:
            low.env[n] = low.env[channel_views[n]]
            continue
        low._lower_call(n)
    out = next(n for n in graph.nodes if n.op == "output").args[0]
    outs = list(out) if isinstance(out, list | tuple) else [out]
    if len(outs) != 1 or not isinstance(outs[0], torch.fx.Node):
        raise NoTemplate("a convolution with several outputs is not covered")
    if tuple(outs[0].meta["val"].shape) != shape:
        raise NoTemplate("a view of the convolution's output after it; the template writes it")
    plan = Plan(family="conv", forward_args=[], init_source="", preamble="")
    plan.nodes = low.nodes
    plan.outputs = [low.arg(outs[0])]
    _categorise(plan)
    if any(n.kind in ("reduce", "scan") or n.attrs.get("shift") for n in plan.nodes):
        raise NoTemplate("a reduction after the convolution; the template's epilogue is pointwise")
    plan.extra.update(
        x=ph_ref[x],
        w=ph_ref[w],
        b=ph_ref[b] if b is not None else None,
        spatial=spatial,
        stride=[int(v) for v in stride],
        padding=[int(v) for v in padding],
        dilation=[int(v) for v in dilation],
        transposed=bool(transposed),
        output_padding=[int(v) for v in output_padding],
        groups=int(groups),
        merge_channels=bool(merged),
    )
    kernel = "x".join(str(k) for k in w.meta["val"].shape[2:])
    kind = "transposed convolution" if transposed else "convolution"
    ops = sorted({n.op for n in plan.nodes if n.kind == "pw"})
    plan.summary = (
        f"{spatial}-d {kind} of {ph_ref[x]} by {ph_ref[w]} ({kernel} kernel"
        f", stride {list(stride)}, padding {list(padding)}"
        + (f", dilation {list(dilation)}" if any(int(d) != 1 for d in dilation) else "")
        + (f", output padding {list(output_padding)}" if transposed and any(output_padding) else "")
        + (f", {groups} groups" if int(groups) != 1 else "")
        + (", with bias" if b is not None else "")
        + ")"
        + (f" with epilogue [{', '.join(ops)}]" if ops else "")
    )
    return plan


def _merged_channels(x, ph_ref: dict, spatial: int) -> tuple:
    """(the tensor the convolution reads, the views on the way): an input, or an input viewed
    with the dimensions between its batch and its ``spatial`` ones merged into channels (a
    channel shuffle's copy, written by the stage before, viewed back as (B, C, H, W))."""
    chain, src = [], x
    while isinstance(src, torch.fx.Node) and src.op == "call_function" and src.target in _RESHAPES:
        chain.append(src)
        src = src.args[0]
    if not chain or src not in ph_ref:
        return x, []
    have, want = tuple(src.meta["val"].shape), tuple(x.meta["val"].shape)
    merges = (
        len(have) > spatial + 2
        and len(want) == spatial + 2
        and have[0] == want[0]
        and have[len(have) - spatial :] == want[2:]
    )
    return (src, chain) if merges else (x, [])


def _channel_views(placeholders: list, shape: tuple) -> dict:
    """{a 1-d input of one value per channel, and each view of it: that input} for the inputs
    of length C read only through views (unsqueeze, view, reshape) that broadcast them as one
    value per channel of the output's ``shape``; a 1-d input read otherwise is left out (it
    would broadcast along the last dimension)."""
    views = _RESHAPES | {aten.unsqueeze.default}
    found: dict = {}
    for p in placeholders:
        val = p.meta.get("val")
        if val is None or val.dim() != 1 or len(shape) < 2 or int(val.shape[0]) != shape[1]:
            continue
        seen, todo, ok = {}, list(p.users), bool(p.users)
        while todo and ok:
            u = todo.pop()
            made = u.meta.get("val")
            out = tuple(int(d) for d in made.shape) if isinstance(made, torch.Tensor) else None
            if u.op != "call_function" or u.target not in views or out is None:
                ok = False
            elif _per_channel(out, shape):
                seen[u] = p
            elif len(out) < len(shape) and out[:1] == (shape[1],):  # (C, 1) on the way
                seen[u] = p
                todo.extend(u.users)
            else:
                ok = False
        if ok:
            found[p] = p
            found.update(seen)
    return found


def _per_channel(vshape: tuple, shape: tuple) -> bool:
    """Whether a tensor of ``vshape`` broadcasts against the output's ``shape`` as one value
    per channel (dimension 1): ``(C, 1, 1)`` or ``(1, C, 1, 1)`` against ``(B, C, H, W)``."""
    if len(vshape) > len(shape):
        return False
    full = (1,) * (len(shape) - len(vshape)) + vshape
    return full[1] == shape[1] and all(d == 1 for i, d in enumerate(full) if i != 1)
