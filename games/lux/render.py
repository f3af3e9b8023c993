"""Drawing a Lux game: one RGB frame of a game's state (NumPy arrays of one Jux state).

Team 0 blue, team 1 red: factories as 3x3 blocks (the centre brighter), heavy robots as full
cells, light robots as half cells; ice light blue, ore brown, rubble darkens the sand, lichen
green tinted by its team.
"""

from __future__ import annotations

from typing import Any

import numpy as np

TEAM = np.array([[50, 110, 230], [220, 60, 50]], np.float32)
SAND = np.array([205, 180, 130], np.float32)
ICE = np.array([150, 220, 255], np.float32)
ORE = np.array([150, 95, 50], np.float32)
LICHEN = np.array([60, 190, 80], np.float32)


def draw_state(state: Any, cell: int = 8) -> np.ndarray:
    """``uint8 [S * cell, S * cell, 3]``: the board of one game (``state``: one Jux state's
    arrays, indexed ``[x, y]`` as Jux stores them; drawn with rows = y)."""
    board = state.board
    rubble = np.asarray(board.map.rubble, np.float32).T  # [y, x]
    size = rubble.shape[0]
    img = np.broadcast_to(SAND, (size, size, 3)) * (1.0 - 0.6 * np.clip(rubble / 100.0, 0, 1)
                                                     )[..., None]
    img = np.where(np.asarray(board.map.ice).T[..., None], ICE, img)
    img = np.where(np.asarray(board.map.ore).T[..., None], ORE, img)

    lichen = np.asarray(board.lichen, np.float32).T
    strains = np.asarray(board.lichen_strains).T.astype(np.int64)
    owner = np.full(256, -1)
    for team in range(2):
        n = int(state.teams.n_factory[team])
        owner[np.asarray(state.teams.factory_strains[team][:n], np.int64) % 256] = team
    strain_team = np.where(lichen > 0, owner[strains % 256], -1)
    for team in range(2):
        tint = 0.75 * LICHEN + 0.25 * TEAM[team]
        amount = np.clip(lichen / 100.0, 0.25, 1.0)[..., None]
        img = np.where((strain_team == team)[..., None], (1 - amount) * img + amount * tint, img)

    big = np.repeat(np.repeat(img, cell, 0), cell, 1)
    for team in range(2):
        n = int(state.n_factories[team])
        for x, y in np.asarray(state.factories.pos.pos[team][:n], np.int64):
            big[(y - 1) * cell:(y + 2) * cell, (x - 1) * cell:(x + 2) * cell] = TEAM[team] * 0.6
            big[y * cell:(y + 1) * cell, x * cell:(x + 1) * cell] = TEAM[team]
        n = int(state.n_units[team])
        pos = np.asarray(state.units.pos.pos[team][:n], np.int64)
        heavy = np.asarray(state.units.unit_type[team][:n]) == 1
        for (x, y), is_heavy in zip(pos, heavy, strict=True):
            pad = 1 if is_heavy else cell // 4
            colour = np.minimum(TEAM[team] * 1.3 + 40, 255)
            big[y * cell + pad:(y + 1) * cell - pad, x * cell + pad:(x + 1) * cell - pad] = colour
    return big.astype(np.uint8)
