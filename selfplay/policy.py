"""A network as a :class:`games.core.Policy`: frozen weights that pick actions for seats."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from selfplay.networks import ActorCritic


class FrozenPolicy:
    """A network policy with fixed weights (a league snapshot or a loaded checkpoint).

    It takes the most likely actions (``deterministic``) or samples them, from the network's
    distribution sharpened by ``temperature`` < 1 (categorical logits divided by it): between
    the two, a policy that keeps its rare choices but makes fewer chance errors."""

    def __init__(self, agent: ActorCritic, deterministic: bool = False,
                 generator: torch.Generator | None = None, temperature: float = 1.0) -> None:
        if not temperature > 0 or temperature == float("inf"):
            raise ValueError(f"a sampling temperature must be > 0, got {temperature}")
        self.agent = agent.eval()
        self.device = next(agent.parameters()).device
        self.deterministic = deterministic
        self.temperature = float(temperature)
        if generator is not None and generator.device.type != self.device.type:
            raise ValueError(f"generator on {generator.device} for a policy on {self.device}")
        self.generator = generator

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        mask_t = torch.from_numpy(mask) if mask is not None else None
        return self.act_tensors(torch.from_numpy(obs), mask_t).cpu().numpy()

    @torch.inference_mode()
    def act_tensors(self, obs: Tensor, mask: Tensor | None) -> Tensor:
        """Actions for rows ``obs`` (``mask``) on any device, on the policy's device."""
        obs_t = self.agent.normalize_obs(obs.to(self.device))
        mask_t = mask.to(self.device) if mask is not None else None
        dist = self.agent.dist(obs_t, mask_t)
        if self.deterministic:
            return dist.mode()
        return dist.sample(self.generator, temperature=self.temperature)
