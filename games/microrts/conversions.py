"""Per-step conversions of :class:`~games.microrts.adapter.MicroRTSVecGame`: the engine's
shared int32 buffers (:mod:`games.microrts.engine_groups`) <-> the batch arrays.

Observations: one transposing byte copy per copy plan (:class:`~games.microrts.plans.CopyPlan`),
or the compiled loops of :mod:`games.microrts.kernels`; with fog, the unfogged board masked by
each seat's sight. Masks: gathered sparsely at the cells with an own unit. Actions: rotated back
where a seat sees the board rotated. The outputs alternate between two buffers (``flip``).
"""

from __future__ import annotations

import numpy as np

from games.microrts import kernels
from games.microrts.engine_groups import EngineGroups
from games.microrts.maps import MapInfo
from games.microrts.options import (
    ACTION_NVEC,
    MASK_WIDTH,
    NUM_ENGINE_PLANES,
    OBS_PLANES,
    MicroRTSOptions,
)
from games.microrts.plans import (
    LOW_BYTE,
    ROTATED_COLUMNS,
    CopyPlan,
    rotate_actions,
)
from games.microrts.plans import runs as index_runs

WALL, VISIBLE = 27, 28
OWNER_OWN = 11

_NVEC = np.asarray(ACTION_NVEC, np.int64)  # [7] each action component's number of values


def first_out_of_range(actions: np.ndarray) -> int:
    """The first flat cell (``env * seats * cells + seat * cells + cell``) of ``actions``
    ``int [E, A, cells, 7]`` whose action has a component out of its range, or -1: every cell
    of every seat (one rule in one process, worker processes and map-size groups alike)."""
    rows = np.ascontiguousarray(actions).reshape(-1, actions.shape[-1])
    if kernels.AVAILABLE:
        return int(kernels.first_out_of_range(rows, _NVEC))
    bad = ((rows < 0) | (rows >= _NVEC)).any(axis=1)
    return int(np.flatnonzero(bad)[0]) if bad.any() else -1


class Conversions:
    """The batch buffers of ``engine``'s seats and the conversions into and out of them.

    ``rotated`` ``[E, A]``: seats that see the board rotated 180 degrees; ``num_sp``: self-play
    envs (envs ``0..num_sp-1``); ``shape``: ``(H, W)``; ``compiled``: numba kernels instead of
    numpy. :meth:`link` must follow the engine's start."""

    def __init__(self, engine: EngineGroups, options: MicroRTSOptions, rotated: np.ndarray,
                 env_map: list[MapInfo], num_sp: int, shape: tuple[int, int],
                 compiled: bool) -> None:
        self._engine = engine
        self._groups = engine.groups
        self.alive = engine.alive
        self.rotated = rotated
        self.num_envs, self.num_seats = engine.players.shape
        self.height, self.width = shape
        self._num_sp = num_sp
        self._alternate_sides = options.alternate_sides
        self.partial_obs = partial_obs = options.partial_obs
        self.compiled = compiled
        self.full_plan = self.plan(np.arange(self.num_envs),
                                   pairs=not (options.rotate_player1 or partial_obs))
        self.env_plans = [self.plan(np.array([e])) for e in range(self.num_envs)]

        walls = np.zeros((self.num_envs, self.num_seats, *shape), np.uint8)
        for e in range(self.num_envs):
            for s in range(self.num_seats):
                if self.alive[e, s]:
                    w = env_map[e].walls
                    walls[e, s] = w[::-1, ::-1] if rotated[e, s] else w
        self._walls = walls
        self.obs = self.blank_boards()
        self.state = self.blank_boards() if partial_obs else None
        cells = self.height * self.width
        self.mask = [np.zeros((self.num_envs, self.num_seats, cells, MASK_WIDTH), bool)
                     for _ in range(2)]
        self._grid_y = np.arange(self.height)[None, :, None]
        self._grid_x = np.arange(self.width)[None, None, :]

    def blank_boards(self) -> list[np.ndarray]:
        """Two ``uint8 [E, A, 29, H, W]`` buffers with the wall and visible planes set (fog
        recomputes the visible plane per step)."""
        buffers = [np.zeros((self.num_envs, self.num_seats, len(OBS_PLANES), self.height,
                             self.width), np.uint8) for _ in range(2)]
        for buf in buffers:
            buf[:, :, WALL] = self._walls
            buf[:, :, VISIBLE] = self.alive[:, :, None, None]
        return buffers

    def plan(self, envs: np.ndarray, pairs: bool = False) -> list[CopyPlan]:
        """Copy plans for the live seats of ``envs``: runs of seats whose slots and engine rows
        are both arithmetic progressions, found per (group, rotation, kind, seat, side) class
        (alternating sides make the row order a permutation of the slot order). With ``pairs``
        (no rotation), self-play envs move both seats per copy: at most two plans for them."""
        plans = []
        num_sp = self._num_sp
        players = self._engine.players
        if pairs and num_sp and len(envs) == self.num_envs:
            games = len(self._groups[0].sp_envs)  # self-play games are envs 0..S-1 of group 0
            step = 2 if self._alternate_sides else 1
            for first in range(min(step, num_sp)):
                count = len(range(first, num_sp, step))
                plans.append(CopyPlan(0, False, slice(first, num_sp, step),
                                   slice(first, num_sp, step), count, pairs=True,
                                   swapped=bool(players[first, 0] == 1), games=games))
            envs = envs[envs >= num_sp]
        seats = np.nonzero(self.alive[envs])
        env, seat = envs[seats[0]], seats[1]
        group = self._engine.seat_group[env, seat]
        rotated = self.rotated[env, seat]
        selfplay = env < num_sp
        side = players[env, seat]
        dst = env * self.num_seats + seat
        src = self._engine.seat_row[env, seat]
        keys = np.stack([group, rotated, selfplay, seat, side], 1)
        for key in np.unique(keys, axis=0):
            sel = (keys == key).all(1)
            for d, s, count in index_runs(dst[sel], src[sel]):
                plans.append(CopyPlan(int(key[0]), bool(key[1]), d, s, count))
        return plans

    def convert_obs(self, plans: list[CopyPlan], out: np.ndarray, source: str = "obs") -> None:
        """Engine rows -> ``out`` ``[E, A, C, H, W]`` for ``plans``: one transposing copy of the
        int32 buffers' low bytes per plan. With fog the observation is the unfogged board masked
        by the seat's sight: the engine's own fogged encoding is one cycle stale and leaves
        value-0 planes unset, so it is not used."""
        flat = out.reshape(out.shape[0] * out.shape[1], out.shape[2], -1)  # [E*A, C, HW]
        fogged = source == "obs" and self.partial_obs
        for c in plans:
            g = self._groups[c.group]
            cells = c.src_view(g.planes)  # [K, HW, 27] (or [K, 2, HW, 27]) uint8 view
            if c.rotated:  # 180 degrees = reversed cell order
                cells = cells[:, ::-1]
            planes = cells.swapaxes(-1, -2)  # [K, 27, HW]
            dst = c.dst_view(flat)  # [K, C, HW]
            if fogged:  # never a pairs plan
                visible = self._visibility(g.obs[c.src]).reshape(c.count, -1)  # [K, HW]
                if c.rotated:
                    visible = visible[:, ::-1]
                planes = planes * visible[:, None]
                dst[:, VISIBLE] = visible
            np.copyto(dst[..., :NUM_ENGINE_PLANES, :], planes)

    def link(self) -> None:
        """Views of the fixed buffers for the per-step conversions, once the engine's buffers
        exist (made once: a step then costs one numpy call per plan and array)."""
        groups = self._groups
        self._obs_copies: list[list[tuple[np.ndarray, np.ndarray]]] = []
        for flip in range(2):
            flat = self.obs[flip].reshape(self.num_envs * self.num_seats,
                                          len(OBS_PLANES), -1)  # [E*A, C, HW]
            self._obs_copies.append([
                (c.dst_view(flat)[..., :NUM_ENGINE_PLANES, :],
                 (c.src_view(groups[c.group].planes)[:, ::-1] if c.rotated
                  else c.src_view(groups[c.group].planes)).swapaxes(-1, -2))
                for c in self.full_plan])
        self._act_copies = [(c, c.src_view(groups[c.group].act)) for c in self.full_plan]
        # output mask row (e * A + s) * HW + cell -> engine mask row (group's first row + row)
        # * HW + cell' (cell' = HW - 1 - cell where the seat sees the board rotated), and the
        # engine rows -> seat slots of each group's rewards
        cells = self.height * self.width
        cell = np.arange(cells)
        slots = self.num_envs * self.num_seats
        seat_group, seat_row = self._engine.seat_group, self._engine.seat_row
        self._mask_src = np.full(slots * cells, -1, np.int64)
        turn = np.zeros(slots * cells, bool)
        self.slot_row = np.full(slots, -1, np.int64)  # seat slot -> row of the engine arrays
        self.slot_rot = self.rotated.reshape(-1).copy()  # [E*A]
        first_row = 0
        for gi, g in enumerate(groups):
            g.row_slot = np.zeros(g.rows, np.int64)  # engine row -> flat seat slot e * A + s
            for e, s in np.argwhere(self.alive & (seat_group == gi)):
                slot = e * self.num_seats + s
                g.row_slot[seat_row[e, s]] = slot
                self.slot_row[slot] = first_row + seat_row[e, s]
                src_cell = cells - 1 - cell if self.rotated[e, s] else cell
                dst = slice(slot * cells, (slot + 1) * cells)
                self._mask_src[dst] = (first_row + seat_row[e, s]) * cells + src_cell
                turn[dst] = self.rotated[e, s]
            first_row += g.rows
        self._mask_turn = turn if turn.any() else None
        self._mask_rows = [np.zeros(0, np.int64) for _ in range(2)]  # rows set, per buffer
        # for the compiled conversions: the same buffers by seat slot, and which mask rows
        # each mask buffer holds
        self._obs_slots = [o.reshape(slots, len(OBS_PLANES), cells) for o in self.obs]
        self._state_slots = [o.reshape(slots, len(OBS_PLANES), cells)
                             for o in (self.state if self.state is not None else self.obs)]
        self._visible = np.zeros(cells, bool)  # the fog kernel's scratch row
        self._mask_slots = [m.reshape(slots, cells, MASK_WIDTH) for m in self.mask]
        self._mask_set = [np.zeros((slots, cells), bool) for _ in range(2)]
        self._slot_action_shape = (slots, cells, len(ACTION_NVEC))
        self._engine_act, self._engine_masks = self._engine.act, self._engine.masks
        self.engine_planes = self._engine.obs.reshape(-1, cells, NUM_ENGINE_PLANES)
        # the engine's 0/1 int32 mask rows as bytes: [all rows * HW, 78] uint8 view
        self._engine_mask_bytes = self._engine.masks.view(np.uint8).reshape(
            -1, MASK_WIDTH, 4)[..., LOW_BYTE]

    def _visibility(self, state: np.ndarray) -> np.ndarray:
        """``bool [K, H, W]``: cells within sight of the seat's units, from unfogged
        ``state`` ``[K, H, W, 27]`` (the engine's rule: squared distance <= radius^2)."""
        k, y, x = np.nonzero(state[..., 11])  # own units, sorted by k
        visible = np.zeros(state.shape[:3], bool)
        if len(k) == 0:
            return visible
        radius = self._engine.sight[state[k, y, x, 14:21].argmax(-1)]  # [U]
        dist2 = (y[:, None, None] - self._grid_y) ** 2 + (x[:, None, None] - self._grid_x) ** 2
        within = dist2 <= (radius ** 2)[:, None, None]  # [U, H, W]
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        visible[k[starts]] = np.logical_or.reduceat(within, starts, axis=0)
        return visible

    def _convert_masks(self, flip: int) -> None:
        """Engine masks (int32 0/1) -> the bool mask buffer ``flip``, sparsely. Only cells with
        an own unit (in the observation just converted) can have a mask, so only their engine
        rows are gathered (rows of units busy with an action are all zero), rotated for seats
        that see the board rotated, and scattered into the buffer after clearing the rows it
        held."""
        cells = np.flatnonzero(self.obs[flip][:, :, OWNER_OWN])  # (e * A + s) * HW + cell
        rows = self._engine_mask_bytes[self._mask_src[cells]].view(bool)  # [U, 78]
        if self._mask_turn is not None:
            turn = self._mask_turn[cells]
            rows[turn] = rows[turn][:, ROTATED_COLUMNS]
        out = self.mask[flip].reshape(-1, MASK_WIDTH)  # [E*A*HW, 78]
        out[self._mask_rows[flip]] = False
        out[cells] = rows
        self._mask_rows[flip] = cells

    def write_actions(self, actions: np.ndarray, flip: int) -> None:
        """``actions`` ``[E, A, HW, 7]`` chosen from mask buffer ``flip`` -> the engine's
        (their ranges checked before: :func:`first_out_of_range`)."""
        flat = actions.reshape(self._slot_action_shape)  # [E*A, HW, 7]
        if self.compiled:
            kernels.write_actions(flat, self.slot_row, self.slot_rot, self._mask_set[flip],
                                  self._engine_act)
            return
        for c, engine_view in self._act_copies:  # [K, (2,) HW, 7] int32 views
            if c.rotated:
                rotate_actions(c.dst_view(flat), engine_view)
            else:
                np.copyto(engine_view, c.dst_view(flat))

    def outputs(self, flip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fresh obs/state/mask into buffer set ``flip`` (engine masks computed here: a Java
        exception from the engine propagates)."""
        obs = self.obs[flip]
        if self.partial_obs and self.compiled:
            assert self.state is not None
            kernels.read_fogged_observations(
                self.engine_planes, self.slot_row, self.slot_rot, self._engine.sight,
                self.width, VISIBLE, self._obs_slots[flip], self._state_slots[flip],
                self._visible)
        elif self.partial_obs:
            self.convert_obs(self.full_plan, obs)
        elif self.compiled:
            kernels.read_observations(self.engine_planes, self.slot_row, self.slot_rot,
                                      self._obs_slots[flip])
        else:
            for dst, src in self._obs_copies[flip]:
                np.copyto(dst, src)
        state = obs
        if self.state is not None:
            state = self.state[flip]
            if not self.compiled:
                self.convert_obs(self.full_plan, state, "state")
        for g in self._groups:
            g.client.getMasks(g.learner)
        if self.compiled:
            kernels.read_masks(self._engine_masks, self.slot_row, self.slot_rot,
                               ROTATED_COLUMNS, self._obs_slots[flip][:, OWNER_OWN],
                               self._mask_slots[flip], self._mask_set[flip])
        else:
            self._convert_masks(flip)
        return obs, state, self.mask[flip]
