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


class WeightAverage:
    """An exponential moving average of a :class:`FlatAdam`'s parameters (Polyak averaging):
    after every optimizer step ``average += (1 - d) * (weights - average)``, with ``d`` the
    ``decay`` (warmed up as ``min(decay, (1 + n) / (10 + n))`` over the first steps ``n``, so
    early weights do not linger). The average of a run's last weights generalizes better than
    its last weights alone (the ones one minibatch's noise moved last)."""

    def __init__(self, optimizer: FlatAdam, module: nn.Module, decay: float) -> None:
        if not 0.0 < decay < 1.0:
            raise ValueError(f"weight average decay must be in (0, 1), got {decay}")
        self.decay = decay
        self.weights = optimizer.flat
        self.average = optimizer.flat.detach().clone()
        self.steps = 0
        self._params = [(name, p) for name, p in module.named_parameters() if p.requires_grad]

    @torch.no_grad()
    def update(self) -> None:
        """Fold the weights after one optimizer step into the average."""
        self.steps += 1
        decay = min(self.decay, (1 + self.steps) / (10 + self.steps))
        self.average.lerp_(self.weights, 1.0 - decay)

    def module_state(self, module: nn.Module) -> dict[str, Tensor]:
        """``module``'s ``state_dict`` with the averaged parameters (its buffers as they are)."""
        state = module.state_dict()
        offset = 0
        for name, p in self._params:
            n = p.numel()
            state[name] = self.average[offset:offset + n].view_as(p).clone()
            offset += n
        return state

    @torch.no_grad()
    def swap(self) -> None:
        """Exchange the module's weights and the average (twice: back as they were)."""
        held = self.weights.detach().clone()
        self.weights.copy_(self.average)
        self.average.copy_(held)

    def state_dict(self) -> dict[str, Any]:
        return {"average": self.average.clone(), "steps": self.steps}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        average = torch.as_tensor(state["average"])
        if average.shape != self.average.shape:
            raise ValueError(f"weight average of {average.numel()} values for a network of "
                             f"{self.average.numel()}")
        self.average.copy_(average)
        self.steps = int(state["steps"])
