"""RGB frames of a microRTS board drawn with numpy from the engine's one-hot planes."""

from __future__ import annotations

import numpy as np

_BACKGROUND = (32, 32, 36)
_GRID = (58, 58, 64)
_WALL = (20, 90, 60)
_RESOURCE = (70, 200, 90)
_PLAYER = ((70, 130, 255), (235, 75, 60))  # player 0 blue, player 1 red
_HP = (240, 240, 240)
_ACTING = (255, 220, 60)


def _shapes(cell: int) -> dict[str, np.ndarray]:
    """Boolean ``[cell, cell]`` stencils for each unit type."""
    yy, xx = np.mgrid[0:cell, 0:cell] + 0.5
    center = cell / 2
    dist = np.hypot(yy - center, xx - center)
    margin = max(1, cell // 10)
    square = np.zeros((cell, cell), bool)
    square[margin:cell - margin, margin:cell - margin] = True
    inner = np.zeros((cell, cell), bool)
    border = max(2, cell // 5)
    inner[border:cell - border, border:cell - border] = True
    return {
        "resource": square,
        "base": square,
        "barracks": square & ~inner,
        "worker": dist <= cell * 0.25,
        "light": dist <= cell * 0.33,
        "heavy": dist <= cell * 0.42,
        "ranged": (dist <= cell * 0.36) & (dist >= cell * 0.18),
    }


_TYPES = ("resource", "base", "barracks", "worker", "light", "heavy", "ranged")


def draw_board(raw: np.ndarray, walls: np.ndarray, own_player: int, cell: int = 24) -> np.ndarray:
    """``uint8 [H*cell, W*cell, 3]`` from ``raw`` ``int [H, W, 27]`` (engine planes, owner relative
    to ``own_player``) and ``walls`` ``bool [H, W]``."""
    height, width = walls.shape
    img = np.empty((height * cell, width * cell, 3), np.uint8)
    img[:] = _BACKGROUND
    img[::cell] = _GRID
    img[:, ::cell] = _GRID
    shapes = _shapes(cell)
    bar = max(2, cell // 8)
    for y, x in zip(*np.nonzero(walls), strict=True):
        img[y * cell + 1:(y + 1) * cell, x * cell + 1:(x + 1) * cell] = _WALL
    types = raw[..., 14:21]  # [H, W, 7] resource..ranged
    for y, x in zip(*np.nonzero(types.any(-1)), strict=True):
        kind = _TYPES[int(types[y, x].argmax())]
        if kind == "resource":
            color = _RESOURCE
        else:
            own = bool(raw[y, x, 11])
            player = own_player if own else 1 - own_player
            color = _PLAYER[player if player in (0, 1) else 0]
        tile = img[y * cell:(y + 1) * cell, x * cell:(x + 1) * cell]
        tile[shapes[kind]] = color
        hp = int(raw[y, x, 0:5].argmax())  # 0..4 (4 means 4 or more)
        if kind != "resource" and hp:
            tile[cell - bar - 1:cell - 1, 1:1 + (cell - 2) * hp // 4] = _HP
        if raw[y, x, 22:27].any():  # busy with an action
            tile[1:1 + bar, cell - bar - 1:cell - 1] = _ACTING
    return img
