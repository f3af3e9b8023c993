"""A scripted bot's orders as GridNet actions, and back.

A Java bot answers ``getAction(player, gameState)`` with an ``rts.PlayerAction``: a list of
(unit, unit action) pairs. :func:`orders_to_rows` turns them into the adapter's action layout,
one row per ordered unit at its cell: ``[type, move dir, harvest dir, return dir, produce dir,
produce unit type, attack offset]`` (the 7x7 attack window indexed ``(dy+3)*7 + (dx+3)``).
``NONE`` orders (a bot parking an idle unit, often for 10 cycles) become the 1-cycle no-op:
the bot is simply asked again next cycle. :func:`rows_to_orders` goes back through the
engine's own decoder (``PlayerAction.fromActionArrays``), which the round-trip test uses.

:func:`legal_rows` keeps only what the adapter's masks allow: a bot's order that the engine
would refuse (about 1 in 3,000 measured) becomes a no-op, as the engine itself would make it,
so labels are always legal actions and a recorded log replays what the engine carried out.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from games.microrts.options import ACTION_NVEC

ATTACK_RADIUS = 3  # the 7x7 window of ACTION_NVEC[6] == 49
_OFFSETS = np.cumsum((0, *ACTION_NVEC))[:-1]  # first mask column of each component
_PARAM_COMPONENT = np.array([0, 1, 2, 3, 4, 6])  # the component holding each type's parameter


def orders_to_rows(action: Any, width: int) -> np.ndarray:
    """``int32 [K, 8]`` rows ``[cell, type, move, harvest, return, produce dir, unit type,
    attack]`` of the non-``NONE`` orders in the Java ``PlayerAction`` ``action``."""
    pairs = action.getActions()
    out = np.zeros((int(pairs.size()), 8), np.int32)
    k = 0
    for pair in pairs:
        unit, order = pair.m_a, pair.m_b
        kind = int(order.getType())
        if kind == 0 or kind > 5:  # NONE: the adapter's no-op (asked again next cycle)
            continue
        x, y = int(unit.getX()), int(unit.getY())
        row = out[k]
        row[0], row[1] = y * width + x, kind
        if kind == 5:  # attack location: the offset in the 7x7 window
            dx, dy = int(order.getLocationX()) - x, int(order.getLocationY()) - y
            row[7] = (dy + ATTACK_RADIUS) * (2 * ATTACK_RADIUS + 1) + dx + ATTACK_RADIUS
        else:
            row[1 + kind] = int(order.getDirection())
            if kind == 4:
                row[6] = int(order.getUnitType().ID)
        k += 1
    return out[:k]


def rows_to_orders(rows: np.ndarray, game_state: Any, utt: Any, player: int) -> Any:
    """The Java ``PlayerAction`` the engine decodes from ``rows`` ``[K, 8]`` (as above)."""
    import jpype

    java_rows = jpype.JArray(jpype.JInt, 2)(rows.astype(np.int32).tolist())
    pair = jpype.JClass("rts.PlayerAction").fromActionArrays(
        java_rows, game_state, utt, player, 2 * ATTACK_RADIUS + 1)
    return pair.m_a


def order_list(action: Any) -> list[tuple[int, int, int, int, int, int, int]]:
    """``(unit id, x, y, type, parameter, unit type id, target cell)`` of each non-``NONE``
    order of a Java ``PlayerAction``, sorted: what the round-trip test compares."""
    out = []
    for pair in action.getActions():
        unit, order = pair.m_a, pair.m_b
        kind = int(order.getType())
        if kind == 0:
            continue
        unit_type = order.getUnitType()
        out.append((int(unit.getID()), int(unit.getX()), int(unit.getY()), kind,
                    int(order.getDirection()) if kind != 5 else -1,
                    int(unit_type.ID) if unit_type is not None else -1,
                    int(order.getLocationY()) * 1000 + int(order.getLocationX())
                    if kind == 5 else -1))
    return sorted(out)


def legal_rows(cells: np.ndarray, rows: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Which orders ``rows`` ``[K, 7]`` at ``cells`` ``[K]`` a seat's mask ``bool [HW, 78]``
    allows: the type, and the value of the component it uses (a produce order: its direction
    and unit type). ``bool [K]``."""
    if len(rows) == 0:
        return np.zeros(0, bool)
    kind = rows[:, 0]
    legal = mask[cells, kind]
    comp = _PARAM_COMPONENT[kind]
    legal &= mask[cells, _OFFSETS[comp] + rows[np.arange(len(rows)), comp]]
    produce = kind == 4
    if produce.any():
        legal[produce] &= mask[cells[produce], _OFFSETS[5] + rows[produce, 5]]
    return legal
