"""LayerNorm over the hidden dimension with affine weight and bias."""

import torch
import torch.nn as nn

num_tokens = 4096
hidden_size = 4096


class Model(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size, eps=1e-5)
        with torch.no_grad():
            self.norm.weight.add_(0.1 * torch.randn(hidden_size))
            self.norm.bias.add_(0.1 * torch.randn(hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(num_tokens, hidden_size)]


def get_init_inputs():
    return [hidden_size]
