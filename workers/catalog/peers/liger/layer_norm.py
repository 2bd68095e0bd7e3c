"""Liger-Kernel's LayerNorm, in the candidate format: a peer for the catalog's ``layer_norm``."""

import torch
import torch.nn as nn
from liger_kernel.transformers.functional import liger_layer_norm


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return liger_layer_norm(x, self.norm.weight, self.norm.bias, self.norm.eps)
