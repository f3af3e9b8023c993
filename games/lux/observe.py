"""Observations and legal-action masks of Lux seats, computed from Jux states on the device.

Functions of one game's ``jux.state.State`` (the adapter ``vmap``\\ s and jits them); the layout
is :mod:`games.lux.layout`'s. Masks follow the rules Jux checks when it executes an action, so
a masked-in choice is one the engine carries out this turn:

- every type but ``keep`` needs the queue-update power (light 1, heavy 10) on top of its own
  cost;
- ``move``: onto the board, not onto an enemy factory tile, with the power the target's rubble
  asks for; a goal (``to_ice``, ``to_ore``, ``to_home``, ``to_rubble``, ``to_enemy_lichen``)
  where :func:`goal_steps` finds a step;
- ``transfer``: to an own factory tile (the unit's own cell included) or an adjacent own unit,
  of a resource the unit holds (power: at least 2 after the update);
- ``pickup``: on an own factory tile, of power the factory holds or water beyond its reserve
  (:data:`~games.lux.layout.WATER_RESERVE`), with room in the unit (ice, ore and metal are never
  picked up: factories refine ice and ore at once, and a unit can do nothing with metal);
- ``dig``: off factory tiles, with the dig's power, where there is rubble, ice, ore or lichen not
  of the seat's own strains;
- ``self_destruct``: with its power; ``recharge``: with the battery not full;
- factory builds: with the metal and power, and only while the team's unit slots (the engine's
  ``max_units``) cannot overflow; ``water``: with the watering's water cost plus the step's
  consumption plus a reserve, the water the factory drinks in the steps the game has left, at
  most :data:`~games.lux.layout.WATER_RESERVE` (the pickups' reserve): watering never starves a
  factory (a factory without water is lost, and a team without factories loses), and in the
  last steps every drop may go to the lichen. The cost is bounded from above without the
  engine's flood fill (:func:`water_cost_bound`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from games.lux.fields import box_count, home_rule
from games.lux.layout import (
    GOALS,
    MASK_WIDTH,
    NEAR_RANGE,
    NVEC,
    OBS_PLANES,
    OFFSETS,
    ROBOTS_NEAR_RADIUS,
    ROBOTS_NEAR_SCALE,
    THIRSTY_WATER,
    WATER_RESERVE,
)

# Jux's directions: centre, up, right, down, left as (dx, dy)
DELTA = jnp.array([[0, 0], [0, -1], [1, 0], [0, 1], [-1, 0]], dtype=jnp.int32)
NONE_ID = 127  # Jux's empty marker in int8 id maps (imax)


def robot_table(env_cfg: Any, field: str) -> jnp.ndarray:
    """``[light, heavy]`` values of a robot constant."""
    return jnp.array([getattr(r, field) for r in env_cfg.ROBOTS])


def _cell(pos: jnp.ndarray, size: int, valid: jnp.ndarray) -> jnp.ndarray:
    """Flat cell index ``y * S + x`` of ``pos [..., 2]`` (x, y); ``S * S`` where not valid."""
    x, y = pos[..., 0].astype(jnp.int32), pos[..., 1].astype(jnp.int32)
    inside = (x >= 0) & (x < size) & (y >= 0) & (y < size)
    return jnp.where(valid & inside, y * size + x, size * size)


def factory_team_map(state: Any) -> jnp.ndarray:
    """``int [S, S]`` (x, y): the team owning each factory tile, -1 elsewhere."""
    occ = state.board.factory_occupancy_map.astype(jnp.int32)
    idx = state.factory_id2idx.at[occ].get(mode="fill", fill_value=NONE_ID)
    return jnp.where(occ == NONE_ID, -1, idx[..., 0].astype(jnp.int32))


def unit_team_map(state: Any) -> jnp.ndarray:
    """``int [S, S]`` (x, y): the team of the unit on each cell, -1 where none."""
    ids = state.board.units_map.astype(jnp.int32)
    none = jnp.iinfo(state.board.units_map.dtype).max
    idx = state.unit_id2idx.at[ids].get(mode="fill", fill_value=none)
    return jnp.where(ids == none, -1, idx[..., 0].astype(jnp.int32))


def strain_team_map(state: Any) -> jnp.ndarray:
    """``int [S, S]`` (x, y): the team whose lichen strain grows on each cell, -1 where none."""
    strains = state.teams.factory_strains.astype(jnp.int32)  # [2, F]
    n = state.teams.n_factory.astype(jnp.int32)
    valid = jnp.arange(strains.shape[1])[None, :] < n[:, None]
    owner = jnp.full(256, -1, jnp.int32)
    owner = owner.at[jnp.where(valid, strains, 255)].set(
        jnp.broadcast_to(jnp.arange(2)[:, None], strains.shape), mode="drop")
    owner = owner.at[255].set(-1)
    lichen = state.board.lichen > 0
    return jnp.where(lichen, owner[state.board.lichen_strains.astype(jnp.int32)], -1)


def _occupants(id_map: jnp.ndarray, id2idx: jnp.ndarray, none: int) -> tuple[jnp.ndarray, ...]:
    """Per cell (flat ``y * S + x``): the team and slot of the unit or factory whose id
    ``id_map [x, y]`` holds, and whether there is one (team 0 and slot 0 where none)."""
    ids = id_map.T.reshape(-1).astype(jnp.int32)
    there = ids != none
    idx = id2idx.at[jnp.where(there, ids, 0)].get(mode="fill", fill_value=0).astype(jnp.int32)
    return jnp.where(there, idx[:, 0], 0), jnp.where(there, idx[:, 1], 0), there


def _cell_rows(table: jnp.ndarray, team: jnp.ndarray, slot: jnp.ndarray,
               there: jnp.ndarray) -> jnp.ndarray:
    """``[cells, K]``: per cell the row ``table[team, slot]`` of a per-team table ``[2, N,
    K]`` (the :func:`_occupants` of the cells), zeros where ``there`` is false. One gather of
    whole rows from the flattened table: on a CPU a gather per value and cell costs 1.5-2x."""
    teams, n, k = table.shape
    flat = jnp.concatenate([table.reshape(teams * n, k), jnp.zeros((1, k), table.dtype)])
    return flat[jnp.where(there, team * n + slot, teams * n)]


def manhattan_distance(targets: jnp.ndarray, limit: int = NEAR_RANGE) -> jnp.ndarray:
    """``int32 [..., S, S]``: Manhattan steps from each cell to the nearest ``targets`` cell
    (the last two axes; obstacles ignored), exact below ``limit`` and ``limit`` from there on.

    Separable: the distance along one axis, then along the other. Along an axis the distance
    is ``min over j of (d[j] + |i - j|)``: two sweeps, ``d[i] = min(d[i], d[i - 1] + 1)`` one
    way and then the other, instead of a breadth-first search's ``S`` rounds. Each sweep is a
    ``lax.scan`` over the axis moved to the front: on a CPU 1.5x faster than running minimums
    (``lax.cummin``), which XLA lowers as a log-depth scan of strided slices. The sweeps run in
    ``int8`` (``limit`` at most 126, so ``limit + 1`` fits): 2.9x faster than ``int16`` on a
    CPU (session 48, 256 games x 6 boards: 9 against 26 ms)."""
    if not 0 < limit <= 126:
        raise ValueError(f"manhattan_distance: limit {limit} is outside 1..126 (int8 sweeps)")

    def sweeps(dist: jnp.ndarray) -> jnp.ndarray:  # along axis 0
        def step(carry: jnp.ndarray, row: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
            nearest = jnp.minimum(row, carry + 1)
            return nearest, nearest

        start = jnp.full(dist.shape[1:], limit, dist.dtype)
        forward = jax.lax.scan(step, start, dist)[1]
        return jnp.minimum(forward, jax.lax.scan(step, start, dist, reverse=True)[1])

    dist = jnp.where(targets, 0, limit).astype(jnp.int8)
    x_first = sweeps(jnp.moveaxis(dist, -1, 0))  # [x, ..., y]
    y_first = sweeps(jnp.moveaxis(x_first, -1, 0))  # [y, x, ...]
    return jnp.minimum(jnp.moveaxis(y_first, (0, 1), (-2, -1)), limit).astype(jnp.int32)


def quantize(values: jnp.ndarray) -> jnp.ndarray:
    """Features in ``[0, 1]`` (booleans included) as ``uint8`` levels ``0..255``."""
    return jnp.round(jnp.clip(values.astype(jnp.float32), 0.0, 1.0) * 255.0).astype(jnp.uint8)


def team_planes(state: Any, rubble_steps: jnp.ndarray | None = None) -> jnp.ndarray:
    """``uint8 [2, 3, S * S]`` (team, plane, cell): each team's ``own_robots_near``,
    ``own_factory_water_mean`` and ``near_clearable_rubble`` planes
    (:data:`~games.lux.layout.OBS_PLANES`); ``rubble_steps`` each team's Manhattan steps to
    :func:`clearable_rubble` (``int [2, S, S]``, the ``to_rubble`` row of
    :func:`goal_distances`; computed when not given)."""
    size = state.board.lichen.shape[0]
    team, _, there = _occupants(state.board.units_map, state.unit_id2idx,
                                int(jnp.iinfo(state.board.units_map.dtype).max))
    own = (there[None] & (team[None] == jnp.arange(2)[:, None])).reshape(2, size, size)
    near = box_count(own, ROBOTS_NEAR_RADIUS, jnp).reshape(2, size * size)
    water = state.factories.cargo.stock[..., 2].astype(jnp.float32)  # [2, F]
    alive = state.factory_mask
    mean = (jnp.where(alive, water, 0.0).sum(1)
            / jnp.maximum(alive.sum(1), 1).astype(jnp.float32))  # [2]
    if rubble_steps is None:
        rubble_steps = manhattan_distance(clearable_rubble(state))
    rubble = _near_levels(rubble_steps)  # [2, y, x]
    return jnp.stack([quantize(near.astype(jnp.float32) / ROBOTS_NEAR_SCALE),
                      jnp.broadcast_to(quantize(mean / 1000.0)[:, None], (2, size * size)),
                      rubble.reshape(2, size * size)], 1)


def near_planes(state: Any) -> jnp.ndarray:
    """``uint8 [4, S * S]``: the ``near_ice`` and ``near_ore`` planes, then ``near_own_factory``
    of team 0 and of team 1, quantized as the observation is.

    Ice and ore never change, so the adapter keeps the planes between steps and renews the
    others (:func:`next_near_planes`): the ice and ore distance transform costs as much as
    the factories' planes."""
    size = state.board.lichen.shape[0]
    dist = manhattan_distance(jnp.stack([state.board.ice.T, state.board.ore.T]))
    return jnp.concatenate([_near_levels(dist).reshape(2, size * size),
                            _factory_near_planes(state)])


def _factory_near_planes(state: Any) -> jnp.ndarray:
    """``uint8 [2, S * S]``: the planes of :func:`near_planes` that change during a game, how
    near each team's nearest factory tile is."""
    size = state.board.lichen.shape[0]
    factories = _near_levels(jnp.minimum(factory_distances(state).min(1), NEAR_RANGE))
    return factories.reshape(2, size * size)


def _near_levels(dist: jnp.ndarray) -> jnp.ndarray:
    """``uint8``: Manhattan distances as the ``near_*`` planes' levels (``1 - dist /
    NEAR_RANGE``, quantized), looked up in a table of the ``NEAR_RANGE + 1`` values."""
    return quantize(1.0 - jnp.arange(NEAR_RANGE + 1, dtype=jnp.float32) / NEAR_RANGE)[dist]


def next_near_planes(near: jnp.ndarray, after: Any) -> jnp.ndarray:
    """The :func:`near_planes` of games ``[E, 4, S * S]`` after a step, from those kept before
    it: ice and ore kept, the factories' renewed."""
    return near.at[:, 2:].set(jax.vmap(_factory_near_planes)(after))


def factory_distances(state: Any) -> jnp.ndarray:
    """``int32 [2, F, S, S]`` (y, x): Manhattan steps from each cell to each factory slot's
    nearest tile (:data:`~games.lux.layout.NEAR_RANGE` for empty slots). From the factories'
    centres: a tile's distance to a 3x3 factory is the sum of the axes' distances beyond its
    centre's neighbours (no distance transform)."""
    size = state.board.lichen.shape[0]
    centre = state.factories.pos.pos.astype(jnp.int32)  # [2, F, 2] (x, y)
    axis = jnp.arange(size)
    dx = jnp.maximum(jnp.abs(axis - centre[..., 0:1]) - 1, 0)  # [2, F, S]
    dy = jnp.maximum(jnp.abs(axis - centre[..., 1:2]) - 1, 0)
    dist = dy[..., :, None] + dx[..., None, :]  # [2, F, y, x]
    return jnp.where(state.factory_mask[..., None, None], dist, NEAR_RANGE)


def home_distances(state: Any) -> jnp.ndarray:
    """``int32 [2, S, S]`` (y, x): each team's Manhattan steps to where ``to_home`` leads,
    the nearest own factory tile or, when at most :data:`~games.lux.layout.HOME_DETOUR` steps
    further, the nearest tile of a factory with less than
    :data:`~games.lux.layout.THIRSTY_WATER` water; :data:`~games.lux.layout.NEAR_RANGE` at
    most (:func:`factory_distances`)."""
    dist = factory_distances(state)
    thirsty = state.factory_mask & (state.factories.cargo.stock[..., 2] < THIRSTY_WATER)
    nearest = dist.min(1)
    to_thirsty = jnp.where(thirsty[..., None, None], dist, NEAR_RANGE).min(1)
    home, _ = home_rule(nearest, to_thirsty, jnp)
    return jnp.minimum(home, NEAR_RANGE).astype(jnp.int32)


def clearable_rubble(state: Any) -> jnp.ndarray:
    """``bool [2, S, S]`` (y, x): per team, where ``to_rubble`` leads: rubble on a cell that is
    no factory tile, ice or ore, on or next to (4 neighbours) the team's factory tiles or
    lichen, where the team's lichen could grow once the rubble is dug away, and no robot
    stands."""
    board = state.board
    factory = factory_team_map(state)  # [x, y]
    team = jnp.arange(2)[:, None, None]
    grows = (factory[None] == team) | (strain_team_map(state)[None] == team)  # [2, x, y]
    pad = jnp.pad(grows, ((0, 0), (1, 1), (1, 1)))
    near = (grows | pad[:, :-2, 1:-1] | pad[:, 2:, 1:-1] | pad[:, 1:-1, :-2]
            | pad[:, 1:-1, 2:])
    cells = ((board.rubble > 0) & (factory < 0) & ~board.ice & ~board.ore
             & (unit_team_map(state) < 0))
    return jnp.swapaxes(near & cells[None], 1, 2)


def enemy_lichen(state: Any) -> jnp.ndarray:
    """``bool [2, S, S]`` (y, x): per team, where ``to_enemy_lichen`` leads: the other team's
    lichen where no robot stands (a dig there takes lichen off the other team's score)."""
    team = jnp.arange(2)[:, None, None]
    cells = ((strain_team_map(state)[None] == 1 - team)
             & (unit_team_map(state) < 0)[None])  # [2, x, y]
    return jnp.swapaxes(cells, 1, 2)


def free_resources(state: Any) -> jnp.ndarray:
    """``bool [2, S, S]`` (y, x): where ``to_ice`` and ``to_ore`` lead, the ice and the ore
    cells no robot stands on."""
    free = (state.board.units_map == jnp.iinfo(state.board.units_map.dtype).max).T  # [y, x]
    return jnp.stack([state.board.ice.T & free, state.board.ore.T & free])


def goal_distances(state: Any) -> jnp.ndarray:
    """``int32 [2, G, S, S]`` (team, goal, y, x): Manhattan steps to where each goal of
    :data:`~games.lux.layout.GOALS` leads (:func:`free_resources`, :func:`home_distances`,
    :func:`clearable_rubble`, :func:`enemy_lichen`), :data:`~games.lux.layout.NEAR_RANGE` at
    most. The boards that change every step, in one distance transform."""
    size = state.board.lichen.shape[0]
    boards = jnp.concatenate([free_resources(state),
                              jnp.stack([clearable_rubble(state), enemy_lichen(state)],
                                        1).reshape(4, size, size)])
    dist = manhattan_distance(boards)  # [6, y, x]: free ice, ore; per team rubble, lichen
    resources = jnp.broadcast_to(dist[:2], (2, 2, size, size))
    return jnp.concatenate([resources, home_distances(state)[:, None],
                            dist[2:].reshape(2, 2, size, size)], 1)


def _move_targets(state: Any) -> tuple[jnp.ndarray, ...]:
    """Per unit and direction (centre, up, right, down, left): ``(inside, tx, ty)`` of the
    cell a move leads to, ``int [2, U, 5]`` (clipped to the board)."""
    size = state.board.lichen.shape[0]
    target = state.units.pos.pos.astype(jnp.int32)[:, :, None, :] + DELTA[None, None]
    inside = ((target >= 0) & (target < size)).all(-1)
    return inside, jnp.clip(target[..., 0], 0, size - 1), jnp.clip(target[..., 1], 0, size - 1)


def move_legal(state: Any) -> jnp.ndarray:
    """``bool [2, U, 4]``: the moves up, right, down, left each unit may make this turn (onto
    the board, not onto an enemy factory tile, with the queue update's and the rubble's
    power)."""
    cfg = state.env_cfg
    i32 = jnp.int32
    team3 = jnp.arange(2)[:, None, None]
    heavy = state.units.unit_type.astype(i32)
    power = state.units.power.astype(i32)
    upd = robot_table(cfg, "ACTION_QUEUE_POWER_COST")[heavy]
    inside, tx, ty = _move_targets(state)
    t_fac = jnp.where(inside, factory_team_map(state)[tx, ty], -1)
    rubble = state.board.rubble.astype(i32)
    cost = (robot_table(cfg, "MOVE_COST")[heavy][..., None]
            + jnp.floor(robot_table(cfg, "RUBBLE_MOVEMENT_COST")[heavy][..., None]
                        * rubble[tx, ty]).astype(i32))
    ok = inside & (t_fac != 1 - team3) & (power[..., None] >= upd[..., None] + cost)
    return (ok & state.unit_mask[..., None])[..., 1:]


def goal_steps(state: Any, fields: jnp.ndarray | None = None) -> jnp.ndarray:
    """``int32 [2, U, G]``: the direction (0 up ... 3 left) of each unit's step towards each
    goal of :data:`~games.lux.layout.GOALS`, -1 where there is none.

    A step goes to a neighbour nearer the goal by Manhattan distance (obstacles ignored, so
    it exists wherever the unit is not on a target and one lies within
    :data:`~games.lux.layout.NEAR_RANGE`), one the unit may enter (:func:`move_legal`), no unit
    stands on and no factory's centre (where robots are built); of several, the direction
    already at the front of the unit's queue (continued for free), else the one of least
    rubble, else the first. Goals lead to the ice and ore no robot stands on, home (the own
    factory tiles, a thirsty factory's preferred), the rubble in the way of the team's lichen
    and the other team's lichen (:func:`goal_distances`, the state's when ``fields`` is not
    given)."""
    i32 = jnp.int32
    inside, tx, ty = _move_targets(state)  # [2, U, 5]
    teams = jnp.arange(2)[:, None, None]
    fields = goal_distances(state) if fields is None else fields  # [2, G, y, x]
    d = fields[teams[..., None], jnp.arange(len(GOALS))[None, None, None, :], ty[..., None],
               tx[..., None]]  # [2, U, 5, G]
    here, there = d[:, :, :1], d[:, :, 1:]  # [2, U, 1, G], [2, U, 4, G]
    # no robot there, and no factory centre (where new robots appear)
    free = ((unit_team_map(state)[tx, ty] < 0)
            & (state.board.factory_map.astype(i32)[tx, ty] == NONE_ID))[..., 1:]  # [2, U, 4]
    ok = (move_legal(state) & free)[..., None] & (there < here) & (here < NEAR_RANGE)
    queue = state.units.action_queue
    front = queue.front.astype(i32)[..., None]

    def at_front(x: jnp.ndarray) -> jnp.ndarray:
        return jnp.take_along_axis(x, front, -1)[..., 0].astype(i32)

    q_dir = at_front(queue.data.direction)
    queued = ((queue.count > 0) & (at_front(queue.data.action_type) == 0)
              & (at_front(queue.data.repeat) > 0))
    not_queued = ~(queued[..., None] & (q_dir[..., None] == jnp.arange(1, 5)))  # [2, U, 4]
    rubble = state.board.rubble.astype(i32)[tx, ty][..., 1:]  # [2, U, 4]
    score = (there * 4096 + (not_queued.astype(i32) * 1024 + rubble)[..., None] * 4
             + jnp.arange(4)[None, None, :, None])
    score = jnp.where(ok, score, jnp.iinfo(jnp.int32).max)
    best = jnp.argmin(score, axis=2).astype(i32)  # [2, U, G]
    return jnp.where(ok.any(2), best, -1)


def observe(state: Any, max_steps: Any = None, near: jnp.ndarray | None = None,
            fields: jnp.ndarray | None = None) -> jnp.ndarray:
    """``uint8 [2, C, S, S]``: each seat's planes (:data:`~games.lux.layout.OBS_PLANES`),
    quantized to 256 levels (:data:`~games.lux.layout.OBS_SCALE`); ``max_steps`` (a traced
    scalar) is the game's length for the ``progress`` plane (default: the rules'); ``near``
    the state's :func:`near_planes` when kept from an earlier step and ``fields`` its
    :func:`goal_distances` when the goal steps computed them (each computed when not given).

    Built channel-major (``[C, S * S]``), planes shared by the seats computed once: writing the
    observation is most of the cost (4 bytes per value in float32, 1 in uint8)."""
    cfg = state.env_cfg
    size = state.board.lichen.shape[0]
    cells = size * size
    f32, u8 = jnp.float32, jnp.uint8
    board = state.board

    def grid_xy(a: jnp.ndarray) -> jnp.ndarray:  # [x, y] -> flat y*S+x
        return a.T.reshape(cells)

    def flag(a: jnp.ndarray) -> jnp.ndarray:
        return a.astype(u8) * u8(255)

    fac_team = grid_xy(factory_team_map(state))
    strain_team = grid_xy(strain_team_map(state))

    # per-cell values are gathered from small per-unit / per-factory tables quantized first
    # (scatters and float work per cell are what costs on a CPU)
    f_team, f_slot, f_there = _occupants(board.factory_occupancy_map, state.factory_id2idx,
                                         NONE_ID)
    stock = state.factories.cargo.stock.astype(f32)  # [2, F, 4]
    fvals = quantize(jnp.concatenate([stock / 1000.0,
                                      state.factories.power[..., None].astype(f32) / 5000.0],
                                     -1))  # [2, F, 5]
    fac_planes = _cell_rows(fvals, f_team, f_slot, f_there).T  # [5, cells]
    c_team, _, c_there = _occupants(board.factory_map, state.factory_id2idx, NONE_ID)

    heavy = state.units.unit_type.astype(jnp.int32)  # 0 light, 1 heavy
    battery = robot_table(cfg, "BATTERY_CAPACITY")[heavy].astype(f32)
    cargo_space = robot_table(cfg, "CARGO_SPACE")[heavy].astype(f32)
    queue = state.units.action_queue
    front_at = queue.front[..., None].astype(jnp.int32)
    front = jnp.take_along_axis(queue.data.action_type, front_at, -1)[..., 0].astype(jnp.int32)
    front_dir = jnp.take_along_axis(queue.data.direction, front_at, -1)[..., 0]
    has_queue = queue.count > 0
    queued_type = jnp.where(has_queue, front, -1)  # Jux's types: 0 move ... 5 recharge
    queued_dir = jnp.where(has_queue & (front <= 1), front_dir.astype(jnp.int32), 0)
    kind = jax.nn.one_hot(heavy, 2, dtype=f32)  # light, heavy
    power_cargo = jnp.concatenate([(state.units.power.astype(f32) / battery)[..., None],
                                   state.units.cargo.stock.astype(f32) / cargo_space[..., None]],
                                  -1)  # [2, U, 5]
    queued = jnp.concatenate([jax.nn.one_hot(queued_type, 6, dtype=f32),
                              jax.nn.one_hot(queued_dir - 1, 4, dtype=f32)], -1)  # [2, U, 10]
    u_team, u_slot, u_there = _occupants(board.units_map, state.unit_id2idx,
                                         int(jnp.iinfo(board.units_map.dtype).max))

    def unit_planes(s: int) -> jnp.ndarray:
        """``uint8 [19, cells]``: seat ``s``'s unit planes (own light, heavy; enemy light,
        heavy; power and cargo of any unit; the own queue's front), from a table per unit
        gathered to the cells at once."""
        own = (jnp.arange(2) == s).astype(f32)[:, None, None]  # [2 teams, 1, 1]
        table = quantize(jnp.concatenate([kind * own, kind * (1.0 - own), power_cargo,
                                          queued * own], -1))  # [2, U, 19]
        return _cell_rows(table, u_team, u_slot, u_there).T

    length = cfg.max_episode_length if max_steps is None else max_steps
    steps = state.real_env_steps.astype(f32) / length
    day = ((state.real_env_steps % cfg.CYCLE_LENGTH) < cfg.DAY_LENGTH).astype(f32)
    clock = jnp.broadcast_to(quantize(jnp.stack([steps, day]))[:, None], (2, cells))
    near = near_planes(state) if near is None else near
    team = team_planes(state, None if fields is None else fields[:, GOALS.index("rubble")])
    common = jnp.concatenate([
        jnp.stack([flag(grid_xy(board.ice)), flag(grid_xy(board.ore)),
                   quantize(grid_xy(board.rubble) / 100.0),
                   quantize(grid_xy(board.lichen) / 100.0)]), near[:2]])  # [6, cells]

    def seat_pieces(s: int) -> list[jnp.ndarray]:
        return [
            common,
            flag(jnp.stack([strain_team == s, strain_team == 1 - s, fac_team == s,
                            fac_team == 1 - s, c_there & (c_team == s),
                            c_there & (c_team != s)])),
            near[2 + s:3 + s],  # own factory tiles
            fac_planes,
            unit_planes(s),
            clock,
            team[s],
        ]

    # one concatenation of both seats' pieces (XLA on the CPU: 1.3x faster than two, and than
    # writing the pieces into a buffer one by one)
    out = jnp.concatenate(seat_pieces(0) + seat_pieces(1))
    return out.reshape(2, len(OBS_PLANES), size, size)


def water_cost_bound(state: Any) -> jnp.ndarray:
    """``int [2, F]``: at least the water each factory's watering would cost this turn.

    The engine's cost counts the factory's connected lichen and the cells it would spread to
    (a flood fill, as costly as the rest of the step). This counts every cell of the factory's
    strain and every growable cell next to it or the factory, a superset, so the bound is never
    below the cost (a test checks it against :func:`water_cost` on random lichen).

    From one owner map rather than a map per factory: each cell's owner is the factory whose
    tile it is, or whose strain grows on it (flat); a factory counts the flat cells of its
    strain and the growable cells with it among their four neighbours' owners (one compare
    per factory id and cell: 3x faster on a CPU than the per-factory maps, and than
    scatter-adds)."""
    board = state.board
    i32 = jnp.int32
    none = NONE_ID
    ids = state.factory_id2idx.shape[0]  # factory ids are 0 .. ids - 1
    strains = board.lichen_strains.astype(i32)  # [x, y]
    occ = board.factory_occupancy_map.astype(i32)
    flat = board.rubble == 0
    lichen = jnp.where(flat & (strains != none), strains, ids)  # a strain's flat cells
    owner = jnp.pad(jnp.where(occ != none, occ, lichen), 1, constant_values=ids)
    growable = flat & ~board.ice & ~board.ore & (strains == none) & (occ == none)
    factory = jnp.arange(ids)[:, None, None]
    beside = ((owner[None, :-2, 1:-1] == factory) | (owner[None, 2:, 1:-1] == factory)
              | (owner[None, 1:-1, :-2] == factory) | (owner[None, 1:-1, 2:] == factory))
    count = (lichen[None] == factory).sum((1, 2)) + (beside & growable[None]).sum((1, 2))
    count = jnp.concatenate([count, jnp.zeros(1, count.dtype)])  # a dead factory's: 0
    unit_id = jnp.where(state.factory_mask, state.factories.unit_id.astype(i32), ids)
    return jnp.ceil(count[unit_id] / state.env_cfg.LICHEN_WATERING_COST_FACTOR).astype(i32)


def water_cost(state: Any) -> jnp.ndarray:
    """``int [2, F]``: the water each factory's watering would cost this turn (the engine's
    flood fill)."""
    water = jnp.full(state.factories.power.shape, 2, jnp.int8)  # FactoryAction.WATER
    _, grow, _ = state._cache_water_info(water)
    return jnp.ceil(grow / state.env_cfg.LICHEN_WATERING_COST_FACTOR).astype(jnp.int32)


def legal_masks(state: Any, max_units: int, max_steps: Any = None,
                goals: jnp.ndarray | None = None) -> jnp.ndarray:
    """``bool [2, S * S, MASK_WIDTH]``: each seat's legal actions per cell; ``max_steps`` (a
    traced scalar) is the game's length for the watering reserve (default: the rules');
    ``goals`` the state's :func:`goal_steps` (computed when not given; the adapter computes
    them once and gives them to the next step's :func:`~games.lux.orders.to_jux` too)."""
    cfg = state.env_cfg
    size = state.board.lichen.shape[0]
    i32 = jnp.int32
    teams = jnp.arange(2)[:, None]  # [2, 1]

    fac_team = factory_team_map(state)  # [x, y]
    unit_team = unit_team_map(state)
    strain_team = strain_team_map(state)
    rubble = state.board.rubble.astype(i32)

    umask = state.unit_mask
    pos = state.units.pos.pos.astype(i32)  # [2, U, 2]
    heavy = state.units.unit_type.astype(i32)
    power = state.units.power.astype(i32)
    cargo = state.units.cargo.stock.astype(i32)  # [2, U, 4]
    upd = robot_table(cfg, "ACTION_QUEUE_POWER_COST")[heavy]
    battery = robot_table(cfg, "BATTERY_CAPACITY")[heavy]
    space = robot_table(cfg, "CARGO_SPACE")[heavy]
    can_update = umask & (power >= upd)

    inside, tx, ty = _move_targets(state)  # [2, U, 5]
    t_fac = jnp.where(inside, fac_team[tx, ty], -1)
    t_unit = jnp.where(inside, unit_team[tx, ty], -1)
    team3 = teams[:, :, None]
    goals = (goal_steps(state) if goals is None else goals) >= 0  # [2, U, G]
    move = jnp.concatenate([move_legal(state), goals], -1)  # [2, U, 4 + G]

    t_dir = inside & ((t_fac == team3) | ((t_unit == team3) & (jnp.arange(5) > 0)))  # [2, U, 5]
    t_res = jnp.concatenate([cargo > 0, (power - upd >= 2)[..., None]], -1)  # [2, U, 5]
    transfer = t_dir.any(-1) & t_res.any(-1)

    here = fac_team[pos[..., 0].clip(0, size - 1), pos[..., 1].clip(0, size - 1)]  # [2, U]
    occ = state.board.factory_occupancy_map.astype(i32)[pos[..., 0].clip(0, size - 1),
                                                        pos[..., 1].clip(0, size - 1)]
    fidx = state.factory_id2idx.at[occ].get(mode="fill", fill_value=NONE_ID)[..., 1].astype(i32)
    fidx = jnp.clip(fidx, 0, state.factories.power.shape[1] - 1)
    f_water = state.factories.cargo.stock[teams, fidx, 2].astype(i32)  # [2, U]
    f_power = state.factories.power[teams, fidx].astype(i32)
    no = jnp.zeros_like(power, bool)
    p_res = jnp.stack([no, no, (f_water > WATER_RESERVE) & (cargo[..., 2] < space), no,
                       (f_power > 0) & (power < battery)], -1)
    p_res = p_res & (here == teams)[..., None]
    pickup = p_res.any(-1)

    ux, uy = pos[..., 0].clip(0, size - 1), pos[..., 1].clip(0, size - 1)
    diggable = ((rubble[ux, uy] > 0) | state.board.ice[ux, uy] | state.board.ore[ux, uy]
                | ((state.board.lichen[ux, uy] > 0) & (strain_team[ux, uy] != teams)))
    dig = diggable & (here < 0) & (power >= upd + robot_table(cfg, "DIG_COST")[heavy])
    destruct = power >= upd + robot_table(cfg, "SELF_DESTRUCT_COST")[heavy]
    recharge = power < battery

    types = jnp.stack([umask, move.any(-1), transfer, pickup, dig, destruct, recharge], -1)
    types = types & jnp.concatenate([umask[..., None], jnp.broadcast_to(
        can_update[..., None], umask.shape + (6,))], -1)
    unit_rows = jnp.concatenate([types, move, t_dir, t_res, p_res,
                                 jnp.zeros(umask.shape + (NVEC[5],), bool)], -1)  # [2, U, W]

    fmask = state.factory_mask
    f_metal = state.factories.cargo.stock[..., 3].astype(i32)
    f_pow = state.factories.power.astype(i32)
    room = (state.n_units.astype(i32) + state.n_factories.astype(i32) <= max_units)[:, None]
    light = (f_metal >= robot_table(cfg, "METAL_COST")[0]) & (
        f_pow >= robot_table(cfg, "POWER_COST")[0]) & room
    heavy_b = (f_metal >= robot_table(cfg, "METAL_COST")[1]) & (
        f_pow >= robot_table(cfg, "POWER_COST")[1]) & room
    length = cfg.max_episode_length if max_steps is None else max_steps
    steps_left = jnp.maximum(length - state.real_env_steps.astype(i32) - 1, 0)
    reserve = jnp.minimum(WATER_RESERVE, steps_left * cfg.FACTORY_WATER_CONSUMPTION)
    water = state.factories.cargo.stock[..., 2].astype(i32) >= (
        water_cost_bound(state) + cfg.FACTORY_WATER_CONSUMPTION + reserve)
    fac_comp = jnp.stack([fmask, light, heavy_b, water], -1) & fmask[..., None]  # [2, F, 4]
    fac_rows = jnp.zeros(fmask.shape + (MASK_WIDTH,), bool).at[..., OFFSETS[5]:].set(fac_comp)

    u_team, u_slot, u_there = _occupants(state.board.units_map, state.unit_id2idx,
                                         int(jnp.iinfo(state.board.units_map.dtype).max))
    c_team, c_slot, c_there = _occupants(state.board.factory_map, state.factory_id2idx, NONE_ID)

    def seat_rows(t: int) -> jnp.ndarray:  # [cells, W]: the rows of seat t's units, factories
        own = (teams == t)[..., None]  # [2 teams, 1, 1]
        return (_cell_rows(unit_rows & own, u_team, u_slot, u_there)
                | _cell_rows(fac_rows & own, c_team, c_slot, c_there))

    return jnp.stack([seat_rows(0), seat_rows(1)])


def view(state: Any, max_units: int, max_steps: Any, near: jnp.ndarray
         ) -> tuple[jnp.ndarray, jnp.ndarray, jnp.ndarray]:
    """``(observation, masks, goal steps)`` of one state, as the adapter gives them after each
    step: the goal distance transform computed once for the goal steps (which the masks and
    the next step's orders take) and the ``near_clearable_rubble`` plane."""
    fields = goal_distances(state)
    goals = goal_steps(state, fields)
    return (observe(state, max_steps, near, fields),
            legal_masks(state, max_units, max_steps, goals), goals)
