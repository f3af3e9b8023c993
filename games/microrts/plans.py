"""Index plans for the microRTS adapter's buffer conversions: strided copies between the
engine's rows and the seat slots, and the 180-degree rotation of actions and masks."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from games.microrts.options import ACTION_NVEC

# The engine's planes and masks are 0/1 int32: their low byte, viewed in place, is the value.
LOW_BYTE = 0 if sys.byteorder == "little" else 3


@dataclass(frozen=True)
class CopyPlan:
    """Seat slots ``dst`` (flat ``e*A+s``) <-> engine rows ``src`` of one group, one rotation.

    Both are slices (arithmetic progressions), so every copy through a plan is a strided view
    on both sides: no gathers, no temporaries. A ``pairs`` plan moves both seats of self-play
    envs at once: ``dst`` then slices envs and ``src`` self-play games (rows ``2i, 2i+1``), and
    ``swapped`` pairs have seat 0 on player 1 (alternating sides)."""

    group: int
    rotated: bool
    dst: slice
    src: slice
    count: int
    pairs: bool = False
    swapped: bool = False
    games: int = 0  # self-play games of the group (pairs only)

    def dst_view(self, flat: np.ndarray) -> np.ndarray:
        """The plan's slots of ``flat`` ``[E*A, ...]``: ``[K, ...]`` or ``[K, 2, ...]``."""
        if not self.pairs:
            return flat[self.dst]
        return flat.reshape(-1, 2, *flat.shape[1:])[self.dst]

    def src_view(self, rows: np.ndarray) -> np.ndarray:
        """The plan's rows of a group's ``rows`` ``[N, ...]``, in slot order."""
        if not self.pairs:
            return rows[self.src]
        view = rows[:2 * self.games].reshape(self.games, 2, *rows.shape[1:])[self.src]
        return view[:, ::-1] if self.swapped else view


def runs(dst: np.ndarray, src: np.ndarray) -> list[tuple[slice, slice, int]]:
    """Split index pairs (``dst`` increasing) into maximal runs where both ``dst`` and ``src``
    are arithmetic progressions with positive steps: ``(dst slice, src slice, length)``."""
    out = []
    i, n = 0, len(dst)
    while i < n:
        j = i + 1  # the run is [i, j)
        if j < n:
            step_d, step_s = int(dst[j] - dst[i]), int(src[j] - src[i])
            if step_d > 0 and step_s > 0:
                j += 1
                while j < n and dst[j] - dst[j - 1] == step_d and src[j] - src[j - 1] == step_s:
                    j += 1
            else:
                step_d = step_s = 1
        else:
            step_d = step_s = 1
        count = j - i
        out.append((slice(int(dst[i]), int(dst[j - 1]) + 1, step_d),
                    slice(int(src[i]), int(src[j - 1]) + 1, step_s), count))
        i = j
    return out


def rotated_mask_index(nvec: tuple[int, ...], cells: int) -> np.ndarray:
    """Flat gather index turning a ``[cells * sum(nvec)]`` mask row into the 180-degree-rotated
    frame: cells reversed; directions ``d <- (d + 2) % 4``; attack offsets ``k <- n - 1 - k``.
    (The reference for the adapter's sparse mask rotation.)"""
    columns = []
    off = 0
    for comp, n in enumerate(nvec):
        values = np.arange(n)
        if comp in (1, 2, 3, 4):
            values = (values + 2) % 4
        elif comp == 6:
            values = n - 1 - values
        columns.append(off + values)
        off += n
    column = np.concatenate(columns)
    return ((cells - 1 - np.arange(cells))[:, None] * off + column[None, :]).ravel()


# [78]: mask column j of the rotated frame is the engine's column ROTATED_COLUMNS[j]
ROTATED_COLUMNS = rotated_mask_index(ACTION_NVEC, 1)


def rotate_actions(src: np.ndarray, dst: np.ndarray) -> None:
    """Engine actions ``dst`` (int32 ``[K, HW, 7]``) for rotated-frame actions ``src``: cells
    reversed, directions ``d -> (d + 2) % 4``, attack offsets ``k -> 48 - k``. Cells with a
    no-op type are written as all zeros (the engine reads nothing else of them)."""
    cells = src.shape[1]
    k, c = np.nonzero(src[..., 0])
    rows = src[k, c]  # [U, 7]
    rows[:, 1:5] += 2
    rows[:, 1:5] &= 3
    rows[:, 6] = ACTION_NVEC[6] - 1 - rows[:, 6]
    dst[...] = 0
    dst[k, cells - 1 - c] = rows




def byte_view(buffer: np.ndarray) -> np.ndarray:
    """``uint8 [N, HW, C]`` view of the low bytes of a 0/1 ``int32 [N, H, W, C]`` buffer."""
    n, c = buffer.shape[0], buffer.shape[-1]
    return buffer.view(np.uint8).reshape(n, -1, c, 4)[..., LOW_BYTE]

