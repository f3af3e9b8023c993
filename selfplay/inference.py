"""A NumPy copy of small MLP actor-critics for acting in the rollout loop.

For the tiny networks of classic and MuJoCo control, a PyTorch forward pass costs ~10 us per
operator in dispatch alone, more than the math; NumPy does the same matrix products in ~1 us.
:class:`NumpyActorCritic` mirrors an :class:`ActorCritic` of kind ``mlp`` (Discrete, Box or
MultiDiscrete without cells or gates) and is refreshed from it after every update. Training
(the gradient path) always uses the PyTorch module; tests check both agree.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from games.core import Box, Discrete, MultiDiscrete
from selfplay.distributions import NEG_LOGIT
from selfplay.networks import ActorCritic

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _linear_layers(module: nn.Module) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
            for m in module.modules() if isinstance(m, nn.Linear)]


def supports(agent: ActorCritic) -> bool:
    """Whether ``agent`` can act through :class:`NumpyActorCritic`."""
    space = agent.space
    simple_space = isinstance(space, Discrete | Box) or (
        isinstance(space, MultiDiscrete) and space.cells is None and space.gates is None)
    return (agent.kind == "mlp" and simple_space and agent.value_rms is None
            and not agent.critic_reads_state)


class NumpyActorCritic:
    """Actor and critic MLPs as NumPy arrays; ``act`` samples, ``value`` evaluates."""

    def __init__(self, agent: ActorCritic) -> None:
        if not supports(agent):
            raise ValueError("NumpyActorCritic mirrors mlp agents with simple action spaces")
        self.agent = agent
        self.space = agent.space
        activation = [m for m in agent.actor_torso.modules() if isinstance(m, nn.Tanh | nn.ReLU)]
        self.tanh = not activation or isinstance(activation[0], nn.Tanh)
        self.refresh()

    def refresh(self) -> None:
        """Copy the current weights from the PyTorch agent."""
        agent = self.agent
        with torch.no_grad():
            self.actor = _linear_layers(agent.actor_torso) + _linear_layers(agent.actor_head)
            self.critic = (_linear_layers(agent.critic_torso) if not agent.shared else [])
            self.critic += _linear_layers(agent.critic_head)
            self.log_std = (agent.log_std.detach().numpy().astype(np.float32).copy()
                            if agent.log_std is not None else None)

    def _hidden(self, x: np.ndarray) -> np.ndarray:
        return np.tanh(x, out=x) if self.tanh else np.maximum(x, 0.0, out=x)

    def _mlp(self, layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray) -> np.ndarray:
        for weight, bias in layers[:-1]:
            x = self._hidden(x @ weight + bias)
        weight, bias = layers[-1]
        return x @ weight + bias  # type: ignore[no-any-return]

    def value(self, critic_in: np.ndarray) -> np.ndarray:
        """``[N, ...]`` -> ``[N]`` values."""
        x = critic_in.reshape(len(critic_in), -1).astype(np.float32, copy=False)
        if self.agent.shared:
            for weight, bias in self.actor[:-1]:
                x = self._hidden(x @ weight + bias)
        return self._mlp(self.critic, x)[:, 0]

    def act(self, obs: np.ndarray, mask: np.ndarray | None, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sample actions for normalized ``obs [N, ...]``; returns (action, log_prob, value)."""
        x = obs.reshape(len(obs), -1).astype(np.float32, copy=False)
        hidden = x
        for weight, bias in self.actor[:-1]:
            hidden = self._hidden(hidden @ weight + bias)
        weight, bias = self.actor[-1]
        out = hidden @ weight + bias
        if self.agent.shared:
            value = (hidden @ self.critic[-1][0] + self.critic[-1][1])[:, 0]
        else:
            value = self._mlp(self.critic, x)[:, 0]
        space = self.space
        if isinstance(space, Box):
            assert self.log_std is not None
            std = np.exp(self.log_std)
            noise = rng.standard_normal(out.shape, dtype=np.float32)
            action = out + std * noise
            logp = (-0.5 * noise**2 - self.log_std - _HALF_LOG_2PI).sum(-1)
            return action, logp.astype(np.float32), value
        nvec = (space.n,) if isinstance(space, Discrete) else space.nvec
        if mask is not None:
            out = np.where(mask.reshape(out.shape), out, np.float32(NEG_LOGIT))
        actions = []
        logp = np.zeros(len(out), np.float32)
        start = 0
        for n in nvec:
            logits = out[:, start:start + n]
            start += n
            shifted = logits - logits.max(-1, keepdims=True)
            log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
            pick = (log_probs + rng.gumbel(size=log_probs.shape)).argmax(-1)
            lp = np.take_along_axis(log_probs, pick[:, None], -1)[:, 0]
            if mask is not None:  # a component with no legal value: action 0, log-prob 0
                legal_any = (logits > NEG_LOGIT / 2).any(-1)
                pick = np.where(legal_any, pick, 0)
                lp = np.where(legal_any, lp, 0.0)
            actions.append(pick)
            logp += lp
        action = actions[0] if isinstance(space, Discrete) else np.stack(actions, -1)
        return action.astype(np.int64), logp, value
