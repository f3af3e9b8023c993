"""Goal moves (``to_ice``, ``to_ore``, ``to_home``, ``to_rubble``, ``to_enemy_lichen``)
against the real engine: each legal goal is one step nearer its target by Manhattan distance
onto a free cell (ice and ore no robot stands on; home a thirsty factory's tiles where they are
at most the detour further; rubble in the way of the team's lichen; the other team's lichen),
the engine carries it out, and goal moves never collide a team's own robots."""

from __future__ import annotations

from typing import Any

import numpy as np

from games.batches import random_actions
from games.lux.adapter import LuxOptions, LuxVecGame
from games.lux.layout import (
    GOALS,
    HOME_DETOUR,
    MOVES,
    OBS_PLANES,
    OFFSETS,
    PLANE,
    THIRSTY_WATER,
    UNIT,
)

MAX_STEPS = 40  # the adapter tests' game length: one compilation
E = 4
_GOAL0 = OFFSETS[1] + len(MOVES) - len(GOALS)  # the first goal's column in a mask row
_STEPS = ((-1, 0), (0, 1), (1, 0), (0, -1))  # (dy, dx) of up, right, down, left


def _game(seed: int) -> LuxVecGame:
    return LuxVecGame(LuxOptions(max_steps=MAX_STEPS), E, seed=seed)


def _distance(targets: np.ndarray) -> np.ndarray:
    """Brute-force Manhattan distance of every cell to the nearest target (64 without one)."""
    ys, xs = np.nonzero(targets)
    gy, gx = np.mgrid[:targets.shape[0], :targets.shape[1]]
    if not len(ys):
        return np.full(targets.shape, 64)
    return np.minimum((np.abs(gy[..., None] - ys) + np.abs(gx[..., None] - xs)).min(-1), 64)


def _home_distance(st: Any, team: int) -> np.ndarray:
    """Brute force of ``to_home``'s target: the nearest own factory tile, or a thirsty
    factory's when at most :data:`HOME_DETOUR` further (64 at most)."""
    n = int(st.n_factories[team])
    tiles = [np.zeros((48, 48), bool) for _ in range(n)]
    for f in range(n):
        x, y = (int(v) for v in st.factories.pos.pos[team][f])
        tiles[f][max(y - 1, 0):y + 2, max(x - 1, 0):x + 2] = True
    each = [_distance(t) for t in tiles] or [np.full((48, 48), 64)]
    nearest = np.min(each, 0)
    thirsty = [d for f, d in enumerate(each)
               if int(st.factories.cargo.stock[team][f][2]) < THIRSTY_WATER]
    to_thirsty = np.min(thirsty, 0) if thirsty else np.full((48, 48), 64)
    return np.where(to_thirsty <= nearest + HOME_DETOUR, to_thirsty, nearest)


def _rubble_targets(planes: np.ndarray, occupied: np.ndarray) -> np.ndarray:
    """Brute force of ``to_rubble``'s targets from a seat's planes: free rubble on no factory
    tile, ice or ore, on or next to an own factory tile or own lichen."""
    grows = (planes[PLANE["own_factory"]] > 0) | (planes[PLANE["own_lichen"]] > 0)
    near = np.zeros_like(grows)
    for y, x in zip(*np.nonzero(grows), strict=True):
        for dy, dx in ((0, 0), *_STEPS):
            if 0 <= y + dy < 48 and 0 <= x + dx < 48:
                near[y + dy, x + dx] = True
    factory = (planes[PLANE["own_factory"]] > 0) | (planes[PLANE["enemy_factory"]] > 0)
    resource = (planes[PLANE["ice"]] > 0) | (planes[PLANE["ore"]] > 0)
    return (near & (planes[PLANE["rubble"]] > 0) & ~factory & ~resource
            & ~occupied.reshape(48, 48))


def _goal_distance(planes: np.ndarray, occupied: np.ndarray, st: Any, team: int,
                   goal: str) -> np.ndarray:
    """``[48 * 48]``: each cell's distance to where ``goal`` leads, computed here."""
    if goal == "home":
        return _home_distance(st, team).reshape(-1)
    if goal == "rubble":
        return _distance(_rubble_targets(planes, occupied)).reshape(-1)
    if goal == "enemy_lichen":
        return _distance((planes[PLANE["enemy_lichen"]] > 0)
                         & ~occupied.reshape(48, 48)).reshape(-1)
    return _distance((planes[PLANE[goal]] > 0) & ~occupied.reshape(48, 48)).reshape(-1)


def _units(st: Any, team: int) -> dict[int, int]:
    """unit id -> cell (``y * 48 + x``) of a team's robots."""
    return {int(st.units.unit_id[team][i]): int(st.units.pos.pos[team][i][1]) * 48
            + int(st.units.pos.pos[team][i][0]) for i in range(int(st.n_units[team]))}


def _goal_play(game: LuxVecGame, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Random legal play in which every robot with a legal goal moves by one of them."""
    actions = random_actions(game.spec.action_space, mask, rng, (E, 2))
    goals = mask[..., _GOAL0:_GOAL0 + len(GOALS)]
    has = goals.any(-1)
    pick = np.argmax(goals + rng.random(goals.shape), -1)
    actions[..., 0] = np.where(has, UNIT["move"], actions[..., 0])
    actions[..., 1] = np.where(has, len(MOVES) - len(GOALS) + pick, actions[..., 1])
    return actions


def test_a_legal_goal_steps_one_nearer_onto_a_free_cell_and_the_engine_moves_there() -> None:
    game = _game(seed=31)
    batch = game.reset()
    rng = np.random.default_rng(31)
    for _ in range(8):  # factories build robots
        batch = game.step(random_actions(game.spec.action_space, batch.action_mask, rng,
                                         (E, 2)))
    checked = {g: 0 for g in GOALS}
    moved = 0
    for _ in range(20):
        actions = _goal_play(game, batch.action_mask, rng)
        before = [game.host_state(e) for e in range(E)]
        obs, mask = batch.obs, batch.action_mask
        batch = game.step(actions)
        for e in np.flatnonzero(~batch.terminated):
            after = game.host_state(e)
            for seat in range(2):
                planes = obs[e, seat]
                occupied = np.zeros(48 * 48, bool)
                for team in range(2):
                    occupied[list(_units(before[e], team).values())] = True
                dists = {goal: _goal_distance(planes, occupied, before[e], seat, goal)
                         for goal in GOALS}
                for g, goal in enumerate(GOALS):
                    dist = dists[goal]
                    legal = mask[e, seat, :, _GOAL0 + g]
                    for cell in np.flatnonzero(legal):
                        y, x = divmod(int(cell), 48)
                        nearer = [(y + dy) * 48 + x + dx for dy, dx in _STEPS
                                  if 0 <= y + dy < 48 and 0 <= x + dx < 48
                                  and dist[(y + dy) * 48 + x + dx] < dist[cell]
                                  and not occupied[(y + dy) * 48 + x + dx]]
                        assert dist[cell] > 0 and nearer, (e, seat, goal, cell)
                        checked[goal] += 1
                # the chosen goal moves: each robot ends one step nearer, or stands (yielded)
                ids_after = _units(after, seat)
                for uid, cell in _units(before[e], seat).items():
                    row = actions[e, seat, cell]
                    if row[0] != UNIT["move"] or row[1] < len(MOVES) - len(GOALS):
                        continue
                    goal = GOALS[int(row[1]) - (len(MOVES) - len(GOALS))]
                    dist = dists[goal]
                    if uid not in ids_after:
                        continue  # lost to an enemy robot's collision
                    new = ids_after[uid]
                    assert new == cell or dist[new] == dist[cell] - 1, (e, seat, goal)
                    moved += new != cell
    assert min(checked.values()) > 10 and moved > 20, (checked, moved)


def test_goal_moves_never_collide_own_robots() -> None:
    """Robots moving by goals, and robots standing still beside them, are lost only next to
    enemy robots (or to an own robot whose queue goes on moving it)."""
    game = _game(seed=32)
    batch = game.reset()
    rng = np.random.default_rng(32)
    for _ in range(8):  # factories build robots
        batch = game.step(random_actions(game.spec.action_space, batch.action_mask, rng,
                                         (E, 2)))
    stay = [UNIT[k] for k in ("recharge", "dig", "pickup", "transfer")]
    checked = 0
    for _ in range(MAX_STEPS + 20):
        actions = _goal_play(game, batch.action_mask, rng)
        kind = actions[..., 0]
        goal_move = (kind == UNIT["move"]) & (actions[..., 1] >= len(MOVES) - len(GOALS))
        # robots without a goal stand still where they can (no primitive moves, no
        # self-destructs), else keep their queue
        can = batch.action_mask[..., :len(UNIT)]
        standing = np.full(kind.shape, UNIT["keep"])
        for k in stay:
            standing = np.where(can[..., k], k, standing)
        actions[..., 0] = np.where(goal_move, kind, standing)
        actions[..., 5] = 0  # no builds (a robot built onto a robot on the centre hits it)
        before = [game.host_state(e) for e in range(E)]
        batch = game.step(actions)
        for e in np.flatnonzero(~batch.terminated):
            after = game.host_state(e)
            cells = [_units(before[e], team) for team in range(2)]
            for team in range(2):
                enemy = np.array(list(cells[1 - team].values()) or [10**6], np.int64)
                ey, ex = np.divmod(enemy, 48)
                keepers = np.array([c for c in cells[team].values()
                                    if actions[e, team, c, 0] == UNIT["keep"]] or [10**6])
                ky, kx = np.divmod(keepers, 48)
                survivors = set(_units(after, team))
                for uid, cell in cells[team].items():
                    y, x = divmod(cell, 48)
                    if (np.abs(ey - y) + np.abs(ex - x)).min() <= 2:
                        continue  # an enemy robot may have hit it
                    if (np.abs(ky - y) + np.abs(kx - x)).min() == 1:
                        continue  # an own robot's queue may have moved it here
                    if actions[e, team, cell, 0] == UNIT["keep"]:
                        continue
                    checked += 1
                    assert uid in survivors, f"env {e} team {team}: a robot lost to its own team"
    assert checked > 200, checked


def test_home_leads_to_a_thirsty_factory_within_the_detour() -> None:
    """``to_home``'s distances (:func:`games.lux.observe.home_distances`) against the brute
    force, on a real start with one factory of each team watered well (not thirsty): cells
    nearer that factory are led to a thirsty one where it is at most the detour further."""
    from games.lux.bots import SeatPlanes, home_fields
    from games.lux.observe import home_distances, observe

    game = _game(seed=33)
    game.reset()
    st = game.host_state(0)
    stock = np.array(st.factories.cargo.stock)
    stock[:, :, 2] = THIRSTY_WATER - 1
    stock[:, 0, 2] = 1000
    st = st._replace(factories=st.factories._replace(
        cargo=st.factories.cargo._replace(stock=stock)))
    fields = np.asarray(home_distances(st))
    plain = st._replace(factories=st.factories._replace(cargo=st.factories.cargo._replace(
        stock=np.full_like(stock, 1000))))
    for team in range(2):
        assert int(st.n_factories[team]) >= 2
        np.testing.assert_array_equal(fields[team], _home_distance(st, team))
        nearest = _home_distance(plain, team)
        detour = fields[team] != nearest
        assert detour.any()  # the well-watered factory's surroundings look past it
        assert (fields[team][detour] > nearest[detour]).all()
        assert (fields[team][detour] <= nearest[detour] + HOME_DETOUR).all()
    # the goal teachers read the same field off the observation (factory centres and water)
    import jax

    obs = np.asarray(jax.jit(observe)(jax.tree_util.tree_map(jax.numpy.asarray, st)))
    obs = obs.reshape(2, len(OBS_PLANES), 48, 48)
    seen, _ = home_fields(SeatPlanes.read(obs))
    board = fields < 64
    centre = obs[:, PLANE["own_factory_centre"]] > 0
    np.testing.assert_array_equal(seen[board & ~centre], fields[board & ~centre])
