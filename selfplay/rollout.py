"""Time-major rollout storage ``[T, E, A, ...]``, preallocated once per run."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from games.core import Box, GameSpec
from selfplay.config import ConfigError


def torch_dtype(dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=dtype)).dtype


def flat_steps(tensor: Tensor) -> Tensor:
    """Time-major steps ``[T, E, A, ...]`` (or ``[T, E * A]``) as rows ``[T * E * A, ...]``."""
    return tensor.reshape(-1, *tensor.shape[3:]) if tensor.dim() >= 3 else tensor.reshape(-1)


def step_rows(keep: Tensor, device: torch.device) -> Callable[[Tensor], Tensor]:
    """``take(x)``: the rows of time-major steps ``x`` (``[T, E, A, ...]`` or ``[T, E * A]``)
    where ``keep`` (``bool [T, E, A]``: the steps an update learns from) is true, as
    ``[K, ...]`` on ``device``."""
    flat_keep = keep.reshape(-1)
    rows = None if bool(flat_keep.all()) else torch.nonzero(flat_keep).squeeze(1)

    def take(x: Tensor) -> Tensor:
        flat = flat_steps(x)
        return (flat if rows is None else flat[rows]).to(device, non_blocking=True)

    return take


def rollout_bytes(spec: GameSpec, num_steps: int, obs_dtype: torch.dtype,
                  critic_shape: tuple[int, ...] | None, critic_dtype: torch.dtype) -> int:
    """Bytes a :class:`RolloutBuffer` of ``num_steps`` steps of ``spec`` takes."""
    rows = num_steps * spec.num_envs * spec.num_seats
    size = int(np.prod(spec.obs_shape)) * obs_dtype.itemsize
    if spec.has_mask:
        size += int(np.prod(spec.action_space.mask_shape))
    if critic_shape is not None:
        size += int(np.prod(critic_shape)) * critic_dtype.itemsize
    size += int(np.prod(spec.action_space.action_shape)) * (
        4 if isinstance(spec.action_space, Box) else 8)  # float32 or int64 actions
    return rows * (size + 4 * 4 + 1)


def check_fits(nbytes: int, device: torch.device, what: str, fix: str) -> None:
    """A :class:`ConfigError` when ``nbytes`` exceed the memory of ``device`` (the host's
    physical memory, or the accelerator's): ``what`` needs them, ``fix`` says which
    settings to lower."""
    if device.type == "cpu":
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    elif device.type == "cuda":
        total = torch.cuda.mem_get_info(device)[1]
    else:
        return
    if nbytes > total:
        raise ConfigError(f"{what} needs {nbytes / 2**30:.1f} GiB, more than the "
                          f"{total / 2**30:.1f} GiB of {device}; {fix}")


class RolloutBuffer:
    """One rollout of ``T`` steps for ``E`` envs and ``A`` seats.

    ``obs`` holds what the actor read (normalized when configured), ``critic_in`` what the
    critic read when that differs (the global state), ``values`` are in return units.
    ``trained`` marks rows that enter the loss: seats controlled by the learner that acted.
    The large arrays (observations, masks, critic inputs, actions) are on ``device`` (default
    the host: a game hands over device arrays, :mod:`selfplay.handover`); the per-seat
    scalars always on the host.
    """

    def __init__(self, spec: GameSpec, num_steps: int, obs_dtype: torch.dtype,
                 critic_shape: tuple[int, ...] | None, critic_dtype: torch.dtype,
                 device: torch.device | None = None) -> None:
        t, e, a = num_steps, spec.num_envs, spec.num_seats
        self.shape = (t, e, a)
        self.device = device or torch.device("cpu")
        big = self.device
        check_fits(rollout_bytes(spec, num_steps, obs_dtype, critic_shape, critic_dtype),
                   self.device, f"a rollout of ppo.num_steps={t} x game.num_envs={e} x {a} seats",
                   "lower game.num_envs or ppo.num_steps")
        try:
            self._allocate(spec, obs_dtype, critic_shape, critic_dtype, big)
        except (MemoryError, RuntimeError) as exc:  # torch's out-of-memory is a RuntimeError
            if isinstance(exc, RuntimeError) and "allocate" not in str(exc):
                raise
            raise ConfigError(
                f"a rollout of ppo.num_steps={t} x game.num_envs={e} x {a} seats does not fit "
                f"in the memory of {self.device}; lower game.num_envs or ppo.num_steps") from None

    def _allocate(self, spec: GameSpec, obs_dtype: torch.dtype,
                  critic_shape: tuple[int, ...] | None, critic_dtype: torch.dtype,
                  big: torch.device) -> None:
        t, e, a = self.shape
        self.obs = torch.zeros((t, e, a, *spec.obs_shape), dtype=obs_dtype, device=big)
        self.mask = (torch.zeros((t, e, a, *spec.action_space.mask_shape), dtype=torch.bool,
                                 device=big) if spec.has_mask else None)
        self.critic_in = (torch.zeros((t, e, a, *critic_shape), dtype=critic_dtype, device=big)
                          if critic_shape is not None else None)
        act_dtype = torch.float32 if isinstance(spec.action_space, Box) else torch.int64
        self.actions = torch.zeros((t, e, a, *spec.action_space.action_shape), dtype=act_dtype,
                                   device=big)
        self.logprobs = torch.zeros((t, e, a))
        self.values = torch.zeros((t, e, a))
        self.rewards = torch.zeros((t, e, a))
        self.dones = torch.zeros((t, e, a))
        self.trained = torch.zeros((t, e, a), dtype=torch.bool)

    def tensors(self) -> list[Tensor]:
        """Every per-step tensor ``[T, E, A, ...]`` of the rollout."""
        return [x for x in (self.obs, self.mask, self.critic_in, self.actions, self.logprobs,
                            self.values, self.rewards, self.dones, self.trained)
                if x is not None]

    def drop_steps(self, envs: slice, steps: list[int], gamma: float) -> None:
        """Remove steps ``steps`` of envs ``envs``: steps lost with a worker, where the action
        had no effect and the envs' next observations began new games.

        The step before each run of lost steps becomes its game's last, truncated there and
        bootstrapped from the value of the observation it led to (the value computed when
        acting at the lost step; a seat that did not act there has none), as a time limit
        is. The later steps move forward, so the last ``len(steps)`` rows are free to be
        collected again.
        """
        lost = set(steps)
        for step in sorted(lost):
            if step > 0 and step - 1 not in lost:  # a game that ended there keeps its end:
                going = 1.0 - self.dones[step - 1, envs]  # the lost step began the next one
                self.rewards[step - 1, envs] += gamma * self.values[step, envs] * going
                self.dones[step - 1, envs] = 1.0
        keep = torch.tensor([t for t in range(self.shape[0]) if t not in lost])
        for x in self.tensors():
            x[:len(keep), envs] = x[keep.to(x.device), envs]

    def flat(self, tensor: Tensor) -> Tensor:
        """``[T, E, A, ...]`` -> ``[T*E*A, ...]``."""
        return flat_steps(tensor)
