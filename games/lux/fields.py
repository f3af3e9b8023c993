"""Board fields shared by the Lux observations (JAX, :mod:`games.lux.observe`) and the
scripted bots (NumPy, :mod:`games.lux.bots`): written once, for either array module ``xp``,
so that what the bots read and what the observations show cannot drift apart."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from games.lux.layout import HOME_DETOUR


def box_count(cells: Any, radius: int, xp: ModuleType = np) -> Any:
    """``int32 [..., S, S]``: how many true ``cells [..., S, S]`` lie within ``radius``
    (Chebyshev) of each cell, off-board cells counting none (a summed-area table)."""
    size_y, size_x = cells.shape[-2:]
    table = xp.pad(cells.astype(xp.int32).cumsum(-2).cumsum(-1),
                   [(0, 0)] * (cells.ndim - 2) + [(1, 0), (1, 0)])
    y0 = xp.clip(xp.arange(size_y) - radius, 0, size_y)[:, None]
    y1 = xp.clip(xp.arange(size_y) + radius + 1, 0, size_y)[:, None]
    x0 = xp.clip(xp.arange(size_x) - radius, 0, size_x)[None, :]
    x1 = xp.clip(xp.arange(size_x) + radius + 1, 0, size_x)[None, :]
    return (table[..., y1, x1] - table[..., y0, x1] - table[..., y1, x0]
            + table[..., y0, x0]).astype(xp.int32)


def home_rule(nearest: Any, to_thirsty: Any, xp: ModuleType = np) -> tuple[Any, Any]:
    """``(home, detour)``: where ``to_home`` leads, given the steps to the nearest own factory
    tile ``nearest`` and to the nearest thirsty one ``to_thirsty`` (a large value where none):
    the thirsty factory when it is at most :data:`~games.lux.layout.HOME_DETOUR` steps
    further, else the nearest; ``detour`` marks where the thirsty one was taken."""
    detour = to_thirsty <= nearest + HOME_DETOUR
    return xp.where(detour, to_thirsty, nearest), detour
