"""Deterministic random weights for the built-in PyTorch workloads."""

from collections.abc import Callable

import torch
from torch import nn


def seeded(build: Callable[[], nn.Module], seed: int) -> nn.Module:
    """``build()`` under a fixed torch seed, without touching the caller's random state.

    Batch-norm layers get non-trivial statistics and affine parameters (fresh ones would be the
    identity), so that inference through them is worth checking.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = build()
        with torch.no_grad():
            for layer in module.modules():
                if isinstance(layer, nn.BatchNorm2d):
                    layer.running_mean.normal_(0.0, 0.1)
                    layer.running_var.uniform_(0.5, 1.5)
                    layer.weight.uniform_(0.5, 1.5)
                    layer.bias.normal_(0.0, 0.1)
    return module.eval()
