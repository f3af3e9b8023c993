"""Scripted Lux AI Season 2 opponents as vectorized NumPy functions ``fn(obs, mask, rng)``.

Rows are seats (of many games): ``obs`` is ``uint8 [N, C, S, S]`` (the planes of
:data:`~games.lux.layout.OBS_PLANES`), ``mask`` ``bool [N, S * S, 33]`` and the result
``int64 [N, S * S, 6]``, one row of :data:`~games.lux.layout.NVEC` components per cell (the
adapter ignores cells without a unit or a factory centre). Every chosen value is legal under
``mask``; a bot acts through seats like any policy (:class:`~games.core.ScriptedPolicy`).

- :func:`random_legal`: each component uniformly among its legal values.
- :func:`heuristic`: mines ice and keeps its factories alive and watered. Its rules, per seat:

  Factories (on their centres): build a heavy robot when legal; else a light one when legal
  and fewer than :data:`LIGHTS_NEAR` own robots are within :data:`NEAR` cells (Chebyshev) of
  the centre; else water the lichen when legal and the factory keeps a reserve of
  :data:`WATER_RESERVE` water (in the last 100 of the rules' 1000 steps, as the ``progress``
  plane counts them, only twice the steps left, plus 10); else nothing. A factory never
  builds while an own robot stands on its centre (the new robot would collide with it).

  Robots, first rule that applies:

  1. carrying ice (at least :data:`CARGO_HOME` of the cargo space, or any when below
     :data:`PICKUP_BELOW` of the battery) and next to or on an own factory tile: transfer the
     ice to it;
  2. on an own factory tile with less than :data:`PICKUP_BELOW` of the battery: pick up power
     (waiting there when the factory has none);
  3. carrying ice, or low on power (below :data:`LOW_POWER`): move home, to the nearest own
     factory tile, or to one of a thirsty factory (below :data:`THIRSTY` water) when that is
     at most :data:`DETOUR` steps further (rule 1 then delivers there);
  4. light robots clear rubble where lichen could grow (cells next to own factory tiles or
     own lichen, not ice or ore): dig when standing on such a cell, else move to the nearest
     one no robot stands on (while there is one);
  5. on ice: dig;
  6. else move to the nearest ice cell no robot stands on.

  Moves follow distance fields (breadth-first relaxation over the board, around enemy factory
  tiles, own factory centres and robots): a robot steps to the legal free neighbour with the
  smallest distance, and only one robot (heavies first) into each cell, so own robots do not
  collide. A robot that has arrived stays (one on ice that cannot dig waits). A robot that
  cannot move (or whose rule asks for nothing legal) holds: ``keep``, unless its queue would
  move it or dig, then ``recharge``. Otherwise a robot names its action even when it is the
  one already queued (the adapter then lets the queue go on for free, as with ``keep``), so
  its choices read the same whatever is queued.

  With ``ore`` (:func:`heuristic_ore`) light robots mine ore instead of clearing rubble for
  the first :data:`ORE_UNTIL` of the game (``Thresholds.ore_until``; rules 5-6 with ore for
  ice; rules 1-3 take it home), the factories turn it into metal and build more heavy
  robots, and heavy robots clear rubble instead of digging ice while the factories hold
  :data:`SPARE_WATER` water each on average.

  With ``raid`` (:func:`heuristic_raid`, which also mines ore and steers by goals) the light
  robots leave their rules from :data:`RAID_FROM` of the game on to dig the other team's
  lichen: on it, dig; else move towards the nearest cell of it no robot stands on. A light
  robot's dig takes 10 lichen off the other team's score, and a cell dug bare gets rubble,
  which cuts the lichen beyond it off its factory's watering. The heavy robots go on
  delivering ice: lichen dries out within 100 steps without water (with every robot raiding,
  the teacher won 4 of 32 games against the heuristic).

  :func:`heuristic_raider` is that raid with :data:`RAIDER_RULES`: from 80 % of the game its
  factories build light robots however crowded (raiders), its light robots fill their
  batteries (a dig costs 5 of a light robot's 150 power) in the 2.5 % before the raid, which
  starts at 90 %, and its heavy robots clear rubble from 300 water a factory on average.
  Each switch of the game's progress (80 %, 87.5 %, 90 %) lies on an edge of the 40 bins a
  clone's cell decoder cuts the ``progress`` plane into (``network.grid_cell_bins=40``).

  :func:`heuristic_hunter` is the raider whose heavy robots, while they mine or clear
  (rules 4-6), step onto an enemy robot standing next to them on ice or ore
  (``Thresholds.hunt``). A heavy robot that moves onto a cell destroys every robot that stays
  there (the engine's collision rule; only another heavy robot moving in too can beat it), and
  robots stand still on ice and ore to dig: the other team loses its miners and the ice they
  stood on. It won 99 of 100 games against the heuristic where the raider won 91 (BENCHMARKS.md,
  session 50).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from games.batches import random_actions
from games.core import MultiDiscrete
from games.lux.fields import box_count, home_rule
from games.lux.layout import (
    DIRECTIONS,
    FACTORY,
    GOALS,
    HOME_DETOUR,
    NEAR_RANGE,
    NVEC,
    OBS_SCALE,
    OFFSETS,
    PLANE,
    RESOURCE,
    THIRSTY_WATER,
    UNIT,
)

CARGO_HOME = 0.5
"""robots carrying this fraction of their cargo space in ice take it home"""
LOW_POWER = 0.25
"""robots below this fraction of their battery go home to pick up power"""
PICKUP_BELOW = 0.5
"""robots on an own factory tile below this fraction of their battery pick up power"""
WATER_RESERVE = 200
"""water a factory keeps before it waters lichen"""
THIRSTY, DETOUR = THIRSTY_WATER, HOME_DETOUR
"""robots take ice to a factory with less than ``THIRSTY`` water when it is at most ``DETOUR``
steps further than the nearest own factory (the rule of the adapter's ``to_home`` goal)"""
ORE_UNTIL = 0.3
"""with ``ore``: light robots mine ore until this share of the game, then clear rubble"""
RAID_FROM = 0.85
"""with ``raid``: the light robots dig the other team's lichen from this share of the game on"""
RAID_CHARGED = 0.9
"""with ``Thresholds.raid_charge``: the share of its battery a light robot fills before it
raids"""
SPARE_WATER = 400
"""with ``ore``: heavy robots clear rubble while the factories hold this much water each on
average"""
NEAR, LIGHTS_NEAR = 6, 3
"""a factory builds light robots while fewer than ``LIGHTS_NEAR`` own robots are within
``NEAR`` cells of its centre"""
FAR = 10_000
"""the distance of cells a distance field does not reach"""


@dataclass(frozen=True)
class Thresholds:
    """The amounts a player's rules turn on (the module's constants by default), so a teacher
    can differ from the heuristic it plays in these alone."""

    water_reserve: float = WATER_RESERVE
    lights_near: int = LIGHTS_NEAR
    spare_water: float = SPARE_WATER
    raid_from: float = RAID_FROM
    """with ``raid``: the share of the game from which the light robots dig the other team's
    lichen"""
    heavy_raid_from: float | None = None
    """with ``raid``: the share from which the heavy robots do too (never when ``None``); a
    heavy robot's dig takes a whole tile's 100 lichen"""
    spare_water_nearest: bool = False
    """with ``ore``: a heavy robot clears rubble while its nearest own factory holds
    ``spare_water`` (a number it can see near it), not the factories on average (a number
    of the whole board)"""
    hunt: bool = False
    """heavy robots that follow rules 4-6 (not delivering, topping up or bound home) step onto
    an enemy robot standing next to them on ice or ore, the cells where robots stay to dig: a
    heavy robot moving onto a cell destroys the robots that stay there (unless another heavy
    robot moves in too)"""
    raid_lights_from: float | None = None
    """with ``raid``: from this share of the game on, factories build a light robot whenever
    one is legal, however many robots stand near (raiders; never when ``None``)"""
    raid_charge: float | None = None
    """with ``raid``: for this share of the game before ``raid_from`` the light robots go
    home and fill their batteries (a light robot's dig costs 5 of its 150 power), so they
    raid with full batteries (never when ``None``)"""
    ore_until: float = ORE_UNTIL
    """with ``ore``: the share of the game until which the light robots mine ore"""
    clear_by_goal: bool = False
    """with ``goals``: a robot goes on clearing rubble only where it stands on clearable
    rubble or its ``to_rubble`` goal is legal (what its masks show), not wherever the distance
    field reaches clearable rubble around the robots in the way; a clone then reads the choice
    between clearing and fetching ice off its masks (with the field, a blocked goal step left
    it to guess whether rubble lay behind)"""

# (dy, dx) of the move directions up, right, down, left (Lux's, in the layout's order)
_STEPS = ((-1, 0), (0, 1), (1, 0), (0, -1))
_MOVE, _TDIR, _TRES, _PRES, _FAC = OFFSETS[1], OFFSETS[2], OFFSETS[3], OFFSETS[4], OFFSETS[5]


def random_legal(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Each component of each cell uniformly among its legal values (0 where none is)."""
    size = obs.shape[-1]
    space = MultiDiscrete(NVEC, grid=(size, size))
    return random_actions(space, np.asarray(mask, bool), rng, (len(obs),))


# ---------------------------------------------------------------- grids


def neighbour(a: np.ndarray, d: int, fill: float | int | bool) -> np.ndarray:
    """``b[..., y, x] = a[..., y + dy, x + dx]``: the value one step in move direction ``d``
    (0 up, 1 right, 2 down, 3 left), ``fill`` off the board."""
    dy, dx = _STEPS[d]
    out = np.full_like(a, fill)
    h, w = a.shape[-2:]
    out[..., max(-dy, 0):h - max(dy, 0), max(-dx, 0):w - max(dx, 0)] = \
        a[..., max(dy, 0):h - max(-dy, 0), max(dx, 0):w - max(-dx, 0)]
    return out


def distance_field(targets: np.ndarray, blocked: np.ndarray,
                   needed: np.ndarray | None = None) -> np.ndarray:
    """``int32 [..., S, S]``: steps (4-neighbour moves, not through ``blocked`` cells) to the
    nearest target; :data:`FAR` where none is reachable and on blocked cells.

    Jacobi relaxation (one breadth-first ring per round, so a distance, once set, is final),
    checked every few rounds: it stops when each board has converged or, given ``needed``,
    has a distance on all its needed cells (whose smaller neighbours then have theirs).
    """
    shape = np.broadcast_shapes(targets.shape, blocked.shape)
    h, w = shape[-2:]
    far = np.int16(FAR)
    pad = np.full(shape[:-2] + (h + 2, w + 2), far, np.int16)
    dist = pad[..., 1:-1, 1:-1]  # a view: the board inside a FAR frame
    dist[...] = np.where(targets & ~blocked, 0, far)
    wall = np.where(blocked, far, 0).astype(np.int16)
    near, other = np.empty(shape, np.int16), np.empty(shape, np.int16)
    for rounds in range(1, h * w + 1):
        np.minimum(pad[..., :-2, 1:-1], pad[..., 2:, 1:-1], out=near)
        np.minimum(pad[..., 1:-1, :-2], pad[..., 1:-1, 2:], out=other)
        np.minimum(near, other, out=near)
        near += 1
        np.maximum(near, wall, out=near)
        if rounds % 4:
            np.minimum(dist, near, out=dist)
            continue
        busy = (near < dist).any((-2, -1))  # boards still changing
        np.minimum(dist, near, out=dist)
        if needed is not None:
            busy &= (needed & (dist >= far)).any((-2, -1))
        if not busy.any():
            break
    return dist.astype(np.int32)


# ---------------------------------------------------------------- the heuristic


def _plane(obs: np.ndarray, name: str) -> np.ndarray:
    return obs[:, PLANE[name]].astype(np.float32) * OBS_SCALE


def _queued(obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(type, direction)`` of each own unit's queued action as ``int [N, S, S]``: the
    layout's unit type (0 where the queue is empty) and transfer direction (0 centre, 1 up,
    ... 4 left; move direction ``d`` reads ``d + 1``)."""
    kinds = obs[:, PLANE["queued_move"]:PLANE["queued_recharge"] + 1] > 0
    dirs = obs[:, PLANE["queued_up"]:PLANE["queued_left"] + 1] > 0
    kind = np.where(kinds.any(1), kinds.argmax(1) + 1, 0)
    direction = np.where(dirs.any(1), dirs.argmax(1) + 1, 0)
    return kind, direction


def _factory_actions(obs: np.ndarray, m: np.ndarray, own_unit: np.ndarray,
                     rules: Thresholds, raid: bool = False) -> np.ndarray:
    """``int [N, S, S]``: the factory component (on own factory centres; 0 elsewhere)."""
    centre = obs[:, PLANE["own_factory_centre"]] > 0
    free = centre & ~own_unit
    water = np.rint(_plane(obs, "factory_water") * 1000)
    steps_left = (1.0 - _plane(obs, "progress")) * 1000
    reserve = np.minimum(rules.water_reserve, 2 * steps_left + 10)
    near = box_count(own_unit, NEAR)
    heavy = free & m[..., _FAC + FACTORY["heavy"]]
    crowded = near >= rules.lights_near
    if raid and rules.raid_lights_from is not None:
        crowded &= _plane(obs, "progress") < rules.raid_lights_from
    light = free & m[..., _FAC + FACTORY["light"]] & ~crowded & ~heavy
    watering = centre & m[..., _FAC + FACTORY["water"]] & (water >= reserve) & ~heavy & ~light
    out = np.zeros(centre.shape, np.int64)
    out[heavy] = FACTORY["heavy"]
    out[light] = FACTORY["light"]
    out[watering] = FACTORY["water"]
    return out


def _choose_moves(field: np.ndarray, enterable: np.ndarray, go: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """``int [N, S, S]``: the direction each ``go`` robot steps, to the ``enterable [4, N, S,
    S]`` neighbour nearest by ``field`` (ties at random); -1 where none is reachable. Robots
    are obstacles of the fields, so this step starts a shortest path around them."""
    best = np.full(field.shape, np.inf, np.float32)
    choice = np.full(field.shape, -1, np.int64)
    for d in range(4):
        there = neighbour(field, d, FAR).astype(np.float32) + rng.random(field.shape) * 0.5
        better = go & enterable[d] & (there < FAR) & (there < best)
        best = np.where(better, there, best)
        choice = np.where(better, d, choice)
    return choice


def _resolve(direction: np.ndarray, heavy: np.ndarray,
             rng: np.random.Generator) -> np.ndarray:
    """``direction`` with the moves that lose their target cell to another robot set to -1
    (heavies win, then chance)."""
    priority = heavy.astype(np.float32) + rng.random(direction.shape).astype(np.float32) * 0.5
    priority = np.where(direction >= 0, priority, -1.0)
    claims = np.full(direction.shape, -1.0, np.float32)  # best claim on each target cell
    for d in range(4):
        # the robot one step against d, moving in d, claims this cell
        mover = neighbour(np.where(direction == d, priority, -1.0), (d + 2) % 4, -1.0)
        claims = np.maximum(claims, mover)
    won = np.zeros(direction.shape, bool)
    for d in range(4):
        won |= (direction == d) & (neighbour(claims, d, -1.0) == priority)
    return np.where(won, direction, -1)


@dataclass(frozen=True)
class SeatPlanes:
    """The planes the rules read, as ``[N, S, S]`` arrays (fractions as float32)."""

    light: np.ndarray
    heavy: np.ndarray
    own_unit: np.ndarray
    any_unit: np.ndarray
    own_fac: np.ndarray
    centre: np.ndarray
    blocked: np.ndarray  # for moves: enemy factory tiles, own factory centres and robots
    ice: np.ndarray
    ore: np.ndarray
    clearable: np.ndarray  # rubble where lichen could grow next to own factories or lichen
    power: np.ndarray
    cargo: np.ndarray  # ice
    ore_cargo: np.ndarray
    water: np.ndarray  # the factory's, on its tiles
    enemy_lichen: np.ndarray

    @classmethod
    def read(cls, obs: np.ndarray) -> SeatPlanes:
        def on(name: str) -> np.ndarray:
            return np.asarray(obs[:, PLANE[name]] > 0)

        light, heavy = on("own_light"), on("own_heavy")
        own_fac, centre, ice = on("own_factory"), on("own_factory_centre"), on("ice")
        any_unit = light | heavy | on("enemy_light") | on("enemy_heavy")
        blocked = on("enemy_factory") | centre
        grows = own_fac | on("own_lichen")
        near_growth = grows.copy()
        for d in range(4):
            near_growth |= neighbour(grows, d, False)
        clearable = near_growth & on("rubble") & ~own_fac & ~blocked & ~ice & ~on("ore")
        return cls(light=light, heavy=heavy, own_unit=light | heavy, any_unit=any_unit,
                   own_fac=own_fac, centre=centre, blocked=blocked | any_unit, ice=ice,
                   ore=on("ore"), clearable=clearable, power=_plane(obs, "unit_power"),
                   cargo=_plane(obs, "unit_ice"), ore_cargo=_plane(obs, "unit_ore"),
                   water=np.rint(_plane(obs, "factory_water") * 1000),
                   enemy_lichen=on("enemy_lichen"))


Fields = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``(home, to_thirsty, ice, clear, ore)``: the distance fields a robot steers by (``int [N,
S, S]``) and where home is a thirsty factory (``bool [N, S, S]``)"""


def bfs_fields(obs: np.ndarray, seat: SeatPlanes) -> Fields:
    """The heuristic's own steering: breadth-first distance fields (:func:`_fields`)."""
    return _fields(seat)


def near_plane_fields(obs: np.ndarray, seat: SeatPlanes) -> Fields:
    """Steering by what a network sees: home and ice distances read off the observation's
    ``near_own_factory`` and ``near_ice`` planes (Manhattan, through obstacles, to any own
    factory tile or ice cell, robots on it or not; :data:`FAR` where the plane is 0, no target
    within :data:`~games.lux.layout.NEAR_RANGE`), no thirsty-factory detours. The one
    exception: light robots clearing rubble follow :func:`bfs_fields`' rubble field, which no
    plane carries. The heuristic steering this way measures how much of its play the
    observation carries."""

    def distance(name: str) -> np.ndarray:
        level = obs[:, PLANE[name]]
        near = level.astype(np.float32) * OBS_SCALE
        return np.where(level == 0, FAR, np.rint((1.0 - near) * NEAR_RANGE)).astype(np.int32)

    home = np.where(seat.centre, FAR, distance("near_own_factory"))
    return (home, np.zeros_like(seat.own_unit), distance("near_ice"), _clear_field(seat),
            distance("near_ore"))


def home_fields(seat: SeatPlanes) -> tuple[np.ndarray, np.ndarray]:
    """``(home, to_thirsty)``: where the adapter's ``to_home`` goal leads, read off the own
    factory centres and their water (:func:`games.lux.observe.home_distances`, to within the
    water plane's rounding): ``int [N, S, S]`` Manhattan steps to the nearest own factory tile
    or, when at most :data:`~games.lux.layout.HOME_DETOUR` further, a thirsty factory's
    (:data:`FAR` on factory centres and where no factory is), and where that is the target."""
    n, size = seat.centre.shape[0], seat.centre.shape[-1]
    k, y, x = np.nonzero(seat.centre)
    axis = np.arange(size)
    dy = np.maximum(np.abs(axis[None, :] - y[:, None]) - 1, 0)
    dx = np.maximum(np.abs(axis[None, :] - x[:, None]) - 1, 0)
    dist = (dy[:, :, None] + dx[:, None, :]).astype(np.int32)  # [K, S, S], one per factory
    nearest = np.full((n, size, size), FAR, np.int32)
    np.minimum.at(nearest, k, dist)
    thirsty = seat.water[k, y, x] < THIRSTY_WATER
    to_thirsty_f = np.full((n, size, size), FAR, np.int32)
    np.minimum.at(to_thirsty_f, k[thirsty], dist[thirsty])
    home, detour = home_rule(nearest, to_thirsty_f)
    return np.where(seat.centre, FAR, home), (to_thirsty_f < FAR) & detour


def nearest_factory_water(seat: SeatPlanes) -> np.ndarray:
    """``float [N, S, S]``: the water of each cell's nearest own factory (Manhattan steps to
    its 3x3 tiles, the first in the board's order on a tie; 0 on boards without one)."""
    n, size = seat.centre.shape[0], seat.centre.shape[-1]
    k, y, x = np.nonzero(seat.centre)  # sorted by board
    rank = np.arange(len(k)) - np.searchsorted(k, k)  # the factory's number on its board
    axis = np.arange(size)
    best = np.full((n, size, size), np.iinfo(np.int32).max, np.int64)
    water = np.zeros((n, size, size), np.float32)
    for j in range(int(rank.max()) + 1 if len(k) else 0):
        on = rank == j
        kj, yj, xj = k[on], y[on], x[on]
        dy = np.maximum(np.abs(axis[None, :] - yj[:, None]) - 1, 0)
        dx = np.maximum(np.abs(axis[None, :] - xj[:, None]) - 1, 0)
        dist = dy[:, :, None] + dx[:, None, :]  # [M, S, S]
        closer = dist < best[kj]
        best[kj] = np.where(closer, dist, best[kj])
        water[kj] = np.where(closer, seat.water[kj, yj, xj][:, None, None], water[kj])
    return water


def goal_fields(obs: np.ndarray, seat: SeatPlanes) -> Fields:
    """The steering of the teachers that move by goals (:func:`heuristic_goals`,
    :func:`heuristic_ore_goals`): home as the ``to_home`` goal leads (:func:`home_fields`, a
    thirsty factory preferred, so deliveries go there), ice and ore by the observation's planes
    (:func:`near_plane_fields`; used where no goal move is legal)."""
    _, _, ice, clear, ore = near_plane_fields(obs, seat)
    home, to_thirsty = home_fields(seat)
    return home, to_thirsty, ice, clear, ore


def _next_to_robots(seat: SeatPlanes) -> np.ndarray:
    """``bool [N, S, S]``: the free cells next to an own robot, where its steering reads a
    field (the fields' relaxation may stop once they all have a distance)."""
    needed = np.zeros_like(seat.own_unit)
    for d in range(4):
        needed |= neighbour(seat.own_unit, d, False)
    return needed & ~seat.blocked


def _clear_field(seat: SeatPlanes) -> np.ndarray:
    """``int [N, S, S]``: the distance field to free clearable rubble."""
    return distance_field(seat.clearable, seat.blocked, _next_to_robots(seat))


def _fields(seat: SeatPlanes) -> Fields:
    """``(home, to_thirsty, ice, clear, ore)`` distance fields ``int [N, S, S]``: to the
    nearest own factory tile (a thirsty factory's where that is at most :data:`DETOUR`
    further; ``to_thirsty`` says where), to free ice, to free clearable rubble and to free
    ore."""
    home = seat.own_fac & ~seat.centre
    thirsty = home & (seat.water < THIRSTY)
    targets = np.stack([home, thirsty, seat.ice & ~seat.own_fac, seat.clearable,
                        seat.ore & ~seat.own_fac])
    home_f, thirsty_f, ice_f, clear_f, ore_f = distance_field(
        targets, seat.blocked[None], _next_to_robots(seat)[None])
    to_thirsty = (thirsty_f < FAR) & (thirsty_f <= home_f + DETOUR)
    return np.where(to_thirsty, thirsty_f, home_f), to_thirsty, ice_f, clear_f, ore_f


def _transfer_directions(seat: SeatPlanes, m: np.ndarray, give: np.ndarray,
                         to_thirsty: np.ndarray, resource: np.ndarray) -> np.ndarray:
    """``int [N, S, S]``: a legal transfer direction of ``resource`` (a value of
    :data:`RESOURCE` per cell) onto an own factory tile (a thirsty one for robots bound
    there; centre first) for the ``give`` robots, else -1."""
    thirsty = seat.own_fac & (seat.water < THIRSTY)
    legal_resource = np.take_along_axis(m[..., _TRES:_TRES + len(RESOURCE)],
                                        resource[..., None], -1)[..., 0]
    give = give & m[..., UNIT["transfer"]] & legal_resource
    tdir = np.full(give.shape, -1, np.int64)
    for t in range(4, -1, -1):
        onto = (np.where(to_thirsty, thirsty, seat.own_fac) if t == 0 else
                np.where(to_thirsty, neighbour(thirsty, t - 1, False),
                         neighbour(seat.own_fac, t - 1, False)))
        tdir = np.where(give & onto & m[..., _TDIR + t], t, tdir)
    return tdir


def heuristic(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
              steering: Callable[[np.ndarray, SeatPlanes], Fields] = bfs_fields,
              goals: bool = False, ore: bool = False, raid: bool = False,
              rules: Thresholds = Thresholds()) -> np.ndarray:
    """The rule-based player of the module's docstring; ``steering`` gives the distance
    fields its robots follow (:func:`near_plane_fields`: the observation's planes instead);
    with ``goals`` robots bound home, to ice or to ore move by the goals ``to_home``,
    ``to_ice`` and ``to_ore`` where they are legal (the adapter steers them), by
    ``steering``'s fields elsewhere. With ``ore`` light robots mine ore instead of clearing
    rubble early in the game (rules 5-6 with ore for ice; rules 1-3 take ore home as they take
    ice), so the factories get the metal for more heavy robots, which clear rubble while the
    factories have water to spare. With ``raid`` the light robots dig the other team's lichen
    from :data:`RAID_FROM` of the game on (on it: dig; else towards the nearest, by the goal
    ``to_enemy_lichen`` with ``goals``), instead of all the rules above. ``rules``: the
    water reserve, light-build crowding and spare water the rules compare against."""
    n, size = len(obs), obs.shape[-1]
    m = np.asarray(mask, bool).reshape(n, size, size, -1)
    seat = SeatPlanes.read(obs)
    progress = _plane(obs, "progress")
    raiding = np.zeros_like(seat.own_unit)
    if raid:
        raiding = seat.light & (progress >= rules.raid_from)
        if rules.heavy_raid_from is not None:
            raiding |= seat.heavy & (progress >= rules.heavy_raid_from)
    unit, power = seat.own_unit & ~raiding, seat.power
    charging = np.zeros_like(unit)
    if raid and rules.raid_charge is not None:
        charging = (seat.light & (progress >= rules.raid_from - rules.raid_charge)
                    & (progress < rules.raid_from) & (power < RAID_CHARGED))
    can = m[..., :len(UNIT)]  # legal unit types
    home_f, to_thirsty, ice_f, clear_f, ore_f = steering(obs, seat)

    # the rules in order; each robot follows the first that applies
    carried = seat.cargo + seat.ore_cargo
    full = unit & (carried >= CARGO_HOME)
    resource = np.where(seat.ore_cargo > seat.cargo, RESOURCE["ore"], RESOURCE["ice"])
    tdir = _transfer_directions(seat, m, full | (unit & (carried > 0) & (power < PICKUP_BELOW)),
                                to_thirsty, resource)
    deliver = tdir >= 0
    topup = unit & ~deliver & seat.own_fac & ((power < PICKUP_BELOW) | charging)
    pickup = topup & can[..., UNIT["pickup"]] & m[..., _PRES + RESOURCE["power"]]
    home = unit & ~deliver & ~topup & (full | (power < LOW_POWER) | charging)
    rest = unit & ~deliver & ~topup & ~home
    if goals and rules.clear_by_goal:
        rubble_near = m[..., _MOVE + len(DIRECTIONS) + GOALS.index("rubble")]
    else:
        rubble_near = np.minimum.reduce([neighbour(clear_f, d, FAR) for d in range(4)]) < FAR
    early = progress < rules.ore_until  # [N, S, S], the same on every cell
    mining_ore = rest & seat.light & early if ore else np.zeros_like(rest)
    clearers = seat.light & ~mining_ore
    if ore and rules.spare_water_nearest:  # heavy robots clear rubble near a factory with
        # water to spare
        clearers = clearers | (seat.heavy & (nearest_factory_water(seat) > rules.spare_water))
    elif ore:  # heavy robots clear rubble while the factories have water to spare
        centres = seat.centre.sum((1, 2))
        spare = (seat.water * seat.centre).sum((1, 2)) > rules.spare_water * np.maximum(centres, 1)
        clearers = clearers | (seat.heavy & spare[:, None, None])
    clearing = rest & clearers & (seat.clearable | rubble_near)
    dig = can[..., UNIT["dig"]] & np.where(clearing, seat.clearable,
                                           np.where(mining_ore, seat.ore, rest & seat.ice))
    seek_ice = rest & ~clearing & ~mining_ore & ~seat.ice
    seek_rubble = clearing & ~seat.clearable
    seek_ore = mining_ore & ~seat.ore
    dig |= raiding & seat.enemy_lichen & can[..., UNIT["dig"]]
    seek_lichen = raiding & ~seat.enemy_lichen
    lichen_f = (distance_field(seat.enemy_lichen, seat.blocked, _next_to_robots(seat))
                if seek_lichen.any() else np.full(unit.shape, FAR, np.int32))

    goal = np.full(unit.shape, -1, np.int64)  # the move component's goal value, or -1
    if goals:
        for go, name in ((home & ~seat.own_fac, "home"), (seek_ice, "ice"), (seek_ore, "ore"),
                         (seek_rubble, "rubble"), (seek_lichen, "enemy_lichen")):
            value = len(DIRECTIONS) + GOALS.index(name)
            goal = np.where(go & can[..., UNIT["move"]] & m[..., _MOVE + value], value, goal)
    by_field = goal < 0
    enterable = np.stack([can[..., UNIT["move"]] & m[..., _MOVE + d]
                          & ~neighbour(seat.any_unit | seat.blocked, d, True)
                          for d in range(4)])
    move = np.maximum.reduce([_choose_moves(field, enterable, go & by_field, rng)
                              for field, go in ((home_f, home & ~seat.own_fac),
                                                (ice_f, seek_ice), (clear_f, seek_rubble),
                                                *(((ore_f, seek_ore),) if ore else ()),
                                                *(((lichen_f, seek_lichen),)
                                                  if seek_lichen.any() else ()))])
    if rules.hunt:  # heavy robots step onto enemy robots digging next to them
        prey = (obs[:, PLANE["enemy_heavy"]] > 0) | (obs[:, PLANE["enemy_light"]] > 0)
        prey &= seat.ice | seat.ore
        hunter = rest & seat.heavy & can[..., UNIT["move"]]
        attack = np.full(unit.shape, -1, np.int64)
        for d in rng.permutation(4):
            ok = hunter & (attack < 0) & m[..., _MOVE + d] & neighbour(prey, int(d), False)
            attack = np.where(ok, d, attack)
        move = np.where(attack >= 0, attack, move)
        goal = np.where(attack >= 0, -1, goal)
        dig &= attack < 0
    move = _resolve(move, seat.heavy, rng)

    kind = np.full(unit.shape, -1, np.int64)  # -1: hold
    kind[deliver] = UNIT["transfer"]
    kind[pickup] = UNIT["pickup"]
    kind[dig] = UNIT["dig"]
    kind[(move >= 0) | (goal >= 0)] = UNIT["move"]
    kind = _settle(obs, can, seat.own_unit, kind)

    out = np.zeros((n, size, size, len(NVEC)), np.int64)
    out[..., 0] = kind
    out[..., 1] = np.where(goal >= 0, goal, np.maximum(move, 0))
    out[..., 2] = np.maximum(tdir, 0)
    out[..., 3] = resource
    out[..., 4] = RESOURCE["power"]
    out[..., 5] = _factory_actions(obs, m, seat.own_unit, rules, raid)
    return out.reshape(n, size * size, len(NVEC))


def _settle(obs: np.ndarray, can: np.ndarray, unit: np.ndarray,
            kind: np.ndarray) -> np.ndarray:
    """The final unit types: holding robots (``kind`` -1) ``keep``, or ``recharge`` where
    their queue would move or dig them."""
    kind = kind.copy()
    queued, _ = _queued(obs)
    restless = np.isin(queued, (UNIT["move"], UNIT["dig"], UNIT["self_destruct"]))
    kind[unit & (kind < 0) & restless & can[..., UNIT["recharge"]]] = UNIT["recharge"]
    kind[kind < 0] = UNIT["keep"]
    legal = np.take_along_axis(can, kind[..., None], -1)[..., 0]
    kind[~legal] = UNIT["keep"]
    return kind


def heuristic_near(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """:func:`heuristic` steering by the observation's planes (:func:`near_plane_fields`): a
    teacher whose moves, but for the light robots' rubble clearing, are a function of what a
    network sees (it plays the heuristic about even)."""
    return heuristic(obs, mask, rng, steering=near_plane_fields)


def heuristic_goals(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator
                    ) -> np.ndarray:
    """The heuristic whose robots go home, to ice and to rubble by goal moves (``to_home``,
    ``to_ice``, ``to_rubble``; :func:`goal_fields` where none is legal): a teacher whose moves
    a network picks from what a robot should do, not which way. Robots bound for a thirsty
    factory deliver there, as the heuristic's do."""
    return heuristic(obs, mask, rng, steering=goal_fields, goals=True)


def heuristic_ore(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """:func:`heuristic` whose light robots mine ore early instead of clearing rubble: metal
    for more heavy robots, which dig ice and, with water to spare, clear rubble for lichen."""
    return heuristic(obs, mask, rng, ore=True)


def heuristic_ore_goals(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator
                        ) -> np.ndarray:
    """:func:`heuristic_ore` steering as :func:`heuristic_goals` does: robots go home, to ice,
    to ore and to rubble by goal moves, a teacher whose moves a network picks from what a
    robot should do."""
    return heuristic(obs, mask, rng, steering=goal_fields, goals=True, ore=True)


def heuristic_raid(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator,
                   rules: Thresholds = Thresholds()) -> np.ndarray:
    """:func:`heuristic_ore_goals` whose light robots, from :data:`RAID_FROM` of the game on,
    dig the other team's lichen (``to_enemy_lichen``): lichen dug away in the last steps is
    lichen the other team no longer counts when the game is decided."""
    return heuristic(obs, mask, rng, steering=goal_fields, goals=True, ore=True, raid=True,
                     rules=rules)


RAIDER_RULES = Thresholds(spare_water=300, raid_from=0.9, raid_charge=0.025,
                          raid_lights_from=0.8)
"""``heuristic-raider``'s thresholds: heavy robots clear rubble from 300 water a factory on
average, factories build raiders from 80 % of the game, light robots fill their batteries
in the 2.5 % before the raid and raid from 90 % (until session 40 from 3 %: 87 % of the
game falls inside a bin of 40, and its clones went home to charge some steps off)"""


def heuristic_raider(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator
                     ) -> np.ndarray:
    """:func:`heuristic_raid` with :data:`RAIDER_RULES`: more rubble cleared by heavy robots,
    and a later, larger raid of light robots that start it with full batteries."""
    return heuristic_raid(obs, mask, rng, rules=RAIDER_RULES)


RAIDER_GOAL_RULES = replace(RAIDER_RULES, clear_by_goal=True)
"""``heuristic-raider-goal``'s: :data:`RAIDER_RULES` clearing rubble by the ``to_rubble`` goal
alone (``Thresholds.clear_by_goal``): easier to clone, weaker (session 43: 87 / 100 against
the heuristic where ``heuristic-raider`` won 95, BENCHMARKS.md)"""


def heuristic_raider_goal(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator
                          ) -> np.ndarray:
    """:func:`heuristic_raider` whose robots clear rubble only where their masks show it
    (:data:`RAIDER_GOAL_RULES`)."""
    return heuristic_raid(obs, mask, rng, rules=RAIDER_GOAL_RULES)


HUNTER_RULES = replace(RAIDER_RULES, hunt=True)
"""``heuristic-hunter``'s: :data:`RAIDER_RULES` whose heavy robots also step onto the enemy
robots digging ice or ore next to them (``Thresholds.hunt``)"""


def heuristic_hunter(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator
                     ) -> np.ndarray:
    """:func:`heuristic_raider` whose heavy robots destroy the enemy robots digging next to
    them (:data:`HUNTER_RULES`): a heavy robot that moves onto a cell destroys the robots
    that stay there, so the other team loses its miners and the ice they stood on."""
    return heuristic_raid(obs, mask, rng, rules=HUNTER_RULES)


BOTS = {"random": random_legal, "heuristic": heuristic, "heuristic-near": heuristic_near,
        "heuristic-goals": heuristic_goals, "heuristic-ore": heuristic_ore,
        "heuristic-ore-goals": heuristic_ore_goals, "heuristic-raid": heuristic_raid,
        "heuristic-raider": heuristic_raider, "heuristic-raider-goal": heuristic_raider_goal,
        "heuristic-hunter": heuristic_hunter}
"""the Lux scripted opponents by name"""
