"""Mean cross-entropy of language-model logits against target token ids."""

import torch
import torch.nn as nn
import torch.nn.functional as F

num_tokens = 2048
vocab_size = 32000


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, targets)


def get_inputs():
    return [torch.randn(num_tokens, vocab_size), torch.randint(0, vocab_size, (num_tokens,))]


def get_init_inputs():
    return []
