"""Adam over one flat parameter buffer, with global grad-norm clipping.

Small RL networks spend more time in per-tensor optimizer dispatch than in arithmetic. Here
every parameter of the module becomes a view into one contiguous buffer (and every gradient
a view into another), so zeroing, clipping and the Adam step are a handful of operations on a
single tensor, whatever the number of layers. The module itself is unchanged for its users:
its parameters, ``state_dict`` and ``load_state_dict`` behave as before.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn


class FlatAdam:
    """Adam (PPO detail: eps configurable) on a module's parameters, flattened into one buffer."""

    def __init__(self, module: nn.Module, lr: float, eps: float) -> None:
        params = [p for p in module.parameters() if p.requires_grad]
        if len({p.dtype for p in params}) != 1:
            raise ValueError("FlatAdam needs parameters of one dtype")
        total = sum(p.numel() for p in params)
        data = torch.zeros(total, dtype=params[0].dtype, device=params[0].device)
        grad = torch.zeros_like(data)
        offset = 0
        for p in params:
            n = p.numel()
            data[offset:offset + n].copy_(p.data.reshape(-1))
            p.data = data[offset:offset + n].view_as(p)
            p.grad = grad[offset:offset + n].view_as(p)  # backward accumulates in place
            offset += n
        self.flat = nn.Parameter(data)
        self.flat.grad = grad
        self.grad = grad
        try:
            self.optimizer = torch.optim.Adam([self.flat], lr=lr, eps=eps, fused=True)
        except (RuntimeError, TypeError):  # fused kernels unavailable on this build/device
            self.optimizer = torch.optim.Adam([self.flat], lr=lr, eps=eps, foreach=False)

    @property
    def param_groups(self) -> list[dict[str, Any]]:
        return self.optimizer.param_groups

    def zero_grad(self) -> None:
        self.grad.zero_()

    def clip_grad_norm(self, max_norm: float) -> Tensor:
        """Scale the gradient so its global L2 norm is at most ``max_norm``; returns the norm."""
        norm = torch.linalg.vector_norm(self.grad)
        self.grad.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm

    def step(self) -> None:
        self.optimizer.step()

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state)
