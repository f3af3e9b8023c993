"""Grid actions to Jux's action queues, and the reward components of a step, on the device.

:func:`to_jux` reads each unit's and factory's row of the seat's ``[S * S, 6]`` grid action
(:mod:`games.lux.layout`) at its cell and writes Jux's ``JuxAction``: a unit whose type is not
``keep`` gets a one-action queue (repeated until replaced; a goal move steps as
:func:`~games.lux.observe.goal_steps` finds), unless that action is already the
front of its queue (same type, direction and resource; power transfers excepted, their amount
follows the unit's power): then the queue goes on, free of the queue-update power, as with
``keep``. A policy never needs to know what is queued: choosing the same action again costs
nothing. A factory's choice becomes its factory action. Values are clipped into their
components' ranges, so no input makes a malformed action (Jux drops a player's whole turn for
one).

:func:`executed` reconstructs what each unit does this step (the new action where the queue
update is paid for, else the queue's front), from which :func:`step_components` measures what
was dug and delivered (:data:`~games.lux.layout.REWARD_COMPONENTS`).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from games.lux.layout import DIRECTIONS, NVEC, UNIT, WATER_RESERVE
from games.lux.observe import DELTA, _cell, factory_team_map, goal_steps, robot_table

# our unit types -> Jux's UnitActionType (keep has none)
JUX_TYPE = jnp.array([-1, 0, 1, 2, 3, 4, 5], jnp.int8)
JUX_REPEAT = jnp.array([0, 1, 1, 1, 1, 0, 1], jnp.int16)  # self-destruct happens once


def to_jux(state: Any, grid: jnp.ndarray, goals: jnp.ndarray | None = None) -> Any:
    """Jux's ``JuxAction`` for one game from both seats' ``int [2, S * S, 6]`` grid actions;
    ``goals`` the state's :func:`~games.lux.observe.goal_steps` when the masks already
    computed them (computed when not given)."""
    from jux.actions import JuxAction, UnitAction

    cfg = state.env_cfg
    size = state.board.lichen.shape[0]
    i32 = jnp.int32
    teams = jnp.arange(2)[:, None]
    grid = jnp.clip(grid.astype(i32), 0, jnp.array(NVEC, i32) - 1)
    pad = jnp.zeros((2, 1, len(NVEC)), i32)
    grid = jnp.concatenate([grid, pad], 1)  # row S*S: nothing (absent slots read it)

    umask = state.unit_mask
    row = grid[teams, _cell(state.units.pos.pos, size, umask)]  # [2, U, 6]
    kind = row[..., 0]
    heavy = state.units.unit_type.astype(i32)
    power = state.units.power.astype(i32)
    upd = robot_table(cfg, "ACTION_QUEUE_POWER_COST")[heavy]
    battery = robot_table(cfg, "BATTERY_CAPACITY")[heavy]
    space = robot_table(cfg, "CARGO_SPACE")[heavy]
    cargo = state.units.cargo.stock.astype(i32)

    is_move, is_transfer = kind == UNIT["move"], kind == UNIT["transfer"]
    is_pickup = kind == UNIT["pickup"]
    goal = row[..., 1] - len(DIRECTIONS)
    by_goal = is_move & (goal >= 0)
    steps = goal_steps(state) if goals is None else goals  # [2, U, G]
    goal_dir = jnp.take_along_axis(steps, jnp.clip(goal, 0, steps.shape[-1] - 1)[..., None],
                                   -1)[..., 0]
    # Jux's directions: 0 centre, 1 up ... 4 left (a goal without a step: centre)
    move_dir = jnp.where(by_goal, goal_dir, row[..., 1]) + 1
    direction = jnp.where(is_move, move_dir, jnp.where(is_transfer, row[..., 2], 0))
    resource = jnp.where(is_transfer, row[..., 3], jnp.where(is_pickup, row[..., 4], 0))
    after_update = power - upd
    held = jnp.take_along_axis(cargo, jnp.clip(resource, 0, 3)[..., None], -1)[..., 0]
    transfer_amount = jnp.where(resource == 4, jnp.maximum(after_update, 0) // 2,
                                cfg.max_transfer_amount)
    pos = state.units.pos.pos.astype(i32)
    ux, uy = pos[..., 0].clip(0, size - 1), pos[..., 1].clip(0, size - 1)
    occ = state.board.factory_occupancy_map.astype(i32)[ux, uy]
    fidx = state.factory_id2idx.at[occ].get(mode="fill", fill_value=0)[..., 1].astype(i32)
    f_water = state.factories.cargo.stock[teams, jnp.clip(fidx, 0, state.factories.power.shape[1]
                                                          - 1), 2].astype(i32)
    spare_water = jnp.maximum(f_water - WATER_RESERVE, 0)
    pickup_amount = jnp.where(resource == 4, battery - after_update,
                              jnp.where(resource == 2, jnp.minimum(space - held, spare_water),
                                        space - held))
    amount = jnp.where(is_transfer, transfer_amount, jnp.where(
        is_pickup, pickup_amount, jnp.where(kind == UNIT["recharge"], battery, 0)))
    amount = jnp.clip(amount, 0, cfg.max_transfer_amount)

    queue_size = state.units.action_queue.data.action_type.shape[-1]

    def queue(first: jnp.ndarray, dtype: Any) -> jnp.ndarray:
        out = jnp.zeros(first.shape + (queue_size,), dtype)
        return out.at[..., 0].set(first.astype(dtype))

    fmask = state.factory_mask
    frow = grid[teams, _cell(state.factories.pos.pos, size, fmask)]  # [2, F, 6]
    factory_action = jnp.where(fmask, frow[..., 5] - 1, -1).astype(jnp.int8)

    def action(direction: jnp.ndarray) -> Any:
        actions = UnitAction(
            action_type=queue(JUX_TYPE[kind], jnp.int8),
            direction=queue(direction, jnp.int8),
            resource_type=queue(resource, jnp.int8),
            amount=queue(amount, jnp.int16),
            repeat=queue(JUX_REPEAT[kind], jnp.int16),
            n=queue(jnp.ones_like(kind), jnp.int16),
        )
        update = umask & (kind != UNIT["keep"]) & ~_queued_already(state, JUX_TYPE[kind],
                                                                    direction, resource)
        return JuxAction(factory_action=factory_action, unit_action_queue=actions,
                         unit_action_queue_count=update.astype(jnp.int8),
                         unit_action_queue_update=update)

    yielding = _goal_collisions(state, action(direction), by_goal)
    return action(jnp.where(yielding, 0, direction))


def _goal_collisions(state: Any, action: Any, by_goal: jnp.ndarray) -> jnp.ndarray:
    """``bool [2, U]``: the goal movers that would step into a cell another own unit steps
    into (any unit moving by its own choice or its queue goes first, then heavier, then lower
    slots): they stand still this turn, so goals never collide own robots."""
    size = state.board.lichen.shape[0]
    i32 = jnp.int32
    chosen, _ = executed(state, action)
    direction = chosen.direction.astype(i32)
    moving = state.unit_mask & (chosen.action_type == 0) & (direction > 0)
    target = state.units.pos.pos.astype(i32) + DELTA[jnp.clip(direction, 0, 4)]
    cell = _cell(target, size, moving)  # S*S where not moving
    slots = state.unit_mask.shape[1]
    rank = (state.units.unit_type.astype(i32) * slots + slots - jnp.arange(slots)[None, :])
    priority = jnp.where(by_goal, rank, 4 * slots)  # chosen moves first
    priority = jnp.where(moving, priority, -1)
    best = jnp.full((2, size * size + 1), -1, i32)
    best = best.at[jnp.arange(2)[:, None], cell].max(priority)
    return by_goal & moving & (jnp.take_along_axis(best, cell, 1) != priority)


def _queued_already(state: Any, jux_type: jnp.ndarray, direction: jnp.ndarray,
                    resource: jnp.ndarray) -> jnp.ndarray:
    """``bool [2, U]``: the unit's queue front already is this repeating action (power
    transfers excepted: their amount is half the power the unit has now)."""
    queue = state.units.action_queue
    front = queue.front.astype(jnp.int32)[..., None]

    def at_front(x: jnp.ndarray) -> jnp.ndarray:
        return jnp.take_along_axis(x, front, -1)[..., 0].astype(jnp.int32)

    q_type = at_front(queue.data.action_type)
    uses_dir = (jux_type == 0) | (jux_type == 1)  # move, transfer
    uses_res = (jux_type == 1) | (jux_type == 2)  # transfer, pickup
    return ((queue.count > 0) & (at_front(queue.data.repeat) > 0) & (q_type == jux_type)
            & (~uses_dir | (at_front(queue.data.direction) == direction))
            & (~uses_res | (at_front(queue.data.resource_type) == resource))
            & ~((jux_type == 1) & (resource == 4)))


def executed(state: Any, action: Any) -> tuple[Any, jnp.ndarray]:
    """What each unit does this step: ``(UnitAction [2, U], power [2, U])`` after the queue
    update, as Jux decides them (the update happens where it is asked and paid for)."""
    import jax
    from jux.actions import UnitAction

    cfg = state.env_cfg
    heavy = state.units.unit_type.astype(jnp.int32)
    upd = robot_table(cfg, "ACTION_QUEUE_POWER_COST")[heavy]
    power = state.units.power.astype(jnp.int32)
    paid = action.unit_action_queue_update & state.unit_mask & (upd <= power)
    queue = state.units.action_queue
    front = queue.front.astype(jnp.int32)[..., None]
    current = jax.tree_util.tree_map(
        lambda x: jnp.take_along_axis(x, front, -1)[..., 0], queue.data)
    current = jax.tree_util.tree_map(
        lambda x, none: jnp.where(queue.count > 0, x, none), current,
        UnitAction.do_nothing())
    new = jax.tree_util.tree_map(lambda x: x[..., 0], action.unit_action_queue)
    chosen = jax.tree_util.tree_map(lambda n, c: jnp.where(paid, n, c), new, current)
    return chosen, jnp.where(paid, power - upd, power)


def step_components(before: Any, action: Any, after: Any) -> jnp.ndarray:
    """``float [2, 7]``: each team's ``ice, ore, water, metal, lichen, units, factories`` of
    the step from ``before`` to ``after`` (``win`` is the adapter's: it needs the outcome)."""
    cfg = before.env_cfg
    size = before.board.lichen.shape[0]
    f32 = jnp.float32
    chosen, power = executed(before, action)
    heavy = before.units.unit_type.astype(jnp.int32)
    umask = before.unit_mask
    pos = before.units.pos.pos.astype(jnp.int32)
    ux, uy = pos[..., 0].clip(0, size - 1), pos[..., 1].clip(0, size - 1)
    fac_team = factory_team_map(before)
    on_factory = fac_team[ux, uy] >= 0
    cargo = before.units.cargo.stock.astype(jnp.int32)
    space = robot_table(cfg, "CARGO_SPACE")[heavy]

    digs = (umask & (chosen.action_type == 3) & ~on_factory
            & (power >= robot_table(cfg, "DIG_COST")[heavy]))
    gain = robot_table(cfg, "DIG_RESOURCE_GAIN")[heavy]
    ice = jnp.where(digs & before.board.ice[ux, uy], jnp.minimum(gain, space - cargo[..., 0]), 0)
    ore = jnp.where(digs & before.board.ore[ux, uy], jnp.minimum(gain, space - cargo[..., 1]), 0)

    delta = jnp.array([[0, 0], [0, -1], [1, 0], [0, 1], [-1, 0]], jnp.int32)
    target = pos + delta[jnp.clip(chosen.direction.astype(jnp.int32), 0, 4)]
    inside = ((target >= 0) & (target < size)).all(-1)
    tx, ty = target[..., 0].clip(0, size - 1), target[..., 1].clip(0, size - 1)
    teams = jnp.arange(2)[:, None]
    to_own = umask & (chosen.action_type == 1) & inside & (fac_team[tx, ty] == teams)
    res = chosen.resource_type.astype(jnp.int32)
    sent = jnp.minimum(chosen.amount.astype(jnp.int32),
                       jnp.take_along_axis(cargo, jnp.clip(res, 0, 3)[..., None], -1)[..., 0])
    water = jnp.where(to_own & (res == 0), sent, 0) / cfg.ICE_WATER_RATIO
    metal = jnp.where(to_own & (res == 1), sent, 0) / cfg.ORE_METAL_RATIO

    return jnp.stack([
        ice.sum(-1).astype(f32), ore.sum(-1).astype(f32), water.sum(-1).astype(f32),
        metal.sum(-1).astype(f32),
        (after.team_lichen_score() - before.team_lichen_score()).astype(f32),
        (after.n_units - before.n_units).astype(f32),
        (after.n_factories - before.n_factories).astype(f32),
    ], -1)


def lichen_scores(state: Any) -> jnp.ndarray:
    """``int [2]``: Jux's end-of-game scores (lichen; -1000 for a team without factories)."""
    return state.team_lichen_score() - (state.n_factories == 0) * 1000
