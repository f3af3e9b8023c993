"""Compiled per-step conversions of the microRTS adapter (numba).

A step of the adapter moves three things between the engine's shared buffers and its own:
actions in, rewards and observations/masks out. Written as numpy calls that is some twenty
calls per step, each paying its fixed cost and a pass over memory the engine just evicted from
the cache; on small maps (8x8: 0.2 ms per engine step for 12 games) that fixed work was a
third of the engine's time. Here each direction is one compiled loop over the seat slots.

Seat slot ``k = e * A + s`` reads and writes engine row ``slot_row[k]`` (a row of the adapter's
one buffer for all its Java clients; -1 for a dead seat) and sees the board rotated by 180
degrees when ``slot_rot[k]``. The conventions (planes, mask columns, rotation) are the
adapter's; :mod:`games.microrts.adapter` keeps numpy versions of the rare paths (fog of war,
final observations) and the tests compare both on the real engine.

:data:`AVAILABLE` is False when numba cannot be imported (the adapter then converts with numpy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

try:  # numba is in the `microrts` extra; without it the adapter's numpy path runs
    import numba
except ImportError:  # pragma: no cover - exercised only on installs without numba
    numba = None  # type: ignore[assignment]
AVAILABLE = numba is not None


def njit(**options: Any) -> Any:
    """``numba.njit(**options)``, or leave the function as it is without numba."""
    if numba is None:  # pragma: no cover
        return lambda fn: fn
    return numba.njit(**options)


_OWN = 11  # engine plane "owner: own"
_WIN_LOSS = 1  # the win/loss column of the engine's reward rows (Java order)


@njit(cache=True, nogil=True)
def write_actions(actions: np.ndarray, slot_row: np.ndarray, slot_rot: np.ndarray,
                  units: np.ndarray, engine_act: np.ndarray) -> None:  # pragma: no cover
    """``actions`` ``int [S, HW, 7]`` -> the engine's action rows ``int32 [R, HW, 7]``, at the
    cells where ``units`` ``bool [S, HW]`` (the mask rows of the batch these actions answer)
    says the slot has a unit. The engine reads a player's actions only at its own units'
    cells, so the other cells are left as they are, and neither read nor written.

    Rotated slots: cells reversed, directions ``d -> (d + 2) % 4``, attack offsets
    ``k -> 48 - k``; their no-op cells are written as zeros (the values are checked before:
    :func:`first_out_of_range`)."""
    cells = actions.shape[1]
    for k in range(actions.shape[0]):
        row = slot_row[k]
        if row < 0:
            continue
        rot = slot_rot[k]
        for c in range(cells):
            if not units[k, c]:
                continue
            src = actions[k, c]
            if rot:
                dst = engine_act[row, cells - 1 - c]
                if src[0] == 0:  # a no-op: nothing else of it is read
                    for j in range(7):
                        dst[j] = 0
                    continue
                dst[0] = src[0]
                for j in range(1, 5):
                    dst[j] = (src[j] + 2) & 3
                dst[5] = src[5]
                dst[6] = 48 - src[6]
            else:
                dst = engine_act[row, c]
                for j in range(7):
                    dst[j] = src[j]


@njit(cache=True, nogil=True)
def first_out_of_range(actions: np.ndarray, nvec: np.ndarray) -> int:  # pragma: no cover
    """The first row of ``actions`` ``int [M, 7]`` with a component outside ``0..nvec-1``, or
    -1 (every cell: the rule of every step, checked before anything of it is written)."""
    for i in range(actions.shape[0]):
        for j in range(actions.shape[1]):
            if actions[i, j] < 0 or actions[i, j] >= nvec[j]:
                return i
    return -1


@njit(cache=True, nogil=True)
def read_fogged_observations(planes: np.ndarray, slot_row: np.ndarray, slot_rot: np.ndarray,
                             sight: np.ndarray, width: int, visible_plane: int,
                             obs: np.ndarray, state: np.ndarray,
                             visible: np.ndarray) -> None:  # pragma: no cover - compiled
    """Fog of war: the engine's unfogged planes ``int32 [R, HW, 27]`` -> each slot's unfogged
    ``state`` and its ``obs`` ``uint8 [S, C, HW]``, where only the cells within sight of the
    slot's own units keep their planes and ``visible_plane`` marks them (the engine's rule:
    squared distance <= the unit type's ``sight`` radius squared). ``visible`` ``bool [HW]``
    is scratch space."""
    cells = planes.shape[1]
    height = cells // width
    for k in range(slot_row.shape[0]):
        row = slot_row[k]
        if row < 0:
            continue
        src = planes[row]
        visible[:] = False
        for c in range(cells):
            if src[c, _OWN] == 0:
                continue
            kind = 0
            for t in range(7):  # unit type planes 14..20: resource .. ranged
                if src[c, 14 + t] != 0:
                    kind = t
                    break
            radius = sight[kind]
            y0, x0 = c // width, c % width
            for y in range(max(0, y0 - radius), min(height, y0 + radius + 1)):
                for x in range(max(0, x0 - radius), min(width, x0 + radius + 1)):
                    if (y - y0) * (y - y0) + (x - x0) * (x - x0) <= radius * radius:
                        visible[y * width + x] = True
        seen, full = obs[k], state[k]
        rot = slot_rot[k]
        for c in range(cells):
            d = cells - 1 - c if rot else c
            v = visible[c]
            seen[visible_plane, d] = 1 if v else 0
            for p in range(planes.shape[2]):
                value = src[c, p]
                full[p, d] = value
                seen[p, d] = value if v else 0


@njit(cache=True, nogil=True)
def read_rewards(rewards: np.ndarray, row_slot: np.ndarray, weights: np.ndarray,
                 raw: np.ndarray, reward: np.ndarray, component_sums: np.ndarray
                 ) -> bool:  # pragma: no cover - compiled
    """One client's reward rows ``float64 [N, 6]`` (engine order) -> its slots of ``raw``
    ``[S, 6]`` and ``reward`` ``float32 [S]`` (weighted sum), added to ``component_sums``;
    True when a win/loss component is set (a game of this client ended)."""
    over = False
    for i in range(rewards.shape[0]):
        k = row_slot[i]
        total = 0.0
        for j in range(rewards.shape[1]):
            value = rewards[i, j]
            raw[k, j] = value
            component_sums[k, j] += value
            total += value * weights[j]
        reward[k] = total
        if rewards[i, _WIN_LOSS] != 0.0:
            over = True
    return over


@njit(cache=True, nogil=True)
def read_observations(planes: np.ndarray, slot_row: np.ndarray, slot_rot: np.ndarray,
                      obs: np.ndarray) -> None:  # pragma: no cover - compiled
    """The engine's one-hot planes ``int32 [R, HW, 27]`` -> the slots' observations ``uint8
    [S, C, HW]`` (planes ``0..26``; the others are the adapter's). Called right after the
    engine wrote them, while they are still in the cache."""
    cells = planes.shape[1]
    for k in range(slot_row.shape[0]):
        row = slot_row[k]
        if row < 0:
            continue
        src = planes[row]
        dst = obs[k]
        if slot_rot[k]:
            for p in range(planes.shape[2]):
                for c in range(cells):
                    dst[p, c] = src[cells - 1 - c, p]
        else:
            for p in range(planes.shape[2]):
                for c in range(cells):
                    dst[p, c] = src[c, p]


@njit(cache=True, nogil=True)
def read_masks(engine_mask: np.ndarray, slot_row: np.ndarray, slot_rot: np.ndarray,
               rotated_columns: np.ndarray, own: np.ndarray, mask: np.ndarray,
               mask_set: np.ndarray) -> None:  # pragma: no cover - compiled
    """The engine's masks ``int32 [R, HW, 78]`` -> the slots' ``bool [S, HW, 78]``, sparsely.

    ``own`` ``uint8 [S, HW]``: the "owner: own" plane of the observation just converted (in
    the slot's frame). Only cells with an own unit have a mask row (the engine's rows of busy
    units are all zero), so only their engine rows are read. ``mask_set`` ``bool [S, HW]``
    records which rows of this mask buffer hold a unit's row, so that stale ones are cleared
    and the others left alone."""
    cells = engine_mask.shape[1]
    width = engine_mask.shape[2]
    for k in range(slot_row.shape[0]):
        row = slot_row[k]
        if row < 0:
            continue
        rot = slot_rot[k]
        for c in range(cells):  # the rotated case apart: the plain copy vectorizes
            if own[k, c] != 0:
                out = mask[k, c]
                if rot:
                    engine = engine_mask[row, cells - 1 - c]
                    for j in range(width):
                        out[j] = engine[rotated_columns[j]] != 0
                else:
                    engine = engine_mask[row, c]
                    for j in range(width):
                        out[j] = engine[j] != 0
                mask_set[k, c] = True
            elif mask_set[k, c]:
                out = mask[k, c]
                for j in range(width):
                    out[j] = False
                mask_set[k, c] = False
