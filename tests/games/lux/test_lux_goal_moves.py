"""Goal moves (``to_ice``, ``to_ore``, ``to_home``) against the real engine: each legal goal is
one step nearer its target by Manhattan distance onto a free cell, the engine carries it out,
and goal moves never collide a team's own robots."""

from __future__ import annotations

from typing import Any

import numpy as np

from games.batches import random_actions
from games.lux.adapter import LuxOptions, LuxVecGame
from games.lux.layout import GOALS, MOVES, OFFSETS, PLANE, UNIT

MAX_STEPS = 40  # the adapter tests' game length: one compilation
E = 4
_GOAL0 = OFFSETS[1] + len(MOVES) - len(GOALS)  # the first goal's column in a mask row
_TARGET_PLANE = {"ice": "ice", "ore": "ore", "home": "own_factory"}
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
                for g, goal in enumerate(GOALS):
                    dist = _distance(planes[PLANE[_TARGET_PLANE[goal]]] > 0).reshape(-1)
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
                    dist = _distance(planes[PLANE[_TARGET_PLANE[goal]]] > 0).reshape(-1)
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
