"""Layer helpers shared by the networks: orthogonal initialization and MLP stacks."""

from __future__ import annotations

import math

from torch import nn


def layer_init(layer: nn.Module, gain: float = math.sqrt(2), bias: float = 0.0) -> nn.Module:
    """Orthogonal weights, constant bias (PPO implementation detail #2)."""
    if isinstance(layer, nn.Linear | nn.Conv2d | nn.ConvTranspose2d):
        nn.init.orthogonal_(layer.weight, gain)
        if layer.bias is not None:
            nn.init.constant_(layer.bias, bias)
    return layer


def _activation(name: str) -> type[nn.Module]:
    return {"tanh": nn.Tanh, "relu": nn.ReLU}[name]


def mlp(in_dim: int, hidden: list[int], activation: str) -> tuple[nn.Sequential, int]:
    """Linear layers of widths ``hidden`` (orthogonal init), each followed by ``activation``
    (``tanh`` or ``relu``); with the width of its output (``in_dim`` when ``hidden`` is
    empty)."""
    layers: list[nn.Module] = []
    act = _activation(activation)
    for width in hidden:
        layers += [layer_init(nn.Linear(in_dim, width)), act()]
        in_dim = width
    return nn.Sequential(*layers), in_dim
