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
  smoothing; targets must be valid classes, the contract has no ``ignore_index``);
- ``attention``: ``*CoreAttention`` / ``*AttentionCore`` modules, ``forward(q, k, v)`` in the
  ``gqa_attention`` contract (int ``num_heads`` and ``num_kv_heads``, a float ``scale`` of
  ``1/sqrt(head_dim)``); the ``nn.Softmax`` inside one is left as it is.

Only kinds the runtime serves are patched unless ``kinds`` says otherwise. The forward is set on
the instance (the class is untouched), so ``unpatch_model`` deletes it and the stock model is
back exactly: same class forwards, same parameters, same outputs. ``PatchReport`` says what was
patched and what was left (and why); ``coverage()`` says, per operator and shape, what served.

A patched forward takes one of three paths, decided per call:

- **eager** (nothing compiling, autograd off: ``torch.inference_mode`` / ``no_grad``, or no
  argument that requires grad): ``ops.call``, straight to the signature's cached launcher, no
  dispatcher round trip. A CUDA graph captured in eager mode captures the same kernel launches.
- **compiling** (``torch.compile``, ``torch.export``), with ``under_compile="stock"``: the class's
  own forward, so Inductor fuses the norm or activation with its neighbours as it does for the
  stock model (an opaque operator would stop that: on the H200 the patched decoder compiled was
  0.70x of the stock one compiled). With ``under_compile="kernel"``: ``torch.ops.ke.<kind>``.
- otherwise (autograd on): ``torch.ops.ke.<kind>``, the operator's own autograd behaviour.

``under_compile`` defaults to ``"auto"``: ``"kernel"`` for the kinds whose region says its
kernel beat ``torch.compile`` on every case of its campaign (``RouteSpec.beats_compile``, from
the registry's manifest), ``"stock"`` for the rest; each patched row of the report says which.
"""

from __future__ import annotations

import math
import types
from dataclasses import dataclass, field

import torch
import torch.nn as nn

from workers.runtime import ops

MARK = "_ke_patched"
COMPILE_MARK = "_ke_under_compile"  # "stock" or "kernel": what a compiler sees
UNDER_COMPILE = ("auto", "stock", "kernel")

_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled


@dataclass
class PatchReport:
    patched: list[dict] = field(default_factory=list)  # {"module", "class", "kind"}
    skipped: list[dict] = field(default_factory=list)  # {"module", "class", "kind", "reason"}

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in self.patched:
            out[row["kind"]] = out.get(row["kind"], 0) + 1
        return out

    def under_compile(self) -> dict[str, str]:
        """Per kind: what ``torch.compile`` sees of its patched modules ("stock" or "kernel")."""
        return {row["kind"]: row["under_compile"] for row in self.patched}

    def to_dict(self) -> dict:
        return {
            "patched": self.patched,
            "skipped": self.skipped,
            "counts": self.counts(),
            "under_compile": self.under_compile(),
        }


def _eps(module) -> float | None:
    for name in ("eps", "variance_epsilon"):
        value = getattr(module, name, None)
        if isinstance(value, float):
            return value
    return None


def _eager(*tensors) -> bool:
    """The lean route applies: nothing compiling and nothing for autograd to record."""
    if _is_compiling():
        return False
    return not _grad_enabled() or not any(t.requires_grad for t in tensors)


def _stock(self) -> bool:
    """Compiling with under_compile="stock": the class's own forward serves."""
    return _is_compiling() and self.__dict__[COMPILE_MARK] == "stock"


# Each forward: the lean eager route, else the stock code for a compiler that fuses it better,
# else the operator. The kind's name is spelled out in each: no per-call lookups.


def _rms_forward(self, x):
    w, eps = self.weight, _eps(self)
    if _eager(x, w):
        return ops.call("rms_norm", (x, w, eps))
    if _stock(self):
        return type(self).forward(self, x)
    return ops.rms_norm(x, w, eps)


def _residual_rms_forward(self, x, residual):
    w, eps = self.weight, _eps(self)
    if _eager(x, residual, w):
        return x + residual, ops.call("residual_rms_norm", (x, residual, w, eps))
    if _stock(self):
        return type(self).forward(self, x, residual)
    return x + residual, ops.residual_rms_norm(x, residual, w, eps)


def _layer_norm_forward(self, x):
    w, b = self.weight, self.bias
    if _eager(x, w, b):
        return ops.call("layer_norm", (x, w, b, self.eps))
    if _stock(self):
        return type(self).forward(self, x)
    return ops.layer_norm(x, w, b, self.eps)


def _softmax_forward(self, x):
    if _eager(x):
        return ops.call("softmax", (x,))
    if _stock(self):
        return type(self).forward(self, x)
    return ops.softmax(x)


def _silu_forward(self, x):
    if _eager(x):
        return ops.call("silu", (x,))
    if _stock(self):
        return type(self).forward(self, x)
    return ops.silu(x)


def _mlp_forward(self, x):
    if _stock(self):
        return type(self).forward(self, x)
    gate, up = self.gate_proj(x), self.up_proj(x)
    if _eager(gate, up):
        return self.down_proj(ops.call("silu_and_mul", (gate, up)))
    return self.down_proj(ops.silu_and_mul(gate, up))


def _cross_entropy_forward(self, logits, targets):
    if _eager(logits):
        return ops.call("cross_entropy", (logits, targets))
    if _stock(self):
        return type(self).forward(self, logits, targets)
    return ops.cross_entropy(logits, targets)


def _attention_forward(self, q, k, v):
    if _eager(q, k, v):
        return ops.call("attention", (q, k, v))
    if _stock(self):
        return type(self).forward(self, q, k, v)
    return ops.attention(q, k, v)


def _attention_misfit(module) -> str:
    """Why an attention core does not keep the ``gqa_attention`` contract ("" where it does)."""
    heads, kv_heads = getattr(module, "num_heads", None), getattr(module, "num_kv_heads", None)
    head_dim, scale = getattr(module, "head_dim", None), getattr(module, "scale", None)
    ints = (heads, kv_heads, head_dim)
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in ints):
        return "attention core without positive int num_heads, num_kv_heads and head_dim"
    if heads % kv_heads:
        return f"attention core with {heads} heads over {kv_heads} KV heads (not a multiple)"
    if not isinstance(scale, float) or not math.isclose(
        scale, 1.0 / math.sqrt(head_dim), rel_tol=1e-12, abs_tol=0.0
    ):
        return f"attention core whose scale {scale!r} is not a float 1/sqrt(head_dim)"
    return ""


def _classify(module) -> tuple[str | None, object, str]:
    """(kind, patched forward, why not) for one module; kind None when nothing fits."""
    name = type(module).__name__.lower()
    weight = getattr(module, "weight", None)
    if name.endswith(("coreattention", "attentioncore")):
        why = _attention_misfit(module)
        if why:
            return None, None, why
        return "attention", _attention_forward, ""
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


def patch_model(
    model: nn.Module,
    *,
    kinds=None,
    runtime: ops.OpRuntime | None = None,
    under_compile: str = "auto",
):
    """Swap the forwards of recognised modules for ``torch.ops.ke`` operators; a report.

    ``kinds``: the kinds to patch (default: those ``runtime`` — the process's — serves; ``"all"``
    for every kind). ``under_compile``: what ``torch.compile`` sees of a patched module —
    ``"stock"`` (its own forward, for Inductor to fuse), ``"kernel"`` (the operator), ``"auto"``
    (``"kernel"`` where the kind's region beats compile in a model, else ``"stock"``).
    Patching twice keeps the forwards and applies the new ``under_compile``.
    """
    if under_compile not in UNDER_COMPILE:
        raise ValueError(f"under_compile={under_compile!r}: one of {', '.join(UNDER_COMPILE)}")
    runtime = runtime or ops.current()
    wanted = set(ops.KINDS) if kinds == "all" else set(kinds or runtime.kinds())
    report = PatchReport()
    inside: dict[int, str] = {}  # a module a patched parent calls -> why it is left as it is
    for name, module in model.named_modules():
        kind, forward, why = _classify(module)
        if kind is None:
            if why:
                report.skipped.append(
                    {"module": name, "class": type(module).__name__, "kind": None, "reason": why}
                )
            continue
        row = {"module": name, "class": type(module).__name__, "kind": kind}
        if id(module) in inside:
            report.skipped.append({**row, "reason": inside[id(module)]})
            continue
        if kind not in wanted:
            report.skipped.append({**row, "reason": "no region serves this kind"})
            continue
        if getattr(module, MARK, None) is None:
            module.forward = types.MethodType(forward, module)
            setattr(module, MARK, kind)
        policy = under_compile
        if policy == "auto":
            policy = "kernel" if runtime.beats_compile(kind) else "stock"
        setattr(module, COMPILE_MARK, policy)
        report.patched.append({**row, "under_compile": policy})
        if kind == "silu_and_mul":
            inside[id(module.act_fn)] = "inside a patched SwiGLU MLP"
        elif kind == "attention":
            for child in module.modules():
                if child is not module:
                    inside[id(child)] = "inside a patched attention"
    return report


def unpatch_model(model: nn.Module) -> int:
    """Restore every patched module's own forward; how many were restored."""
    restored = 0
    for module in model.modules():
        if module.__dict__.pop(MARK, None) is not None:
            module.__dict__.pop("forward", None)
            module.__dict__.pop(COMPILE_MARK, None)
            restored += 1
    return restored


def is_patched(model: nn.Module) -> bool:
    return any(MARK in m.__dict__ for m in model.modules())


def coverage(runtime: ops.OpRuntime | None = None) -> dict:
    """Per kind: calls, kernel calls, and each shape's path (``OpRuntime.coverage``)."""
    return (runtime or ops.current()).coverage()
