"""Liger-Kernel's RMSNorm, in the candidate format: a peer for the catalog's ``rms_norm``.

Timed beside the search's kernels as the incumbent (``--incumbent`` with ``--baseline best``).
Needs ``liger-kernel`` where it runs (the GPU host), not in this project's requirements."""

import torch
import torch.nn as nn
from liger_kernel.transformers.functional import liger_rms_norm


class ModelNew(nn.Module):
    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return liger_rms_norm(x, self.weight, self.eps, in_place=False)
