"""Our layout's training steps from a replayed Lux game: each seat's observation planes, masks
and labels at a main-phase step of the official engine (:mod:`games.lux.kaggle_replay` replays
the games).

At each main-phase step the engine's state is brought into Jux and each seat's observation
planes (:func:`games.lux.observe.observe`) and masks (:func:`~games.lux.observe.legal_masks`)
computed. The **labels** are the orders the seats sent at that state, in our components
(:mod:`games.lux.layout`): a unit with a new queue gets its first action's type with its
direction and resource (``move``, ``transfer``, ``pickup``, ``dig``, ``self_destruct``,
``recharge``), a unit without one ``keep``, a factory its action (``none`` without one).

Not representable, hence dropped, and counted per seat (:data:`COUNTS`): amounts (our rules
choose them; not counted), every queued action after the first (``multi_action``: a queue is
a plan, our policy re-decides each step), ``repeat`` and ``n`` other than ours (repeat forever,
once for a self-destruct; ``repeat_n``), a move to the centre (a no-op: ``keep``,
``centre_moves``), an empty queue (it clears the unit's queue: ``keep``, ``empty_queues``). A
new queue the unit cannot pay the update of is ignored by the engine, so labelled ``keep``
(``unpaid``). Labels our masks forbid are counted (``illegal``), not dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from games.lux import engine
from games.lux.kaggle import PLAYERS, KaggleError
from games.lux.kaggle_play import kernels
from games.lux.layout import NVEC, OFFSETS, UNIT

COUNTS = ("steps", "unit_orders", "factory_orders", "multi_action", "repeat_n",
          "centre_moves", "empty_queues", "unpaid", "illegal")
"""label counters per seat (see the module docstring; ``steps``: main-phase steps, ``unit_orders``
and ``factory_orders``: the orders labelled)"""
_TYPE = (UNIT["move"], UNIT["transfer"], UNIT["pickup"], UNIT["dig"], UNIT["self_destruct"],
         UNIT["recharge"])  # the engine's action types 0..5 -> ours
_REPEAT = (1, 1, 1, 1, 0, 1)  # what games.lux.orders.to_jux queues, by engine type


def step_labels(env: Any, pair: list[Any], counts: dict[str, np.ndarray]
                ) -> tuple[np.ndarray, list[list[int]], list[list[int]]]:
    """Both seats' labels ``int16 [2, S * S, 6]`` of the orders ``pair`` at the engine's
    current state, and the cells of each seat's units and factories; adds to ``counts``."""
    size = int(env.state.board.width)
    labels = np.zeros((2, size * size, len(NVEC)), np.int16)
    unit_cells: list[list[int]] = [[], []]
    factory_cells: list[list[int]] = [[], []]
    for seat, player in enumerate(PLAYERS):
        orders = pair[seat] if isinstance(pair[seat], dict) else {}
        for uid, unit in env.state.units[player].items():
            cell = int(unit.pos.y) * size + int(unit.pos.x)
            unit_cells[seat].append(cell)
            if uid in orders:
                _unit_label(labels[seat, cell], orders[uid], unit, env.env_cfg, counts, seat)
        for fid, factory in env.state.factories[player].items():
            cell = int(factory.pos.y) * size + int(factory.pos.x)
            factory_cells[seat].append(cell)
            if fid in orders:
                labels[seat, cell, 5] = int(orders[fid]) + 1
                counts["factory_orders"][seat] += 1
    return labels, unit_cells, factory_cells


def _unit_label(row: np.ndarray, queue: list[list[int]], unit: Any, env_cfg: Any,
                counts: dict[str, np.ndarray], seat: int) -> None:
    """Write a unit's label for its new ``queue`` into ``row`` (``keep`` stays 0)."""
    if unit.power < env_cfg.ROBOTS[unit.unit_type.name].ACTION_QUEUE_POWER_COST:
        counts["unpaid"][seat] += 1
        return
    if not queue:
        counts["empty_queues"][seat] += 1
        return
    kind, direction, resource, _, repeat, n = (int(v) for v in queue[0])
    counts["multi_action"][seat] += len(queue) > 1
    counts["repeat_n"][seat] += (repeat, n) != (_REPEAT[kind], 1)
    if kind == 0 and direction == 0:
        counts["centre_moves"][seat] += 1
        return
    counts["unit_orders"][seat] += 1
    row[0] = _TYPE[kind]
    if kind == 0:
        row[1] = direction - 1
    elif kind == 1:
        row[2], row[3] = direction, resource
    elif kind == 2:
        row[4] = resource


def illegal_count(labels: np.ndarray, mask: np.ndarray, unit_cells: list[int],
                  factory_cells: list[int]) -> int:
    """How many of one seat's unit and factory labels ``[S * S, 6]`` its ``mask`` forbids."""
    units = np.asarray(unit_cells, np.int64)
    rows, m = labels[units].astype(np.int64), mask[units]
    k = np.arange(len(units))
    kind = rows[:, 0]
    ok = m[k, kind]
    ok &= (kind != UNIT["move"]) | m[k, OFFSETS[1] + rows[:, 1]]
    ok &= (kind != UNIT["transfer"]) | (m[k, OFFSETS[2] + rows[:, 2]]
                                        & m[k, OFFSETS[3] + rows[:, 3]])
    ok &= (kind != UNIT["pickup"]) | m[k, OFFSETS[4] + rows[:, 4]]
    factories = np.asarray(factory_cells, np.int64)
    f_ok = mask[factories, OFFSETS[5] + labels[factories, 5].astype(np.int64)]
    return int((~ok).sum() + (~f_ok).sum())


class StepEncoder:
    """Our observation, masks and labels of a replay's main-phase steps.

    Jux's import of the engine's state (``State.from_lux``) costs ~0.2 s with a few dozen
    units, so Jux keeps its own copy of the game, stepped with the same orders
    (``JuxAction.from_lux``), and the state is imported again only where the copy's view
    differs from the engine's (:func:`games.lux.parity.differences`: Jux's known differences,
    an order Jux refuses)."""

    def __init__(self, rules: engine.Rules, source: str) -> None:
        self.k = kernels(rules.name)
        self.source = source
        self.counts = {name: np.zeros(2, np.int64) for name in COUNTS}
        self.state: Any = None
        self.imports = 0
        """how often the engine's state was imported into Jux"""

    def sync(self, env: Any) -> Any:
        """Jux's state equal to the engine's (stepped along, or imported)."""
        from games.lux.parity import differences, jux_view, official_view

        if self.state is not None and not differences(
                jux_view(self.state, self.k.jux), official_view(env.state.get_obs(), False)):
            return self.state
        try:
            self.state = self.k.from_official(env)
        except (AssertionError, ValueError, IndexError) as exc:
            raise KaggleError(f"{self.source}: step {env.state.real_env_steps} does not fit "
                              f"Jux's buffers ({type(exc).__name__}: {exc})"[:300]) from None
        self.imports += 1
        return self.state

    def advance(self, pair: list[Any]) -> None:
        """Step Jux's copy with the orders ``pair`` (dropped if Jux cannot take them)."""
        orders = {p: a for p, a in zip(PLAYERS, pair, strict=True) if isinstance(a, dict)}
        try:
            action = self.k.jux.actions.JuxAction.from_lux(self.state, orders)
        except (AssertionError, ValueError, IndexError, KeyError):
            self.state = None
            return
        self.state = self.k.step(self.state, action)

    def encode(self, env: Any, pair: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Both seats' observation, masks and labels at the engine's current state, whose
        orders are ``pair``."""
        state = self.sync(env)
        obs = np.asarray(self.k.observe(state))
        mask = np.asarray(self.k.masks(state))
        labels, unit_cells, factory_cells = step_labels(env, pair, self.counts)
        for seat in range(2):
            self.counts["illegal"][seat] += illegal_count(labels[seat], mask[seat],
                                                          unit_cells[seat], factory_cells[seat])
        self.counts["steps"] += 1
        self.advance(pair)
        return obs, mask, labels

    def totals(self) -> dict[str, list[int]]:
        return {name: [int(v) for v in value] for name, value in self.counts.items()}
