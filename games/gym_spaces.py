"""Gymnasium equivalents of the common action spaces (shared by the facades)."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from games.core import ActionSpace, Box, Discrete, GameError, MultiDiscrete


class MaskedMultiDiscrete(gymnasium.spaces.MultiDiscrete):
    """A ``MultiDiscrete`` whose ``sample(mask=...)`` also takes our mask layout.

    Our masks concatenate the components' legal-value masks along the last axis
    (``[..., sum(k_i)]``, bool or int8, see :class:`games.core.MultiDiscrete`) where gymnasium
    wants a nested tuple of int8 arrays, one per component and cell. Both are accepted, so
    PettingZoo's ``space.sample(mask=obs["action_mask"])`` works. As in gymnasium, each value is
    drawn uniformly among the legal ones (from this space's generator), and a component with no
    legal value takes its smallest value.
    """

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        if not isinstance(mask, np.ndarray):
            return super().sample(mask=mask, probability=probability)
        sizes = self.nvec.reshape(-1, self.nvec.shape[-1])[0]  # [k]
        expected = (*self.nvec.shape[:-1], int(sizes.sum()))
        if not (self.nvec == sizes).all() or mask.shape != expected:
            raise GameError(f"action mask of shape {mask.shape} does not fit nvec "
                            f"{self.nvec.tolist()} (expected {expected}, the same components "
                            f"in every cell)")
        out = np.empty(self.nvec.shape, self.dtype)  # [..., k]
        for i, legal in enumerate(np.split(mask.astype(bool), np.cumsum(sizes)[:-1], -1)):
            count = legal.sum(-1)  # [...] legal values of component i
            pick = (self.np_random.random(count.shape) * count).astype(np.int64)  # [...]
            nth = np.cumsum(legal, -1) - 1  # [..., n_i] rank of each legal value
            value = np.argmax(legal & (nth == pick[..., None]), -1)  # 0 where none is legal
            out[..., i] = value + self.start[..., i]
        return out


def gym_action_space(space: ActionSpace) -> gymnasium.spaces.Space[Any]:
    """The gymnasium equivalent of one seat's action space."""
    if isinstance(space, Discrete):
        return gymnasium.spaces.Discrete(space.n)
    if isinstance(space, MultiDiscrete):
        nvec = np.asarray(space.nvec, np.int64)
        if space.cells is not None:
            nvec = np.tile(nvec, (space.cells, 1))  # [cells, k]
        return MaskedMultiDiscrete(nvec)
    if isinstance(space, Box):
        return gymnasium.spaces.Box(np.asarray(space.low, np.float32),
                                    np.asarray(space.high, np.float32), dtype=np.float32)
    raise GameError(f"unsupported action space {space!r}")


def action_array(action: Any, dtype: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``action`` as an array of ``dtype`` and ``shape`` (a facade's ``step``): a
    :class:`GameError` for a fractional value where the actions are integers (``1.7`` was
    played as 1) or for the wrong number of values."""
    raw = np.asarray(action)
    if np.issubdtype(dtype, np.integer) and raw.dtype.kind not in "biu":
        if raw.dtype.kind != "f" or not np.all(np.isfinite(raw)) or \
                not np.all(raw == np.round(raw)):
            raise GameError(f"actions must be integers, got {raw.tolist()}")
    if raw.size != int(np.prod(shape)):
        raise GameError(f"an action has {int(np.prod(shape))} value(s) of shape {shape}, got "
                        f"{raw.size}")
    return raw.astype(dtype).reshape(shape)
