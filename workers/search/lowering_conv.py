"""Lower a convolution reference (``nn.Conv1d/2d/3d``, ``nn.ConvTranspose1d/2d/3d`` and their
functional forms: ``aten.convolution`` with any stride, padding, dilation, groups and output
padding) into the ``conv`` family's plan: one implicit-GEMM kernel per convolution.

The traced graph is the convolution alone, reading an input (a forward argument, or an earlier
stage's output in a chain) with the weight and the bias as they are; ops around it are stages
of their own (:mod:`workers.search.lowering_staged` cuts there, as at a pooling op). The
geometry is read from the convolution module at run time where the weight is one's (its
constructor may be given other sizes than the trace's), else as traced."""

from __future__ import annotations

import torch

from workers.search.ir import IRNode, NoTemplate, Plan

aten = torch.ops.aten

CONVS = {aten.convolution.default}


def is_conv(calls: list[torch.fx.Node]) -> bool:
    return any(n.target in CONVS for n in calls)


def lower_conv(gm: torch.fx.GraphModule, refs: list[str]) -> Plan:
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    ph_ref = dict(zip(placeholders, refs, strict=True))
    calls = [n for n in graph.nodes if n.op == "call_function"]
    convs = [n for n in calls if n.target in CONVS]
    if len(convs) != 1:
        raise NoTemplate(f"{len(convs)} convolutions in the reference; the template convolves once")
    conv = convs[0]
    others = [n for n in calls if n is not conv]
    if others:
        name = getattr(others[0].target, "__name__", others[0].target)
        raise NoTemplate(f"{name} beside the convolution; the template convolves alone")
    out = next(n for n in graph.nodes if n.op == "output").args[0]
    outs = list(out) if isinstance(out, list | tuple) else [out]
    if outs != [conv]:
        raise NoTemplate("the convolution's output is not what the reference returns")
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = conv.args[:9]
    for operand, what in ((x, "input"), (w, "weight"), (b, "bias")):
        if operand is None and what == "bias":
            continue
        if operand not in ph_ref:
            raise NoTemplate(f"the convolution's {what} is computed by other ops")
        if not operand.meta["val"].is_floating_point():
            raise NoTemplate(f"the convolution's {what} is not floating point")
    spatial = w.meta["val"].dim() - 2
    if spatial not in (1, 2, 3):
        raise NoTemplate(f"a convolution over {spatial} spatial dimensions")
    plan = Plan(family="conv", forward_args=[], init_source="", preamble="")
    plan.nodes = [IRNode(id=0, kind="input", attrs={"ref": ph_ref[x], "role": "tile"})]
    plan.outputs = [0]
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
    )
    shape = list(w.meta["val"].shape)
    kernel = "x".join(str(k) for k in shape[2:])
    kind = "transposed convolution" if transposed else "convolution"
    plan.summary = (
        f"{spatial}-d {kind} of {ph_ref[x]} by {ph_ref[w]} ({kernel} kernel"
        f", stride {list(stride)}, padding {list(padding)}"
        + (f", dilation {list(dilation)}" if any(int(d) != 1 for d in dilation) else "")
        + (f", output padding {list(output_padding)}" if transposed and any(output_padding) else "")
        + (f", {groups} groups" if int(groups) != 1 else "")
        + (", with bias" if b is not None else "")
        + ")"
    )
    return plan
