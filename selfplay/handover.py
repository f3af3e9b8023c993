"""Arrays between a game and the trainer: NumPy from the host, or device arrays by DLPack.

A game with device arrays (:class:`~games.core.SupportsDeviceArrays`, a JAX engine) can hand
its observations and masks to torch without a copy: :func:`tensor_batch` wraps them as torch
tensors on the same memory (``torch.from_dlpack``), and the trainer's actions go back the same
way. With ``array_handover: auto`` (the default) a run does this whenever its game can; ``host``
keeps every array on the host, as with every other game.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from games.core import Batch, SupportsDeviceArrays, VecGame
from selfplay.config import ConfigError


def as_tensor(x: Any) -> Tensor:
    """A NumPy array (sharing its memory) or a tensor as a tensor; another array that exports
    DLPack (a JAX array) as a tensor on its memory."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    return torch.from_dlpack(x)


def to_host(x: Any) -> np.ndarray:
    """Any of :func:`as_tensor`'s arrays as a NumPy array on the host (a copy unless it is
    NumPy already or a CPU tensor)."""
    if isinstance(x, np.ndarray):
        return x
    return as_tensor(x).cpu().numpy()


def tensor_batch(batch: Batch) -> Batch:
    """``batch`` with its observations, masks, states and final observations as tensors on
    the memory they are on (no copy); the small arrays stay NumPy."""

    def wrap(x: Any) -> Any:
        return None if x is None else as_tensor(x)

    return batch._replace(obs=wrap(batch.obs), action_mask=wrap(batch.action_mask),
                          state=wrap(batch.state), final_obs=wrap(batch.final_obs),
                          final_state=wrap(batch.final_state))


def host_batch(batch: Batch) -> Batch:
    """``batch`` with every array on the host (for checkpoints)."""

    def host(x: Any) -> Any:
        return None if x is None else to_host(x)

    return batch._replace(obs=host(batch.obs), action_mask=host(batch.action_mask),
                          state=host(batch.state), final_obs=host(batch.final_obs),
                          final_state=host(batch.final_state))


def use_device_arrays(game: VecGame, handover: str) -> bool:
    """Whether a run hands ``game``'s arrays over by DLPack (``array_handover``: ``auto``
    where the game has device arrays, ``dlpack`` required, ``host`` never); turns the game's
    device arrays on when it does. A one-line :class:`ConfigError` for ``dlpack`` with a game
    that has none."""
    supported = isinstance(game, SupportsDeviceArrays)
    if handover == "dlpack" and not supported:
        raise ConfigError(f"array_handover=dlpack: {game.spec.name} has no device arrays to "
                          "hand over (its arrays are NumPy on the host); use auto or host")
    on = supported and handover != "host"
    if isinstance(game, SupportsDeviceArrays):
        game.device_arrays = on
    return on
