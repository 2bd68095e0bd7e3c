"""Adopt promoted kernels in one line, Liger-style: ``patch_model(model)`` / ``unpatch_model``.

``patch_model`` walks the model and gives each module it recognises a forward that calls the
``torch.ops.ke`` operator of its kind (the operator then serves the promoted kernel for the
shapes a region covers and the PyTorch reference elsewhere, per shape):

- ``rms_norm``: modules named ``*RMSNorm`` with a 1-D ``weight`` and ``eps`` (or Hugging Face's
  ``variance_epsilon``);
- ``residual_rms_norm``: ``*ResidualRMSNorm`` / ``*AddRMSNorm`` modules, ``forward(x, residual)
  -> (x + residual, norm)`` (the residual add fused with the next norm);
- ``layer_norm``: ``nn.LayerNorm`` over the last dimension with weight and bias;
- ``softmax``: ``nn.Softmax(dim=-1)``;
- ``silu_and_mul``: SwiGLU MLPs (``gate_proj``, ``up_proj``, ``down_proj``, a SiLU ``act_fn``);
- ``silu``: ``nn.SiLU`` outside a patched MLP;
- ``cross_entropy``: ``nn.CrossEntropyLoss`` with the defaults (mean, no weight, no label
  smoothing; targets must be valid classes, the contract has no ``ignore_index``).

Only kinds the runtime serves are patched unless ``kinds`` says otherwise. The forward is set on
the instance (the class is untouched), so ``unpatch_model`` deletes it and the stock model is
back exactly: same class forwards, same parameters, same outputs. ``PatchReport`` says what was
patched and what was left (and why); ``coverage()`` says, per operator and shape, what served.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field

import torch.nn as nn

from workers.runtime import ops

MARK = "_ke_patched"


@dataclass
class PatchReport:
    patched: list[dict] = field(default_factory=list)  # {"module", "class", "kind"}
    skipped: list[dict] = field(default_factory=list)  # {"module", "class", "kind", "reason"}

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.patched:
            out[row["kind"]] = out.get(row["kind"], 0) + 1
        return out

    def to_dict(self) -> dict:
        return {"patched": self.patched, "skipped": self.skipped, "counts": self.counts()}


def _eps(module) -> float | None:
    for name in ("eps", "variance_epsilon"):
        value = getattr(module, name, None)
        if isinstance(value, float):
            return value
    return None


def _rms_forward(self, x):
    return ops.rms_norm(x, self.weight, _eps(self))


def _residual_rms_forward(self, x, residual):
    return x + residual, ops.residual_rms_norm(x, residual, self.weight, _eps(self))


def _layer_norm_forward(self, x):
    return ops.layer_norm(x, self.weight, self.bias, self.eps)


def _softmax_forward(self, x):
    return ops.softmax(x)


def _silu_forward(self, x):
    return ops.silu(x)


def _mlp_forward(self, x):
    return self.down_proj(ops.silu_and_mul(self.gate_proj(x), self.up_proj(x)))


def _cross_entropy_forward(self, logits, targets):
    return ops.cross_entropy(logits, targets)


def _classify(module) -> tuple[str | None, object, str]:
    """(kind, patched forward, why not) for one module; kind None when nothing fits."""
    name = type(module).__name__.lower()
    weight = getattr(module, "weight", None)
    if name.endswith(("residualrmsnorm", "addrmsnorm")):
        if weight is None or weight.dim() != 1 or _eps(module) is None:
            return None, None, "residual RMSNorm without a 1-D weight and a float eps"
        return "residual_rms_norm", _residual_rms_forward, ""
    if name.endswith("rmsnorm"):
        if weight is None or weight.dim() != 1 or _eps(module) is None:
            return None, None, "RMSNorm without a 1-D weight and a float eps"
        return "rms_norm", _rms_forward, ""
    if isinstance(module, nn.LayerNorm):
        if len(module.normalized_shape) != 1 or module.weight is None or module.bias is None:
            return None, None, "LayerNorm not over the last dimension with weight and bias"
        return "layer_norm", _layer_norm_forward, ""
    if isinstance(module, nn.Softmax):
        if module.dim != -1:
            return None, None, f"softmax over dim {module.dim} (the operator is over dim -1)"
        return "softmax", _softmax_forward, ""
    if isinstance(module, nn.SiLU):
        return "silu", _silu_forward, ""
    projections = ("gate_proj", "up_proj", "down_proj")
    if all(isinstance(getattr(module, n, None), nn.Linear) for n in projections):
        if not isinstance(getattr(module, "act_fn", None), nn.SiLU):
            return None, None, "gated MLP whose act_fn is not SiLU"
        return "silu_and_mul", _mlp_forward, ""
    if isinstance(module, nn.CrossEntropyLoss):
        plain = (
            module.reduction == "mean" and module.weight is None and module.label_smoothing == 0.0
        )
        if not plain:
            return None, None, "cross-entropy with weights, smoothing or a non-mean reduction"
        return "cross_entropy", _cross_entropy_forward, ""
    return None, None, ""


def patch_model(model: nn.Module, *, kinds=None, runtime: ops.OpRuntime | None = None):
    """Swap the forwards of recognised modules for ``torch.ops.ke`` operators; a report.

    ``kinds``: the kinds to patch (default: those ``runtime`` — the process's — serves; ``"all"``
    for every kind). Patching twice is a no-op for modules already patched.
    """
    runtime = runtime or ops.current()
    wanted = set(ops.KINDS) if kinds == "all" else set(kinds or runtime.kinds())
    report = PatchReport()
    inside_mlp: set[int] = set()
    for name, module in model.named_modules():
        kind, forward, why = _classify(module)
        if kind is None:
            if why:
                report.skipped.append(
                    {"module": name, "class": type(module).__name__, "kind": None, "reason": why}
                )
            continue
        row = {"module": name, "class": type(module).__name__, "kind": kind}
        if id(module) in inside_mlp:
            report.skipped.append({**row, "reason": "inside a patched SwiGLU MLP"})
            continue
        if kind not in wanted:
            report.skipped.append({**row, "reason": "no region serves this kind"})
            continue
        if getattr(module, MARK, None) is None:
            module.forward = types.MethodType(forward, module)
            setattr(module, MARK, kind)
        report.patched.append(row)
        if kind == "silu_and_mul":
            inside_mlp.add(id(module.act_fn))
    return report


def unpatch_model(model: nn.Module) -> int:
    """Restore every patched module's own forward; how many were restored."""
    restored = 0
    for module in model.modules():
        if module.__dict__.pop(MARK, None) is not None:
            module.__dict__.pop("forward", None)
            restored += 1
    return restored


def is_patched(model: nn.Module) -> bool:
    return any(MARK in m.__dict__ for m in model.modules())


def coverage(runtime: ops.OpRuntime | None = None) -> dict:
    """Per kind: calls, kernel calls, and each shape's path (``OpRuntime.coverage``)."""
    return (runtime or ops.current()).coverage()
