"""Operator kinds the runtime serves as ``torch.ops.ke.<kind>``, by name only (no torch).

The portal reads this to know which registry operators a model check covers without importing
torch; ``workers.runtime.ops`` holds each kind's contract and operator.
"""

from __future__ import annotations

# kind -> other registry operator names that serve it (after lower-casing, '-' and ' ' -> '_')
ALIASES: dict[str, tuple[str, ...]] = {
    "rms_norm": ("rmsnorm", "rms"),
    "layer_norm": ("layernorm",),
    "softmax": (),
    "silu": ("swish",),
    "silu_and_mul": ("swiglu", "silu_mul"),
    "residual_rms_norm": ("add_rms_norm", "fused_add_rms_norm"),
    "cross_entropy": ("crossentropy", "ce_loss"),
    "attention": ("gqa_attention", "sdpa", "causal_attention", "flash_attention"),
}


def kind_of(operator: str) -> str | None:
    """The kind a registry operator name serves (``rms-norm`` -> ``rms_norm``), or None."""
    name = (operator or "").strip().lower().replace("-", "_").replace(" ", "_")
    for kind, aliases in ALIASES.items():
        if name == kind or name in aliases:
            return kind
    return None
