"""The order log's conversions without the engine: seat-frame actions (rotated or not) ->
log rows -> engine-frame orders -> back into the seat frame give the actions played; a
produce order keeps its unit type; the mask filter keeps exactly the legal orders."""

from __future__ import annotations

import numpy as np

from games.microrts.options import ACTION_NVEC, MASK_WIDTH
from games.microrts.orderlog import log_to_rows, step_orders
from games.microrts.orders import legal_rows
from games.microrts.teacher_game import rotate_rows

HW = 64  # an 8x8 board
OFFSETS = np.cumsum((0, *ACTION_NVEC))[:-1]


def random_orders(rng: np.random.Generator, envs: int, seats: int) -> np.ndarray:
    """``[E, A, HW, 7]`` actions: about one cell in five holds an order of a random type,
    its used parameter random, and garbage in the components that type does not use."""
    actions = rng.integers(0, np.array(ACTION_NVEC), (envs, seats, HW, len(ACTION_NVEC)))
    actions[..., 0] = np.where(rng.random((envs, seats, HW)) < 0.2,
                               rng.integers(1, 6, (envs, seats, HW)), 0)
    actions[actions[..., 0] == 0] = 0
    return actions


def used_view(actions: np.ndarray) -> np.ndarray:
    """The actions with every component the type does not use zeroed (what an order is)."""
    out = np.zeros_like(actions)
    kind = actions[..., 0]
    out[..., 0] = kind
    for component, uses in ((1, (1,)), (2, (2,)), (3, (3,)), (4, (4,)), (5, (4,)), (6, (5,))):
        used = np.isin(kind, uses)
        out[..., component] = np.where(used, actions[..., component], 0)
    return out


def test_log_round_trip_through_the_engine_frame() -> None:
    rng = np.random.default_rng(0)
    envs, seats = 3, 2
    actions = random_orders(rng, envs, seats)  # seat frame
    players = np.array([[0, 1], [1, 0], [0, 1]])
    rotated = players == 1  # seats playing player 1 see the board turned
    steps = np.array([5, 0, 17])
    env, log = step_orders(actions, players, rotated, steps)
    assert len(log) == int((actions[..., 0] > 0).sum())
    assert (log[:, 0] == steps[env]).all()
    assert (np.lexsort((log[:, 2], log[:, 1], env)) == np.arange(len(log))).all()
    engine = log_to_rows(log)  # [K, 8] engine frame: cell + 7 components
    rebuilt = np.zeros_like(actions)
    for e in range(envs):
        for s in range(seats):
            rows = engine[(env == e) & (log[:, 1] == players[e, s])]
            cells, acts = rows[:, 0], rows[:, 1:]
            if rotated[e, s]:
                cells, acts = rotate_rows(cells, acts, HW)
            rebuilt[e, s, cells] = acts
    np.testing.assert_array_equal(rebuilt, used_view(actions))


def test_rotation_is_its_own_inverse() -> None:
    rng = np.random.default_rng(1)
    acts = used_view(random_orders(rng, 1, 1))[0, 0]
    cells = np.flatnonzero(acts[:, 0])
    turned_cells, turned = rotate_rows(cells, acts[cells], HW)
    assert not np.array_equal(turned_cells, cells)
    back_cells, back = rotate_rows(turned_cells, turned, HW)
    np.testing.assert_array_equal(back_cells, cells)
    np.testing.assert_array_equal(back, acts[cells])


def test_mask_filter_keeps_exactly_the_legal_orders() -> None:
    rng = np.random.default_rng(2)
    acts = used_view(random_orders(rng, 1, 1))[0, 0]
    cells = np.flatnonzero(acts[:, 0])
    rows = acts[cells]
    mask = rng.random((HW, MASK_WIDTH)) < 0.7
    expected = mask[cells, rows[:, 0]].copy()
    for component, uses in ((1, 1), (2, 2), (3, 3), (4, 4), (6, 5)):
        hit = rows[:, 0] == uses
        expected[hit] &= mask[cells[hit], OFFSETS[component] + rows[hit, component]]
    produce = rows[:, 0] == 4
    expected[produce] &= mask[cells[produce], OFFSETS[5] + rows[produce, 5]]
    np.testing.assert_array_equal(legal_rows(cells, rows, mask), expected)
    assert expected.any() and not expected.all()
