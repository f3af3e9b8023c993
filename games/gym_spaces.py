"""Gymnasium equivalents of the common action spaces (shared by the facades)."""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np

from games.core import ActionSpace, Box, Discrete, GameError, MultiDiscrete


def gym_action_space(space: ActionSpace) -> gymnasium.spaces.Space[Any]:
    """The gymnasium equivalent of one seat's action space."""
    if isinstance(space, Discrete):
        return gymnasium.spaces.Discrete(space.n)
    if isinstance(space, MultiDiscrete):
        nvec = np.asarray(space.nvec, np.int64)
        if space.cells is not None:
            nvec = np.tile(nvec, (space.cells, 1))  # [cells, k]
        return gymnasium.spaces.MultiDiscrete(nvec)
    if isinstance(space, Box):
        return gymnasium.spaces.Box(np.asarray(space.low, np.float32),
                                    np.asarray(space.high, np.float32), dtype=np.float32)
    raise GameError(f"unsupported action space {space!r}")
