"""SiLU (swish) activation, elementwise over an MLP activation tensor."""

import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 4096
intermediate_size = 14336


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.silu(x)


def get_inputs():
    return [torch.randn(num_tokens, intermediate_size)]


def get_init_inputs():
    return []
