"""A Llama-style decoder built here with random weights (nothing downloaded), for the model check.

Pre-norm blocks as in Llama: RMSNorm, grouped-query attention with rotary embeddings and a
static KV cache (so a decode step has fixed shapes and can be captured in a CUDA graph), a
residual add fused with the next RMSNorm (``ResidualRMSNorm``: returns the sum and its norm), a
SwiGLU MLP (``gate_proj``, ``up_proj``, ``down_proj``, SiLU), a final RMSNorm, the LM head and a
cross-entropy loss when labels are given. The attention core (the grouped heads' scores over the
KV cache, the causal mask, softmax, the weighted sum of values) is a ``CoreAttention`` module
with the ``gqa_attention`` catalog contract; its softmax is an ``nn.Softmax`` module in float32,
as Llama computes attention probabilities. The modules are the shapes ``workers.runtime.patch``
recognises, as Liger recognises Hugging Face's.

``CONFIGS``: ``tiny`` fits the catalog's smoke workloads on the interpreter (hidden 64, rows of
3-8 tokens, softmax rows of 40-96 keys), ``small`` is a quick CPU model, ``llama3-8b-4l`` is
Llama 3 8B's layer geometry (hidden 4096, 32 heads, 8 KV heads, intermediate 14336, vocabulary
128256) with 4 layers, for the H200 bench; its RMSNorm epsilon is the catalog contract's 1e-6
(Llama 2's; Llama 3 uses 1e-5, which the catalog's kernels were not evaluated with and which
would fall back).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int = 128
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 2
    num_kv_heads: int = 2
    max_seq_len: int = 64
    rms_eps: float = 1e-6
    rope_theta: float = 10000.0

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    def to_dict(self) -> dict:
        return asdict(self)


CONFIGS = {
    "tiny": DecoderConfig(),
    "small": DecoderConfig(
        vocab_size=1024, hidden_size=256, intermediate_size=688, num_layers=4, num_heads=4,
        num_kv_heads=2, max_seq_len=256,
    ),
    "llama3-8b-4l": DecoderConfig(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_layers=4,
        num_heads=32, num_kv_heads=8, max_seq_len=4096, rms_eps=1e-6, rope_theta=500000.0,
    ),
}  # fmt: skip


def config_get(name_or_dict) -> DecoderConfig:
    if isinstance(name_or_dict, DecoderConfig):
        return name_or_dict
    if isinstance(name_or_dict, dict):
        return DecoderConfig(**name_or_dict)
    if name_or_dict not in CONFIGS:
        raise KeyError(f"no decoder config {name_or_dict!r}; known: {', '.join(CONFIGS)}")
    return CONFIGS[name_or_dict]


class RMSNorm(nn.Module):
    """Llama's RMSNorm in the catalog problem's form: x * rsqrt(mean(x^2) + eps) * weight."""

    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class ResidualRMSNorm(RMSNorm):
    """The residual add and the next block's RMSNorm: returns (x + residual, its norm)."""

    def forward(self, x, residual):
        h = x + residual
        return h, super().forward(h)


class MLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def _rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class CoreAttention(nn.Module):
    """Grouped-query causal attention of ``q`` over the cache's keys and values, the
    ``gqa_attention`` contract: q ``[B, Hq, Tq, D]``, keys and values ``[B, Hkv, Tk, D]``, query
    head ``h`` reads key/value head ``h // (Hq // Hkv)``, the queries are the last ``Tq`` of the
    ``Tk`` positions (query ``i`` sees keys ``j <= Tk - Tq + i``), softmax in float32."""

    def __init__(self, num_heads: int, num_kv_heads: int, head_dim: int):
        super().__init__()
        self.num_heads = num_heads
        self.num_kv_heads = num_kv_heads
        self.head_dim = head_dim
        self.scale = 1.0 / math.sqrt(head_dim)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, q, keys, values):
        t, end = q.shape[2], keys.shape[2]
        groups = self.num_heads // self.num_kv_heads
        if groups > 1:
            keys = keys.repeat_interleave(groups, dim=1)
            values = values.repeat_interleave(groups, dim=1)
        scores = torch.matmul(q, keys.transpose(2, 3)) * self.scale
        if t > 1:
            rows = torch.arange(end - t, end, device=q.device)[:, None]
            cols = torch.arange(end, device=q.device)[None, :]
            scores = scores.masked_fill(cols > rows, float("-inf"))
        probs = self.softmax(scores.float()).to(q.dtype)
        return torch.matmul(probs, values)


class Attention(nn.Module):
    """Grouped-query attention with rotary embeddings and a static KV cache."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        hd = cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, cfg.num_heads * hd, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * hd, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, cfg.num_kv_heads * hd, bias=False)
        self.o_proj = nn.Linear(cfg.num_heads * hd, cfg.hidden_size, bias=False)
        self.core = CoreAttention(cfg.num_heads, cfg.num_kv_heads, hd)
        # Plain attributes, not buffers: the cache is state of a run, not of the model.
        self.k_cache: torch.Tensor | None = None
        self.v_cache: torch.Tensor | None = None

    def forward(self, x, cos, sin, start: int):
        b, t, _ = x.shape
        cfg, hd = self.cfg, self.cfg.head_dim
        q = self.q_proj(x).view(b, t, cfg.num_heads, hd).transpose(1, 2)
        k = self.k_proj(x).view(b, t, cfg.num_kv_heads, hd).transpose(1, 2)
        v = self.v_proj(x).view(b, t, cfg.num_kv_heads, hd).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        end = start + t
        self.k_cache[:b, :, start:end] = k
        self.v_cache[:b, :, start:end] = v
        # Slices of the cache (strided views, not copies): what the attention operator takes.
        out = self.core(q, self.k_cache[:b, :, :end], self.v_cache[:b, :, :end])
        return self.o_proj(out.transpose(1, 2).reshape(b, t, -1))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = ResidualRMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin, start: int):
        a = self.self_attn(self.input_layernorm(x), cos, sin, start)
        h, n = self.post_attention_layernorm(a, x)
        return h + self.mlp(n)


class Decoder(nn.Module):
    """Embedding, ``num_layers`` pre-norm blocks, final RMSNorm, LM head (and loss)."""

    def __init__(self, cfg: DecoderConfig):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.loss_fn = nn.CrossEntropyLoss()
        hd = cfg.head_dim
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        freqs = torch.outer(torch.arange(cfg.max_seq_len, dtype=torch.float32), inv)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("rope_cos", emb.cos(), persistent=False)
        self.register_buffer("rope_sin", emb.sin(), persistent=False)

    def allocate_cache(self, batch: int, *, fill: bool = False) -> None:
        """A static KV cache for ``batch`` sequences (``fill``: random contents, for timing a
        decode step deep into a sequence without a prefill first)."""
        cfg = self.cfg
        p = self.lm_head.weight
        shape = (batch, cfg.num_kv_heads, cfg.max_seq_len, cfg.head_dim)
        for layer in self.layers:
            make = torch.randn if fill else torch.zeros
            layer.self_attn.k_cache = make(shape, dtype=p.dtype, device=p.device)
            layer.self_attn.v_cache = make(shape, dtype=p.dtype, device=p.device)

    def forward(self, tokens, start: int = 0, labels=None):
        t = tokens.shape[1]
        x = self.embed_tokens(tokens)
        cos = self.rope_cos[start : start + t].to(x.dtype)
        sin = self.rope_sin[start : start + t].to(x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, start)
        logits = self.lm_head(self.norm(x))
        if labels is None:
            return logits
        return logits, self.loss_fn(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))


def build(cfg, *, dtype=torch.float32, device="cpu", seed: int = 0) -> Decoder:
    """A decoder with seeded random weights (norm weights near 1, as trained models have)."""
    cfg = config_get(cfg)
    torch.manual_seed(seed)
    with torch.device(device):
        model = Decoder(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layernorm.weight") or name == "norm.weight":
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif p.dim() == 2:
                p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]) if "embed" not in name else 1.0)
    return model.to(dtype=dtype).eval()
