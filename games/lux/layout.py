"""What a Lux seat sees and does: the observation planes and the per-cell action components.

Pure Python (no jax), so bots, tests and documentation read the layout without the engine.

Grid: the board is ``S x S`` (48 under the ``season2`` rules); planes are ``[C, S, S]`` indexed
``[plane, y, x]`` and cells are numbered ``y * S + x`` (Jux stores its boards ``[x, y]``; the
adapter transposes). Everything is relative to the seat: ``own`` is the seat's team, ``enemy``
the other.

Actions: one row of :data:`NVEC` components per cell, a GridNet-style gated multi-discrete
space. A cell may hold a unit (its components :data:`UNIT`\\ ...) and a factory's centre (the
``factory`` component) at once; cells without either have all-False masks.

- ``unit`` (the action type, component 0): ``keep`` (leave the unit's action queue as it is:
  no update, no power spent), ``move``, ``transfer``, ``pickup``, ``dig``, ``self_destruct``,
  ``recharge``. Any other type replaces the unit's queue with that one action, repeated until
  the policy chooses another (Lux's ``repeat``), which costs the queue-update power (light 1,
  heavy 10); choosing the action already at the queue's front continues it for free, as
  ``keep`` does (power transfers excepted), so a policy need not know what is queued.
- ``move``: up, right, down, left, or a goal: ``to_ice``, ``to_ore``, ``to_home``,
  ``to_rubble``, ``to_enemy_lichen`` (used by ``move``). A goal is one step along a shortest
  Manhattan path to its target, the adapter's steering (:func:`games.lux.observe.goal_steps`):
  ``to_ice`` and ``to_ore`` lead to the nearest ice or ore cell that no robot stands on
  (robots spread over the resources instead of queueing for one cell); ``to_home`` to the
  nearest own factory tile, or to one of a thirsty factory (less than :data:`THIRSTY_WATER`
  water) when that is at most :data:`HOME_DETOUR` steps further (ice goes where it keeps a
  factory alive); ``to_rubble`` to the nearest rubble where the team's lichen could grow once
  it is cleared (a cell next to an own factory tile or own lichen, or own lichen itself, that
  is no factory tile, ice or ore) that no robot stands on; ``to_enemy_lichen`` to the nearest
  cell of the other team's lichen that no robot stands on (where a dig takes lichen off its
  score). The step is, among the neighbours nearer the target that the unit may enter, no
  robot stands on and no factory centre, the one already queued (free), else the one of least
  rubble; legal only where such a neighbour exists. Two own robots never step into one cell
  by goals: the heavier, then the lower slot, goes, the other stands still this turn. A
  policy then chooses where to go, not which way.
- ``transfer_dir``: centre (onto the unit's own factory tile), up, right, down, left; targets
  are the seat's own factory tiles and own units only (used by ``transfer``).
- ``transfer_res`` and ``pickup_res``: ice, ore, water, metal, power (Lux's resource order).
- ``factory``: none, build light, build heavy, water (ungated: used on factory centres).

Amounts are rules, not choices: a transfer gives all of the resource (power: half the unit's
power after the queue update), a pickup fills the unit's battery as far as the factory has
power, or its cargo with the factory's water beyond :data:`WATER_RESERVE` (a factory without
water is destroyed, so a pickup never takes its last); a recharge waits until the battery is
full.
"""

from __future__ import annotations

OBS_PLANES: tuple[str, ...] = (
    "ice", "ore", "rubble", "lichen", "near_ice", "near_ore", "own_lichen", "enemy_lichen",
    "own_factory", "enemy_factory", "own_factory_centre", "enemy_factory_centre",
    "near_own_factory",
    "factory_ice", "factory_ore", "factory_water", "factory_metal", "factory_power",
    "own_light", "own_heavy", "enemy_light", "enemy_heavy",
    "unit_power", "unit_ice", "unit_ore", "unit_water", "unit_metal",
    "queued_move", "queued_transfer", "queued_pickup", "queued_dig", "queued_self_destruct",
    "queued_recharge",
    "queued_up", "queued_right", "queued_down", "queued_left",
    "progress", "day",
    "own_robots_near", "own_factory_water_mean", "near_clearable_rubble",
)
"""The observation planes, in order. Scales: rubble and lichen / 100; a factory's cargo on
its 9 tiles (ice, ore, water, metal / 1000, power / 5000, at most 1); a unit's power / its
battery and cargo / its cargo space; ``near_*`` how close the nearest ice, ore or own factory
tile is (:data:`NEAR_RANGE` minus the Manhattan distance, over :data:`NEAR_RANGE`: 1 on the
target, 0 from :data:`NEAR_RANGE` steps on or where there is none), so a cell's neighbours say
which step leads there; ``queued_*`` the front of an own unit's action queue;
``progress`` the game step / the game's length (``max_steps``, 1000 by the rules) and ``day`` 1
in daylight, on every cell; ``own_robots_near`` how many own robots stand within
:data:`ROBOTS_NEAR_RADIUS` cells each way (Chebyshev) / :data:`ROBOTS_NEAR_SCALE`, and
``own_factory_water_mean`` the own factories' mean water / 1000 on every cell: what a team
decides on as a whole (build where few robots are; spare water for rubble) as numbers a cell
sees, not sums over the board a network has to learn; ``near_clearable_rubble`` how near the
nearest cell is where ``to_rubble`` leads (free rubble where the own lichen could grow, as the
``near_*`` planes), so that a robot tells "no rubble left to clear" (fetch ice) from "the
nearer step is blocked" (walk around)."""
PLANE = {name: i for i, name in enumerate(OBS_PLANES)}
NEAR_RANGE = 64
ROBOTS_NEAR_RADIUS, ROBOTS_NEAR_SCALE = 6, 12
"""``own_robots_near``: robots within this many cells each way (a 13 x 13 box), counted / 12
(at most 1)"""
"""distances the ``near_*`` planes tell apart (Manhattan steps; boards up to 64x64 fit)"""
OBS_SCALE = 1.0 / 255.0
"""Observations are ``uint8``: each plane's value in ``[0, 1]`` (clipped) times 255, rounded;
``obs * OBS_SCALE`` are the features (the network does it, :attr:`games.core.GameSpec.obs_scale`).
A quarter of float32's bytes, and writing them is most of the observation's cost."""

UNIT_TYPES: tuple[str, ...] = ("keep", "move", "transfer", "pickup", "dig", "self_destruct",
                               "recharge")
DIRECTIONS: tuple[str, ...] = ("up", "right", "down", "left")
GOALS: tuple[str, ...] = ("ice", "ore", "home", "rubble", "enemy_lichen")
"""where a goal move leads: the nearest free ice or ore cell, home (an own factory tile), the
nearest free rubble that keeps the own lichen from growing, or the other team's nearest
lichen"""
THIRSTY_WATER, HOME_DETOUR = 150, 15
"""``to_home`` leads to a factory with less than ``THIRSTY_WATER`` water when it is at most
``HOME_DETOUR`` steps further than the nearest own factory tile"""
MOVES: tuple[str, ...] = DIRECTIONS + tuple(f"to_{g}" for g in GOALS)
"""the ``move`` component's values: the four directions, then the goals"""
TRANSFER_DIRECTIONS: tuple[str, ...] = ("centre", "up", "right", "down", "left")
RESOURCES: tuple[str, ...] = ("ice", "ore", "water", "metal", "power")
FACTORY_ACTIONS: tuple[str, ...] = ("none", "light", "heavy", "water")

COMPONENTS: tuple[str, ...] = ("unit", "move", "transfer_dir", "transfer_res", "pickup_res",
                               "factory")
NVEC: tuple[int, ...] = (len(UNIT_TYPES), len(MOVES), len(TRANSFER_DIRECTIONS),
                         len(RESOURCES), len(RESOURCES), len(FACTORY_ACTIONS))
GATES: tuple[tuple[int, ...] | None, ...] = (
    None,
    (UNIT_TYPES.index("move"),),
    (UNIT_TYPES.index("transfer"),),
    (UNIT_TYPES.index("transfer"),),
    (UNIT_TYPES.index("pickup"),),
    None,
)
OFFSETS: tuple[int, ...] = tuple(sum(NVEC[:i]) for i in range(len(NVEC)))
"""where each component's mask starts in a cell's mask row"""
MASK_WIDTH = sum(NVEC)

WATER_RESERVE = 100
"""water a pickup leaves in the factory (masks allow water pickups only beyond it), and
watering too, but never more than the factory drinks in the steps the game has left"""

UNIT = {name: i for i, name in enumerate(UNIT_TYPES)}
FACTORY = {name: i for i, name in enumerate(FACTORY_ACTIONS)}
RESOURCE = {name: i for i, name in enumerate(RESOURCES)}

REWARD_COMPONENTS: tuple[str, ...] = ("win", "ice", "ore", "water", "metal", "lichen", "units",
                                      "factories", "lichen_lead")
"""Named reward components, each a per-step amount for the seat:

- ``win``: +1 / -1 / 0 on the game's last step (more lichen wins; a team without factories
  loses), 0 before;
- ``ice`` and ``ore``: what the seat's units dug this step;
- ``water`` and ``metal``: ice and ore its units delivered to its factories, in the water and
  metal they refine into (ice / 4, ore / 5);
- ``lichen``: the change of its lichen on the board;
- ``units`` and ``factories``: the change of its unit and factory counts (built minus lost);
- ``lichen_lead``: the change of its lichen minus the opponent's, zero-sum: over a game it
  sums to the lichen margin that decides the game, where the other shaped components reward
  work (digging, delivering) whether or not it wins.
"""
DEFAULT_REWARD_WEIGHTS: dict[str, float] = {
    "win": 1.0, "ice": 0.001, "ore": 0.0005, "water": 0.004, "metal": 0.004, "lichen": 0.001,
    "units": 0.02, "factories": 0.5,
}
