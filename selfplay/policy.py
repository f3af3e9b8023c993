"""A network as a :class:`games.core.Policy`: frozen weights that pick actions for seats."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from selfplay.networks import ActorCritic


class FrozenPolicy:
    """A network policy with fixed weights (a league snapshot or a loaded checkpoint)."""

    def __init__(self, agent: ActorCritic, deterministic: bool = False,
                 generator: torch.Generator | None = None) -> None:
        self.agent = agent.eval()
        self.device = next(agent.parameters()).device
        self.deterministic = deterministic
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
        return dist.mode() if self.deterministic else dist.sample(self.generator)
