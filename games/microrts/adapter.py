"""microRTS as a :class:`~games.core.VecGame`: grid observations, per-cell actions, masks.

Engine: one ``tests.JNIGridnetSharedMemVecClient`` per *side group* (below), ``threads=0`` (the
thread pool corrupts rewards), stepping every game one cycle per ``step``. Observation, mask and
action arrays are direct buffers shared with Java and read/written by numpy without Java calls.

**Environments and seats.** Envs ``0..S-1`` are self-play games (``num_selfplay_envs``), the rest
play a scripted bot. ``A = 2`` seats when any self-play env exists, else ``A = 1``; a bot env's
second seat is then ``alive=False`` (zero obs, all-False mask, reward 0, ignored actions).

**Sides.** ``players[e, s]`` is the engine player (0 or 1, -1 for a dead seat) that seat ``s`` of
env ``e`` controls. With ``alternate_sides`` (default) seat 0 plays player ``e % 2`` in self-play
env ``e`` and player ``j % 2`` in bot env ``j`` (counting bot envs from 0), and the bot of bot env
``j`` is ``bots[(j // 2) % len(bots)]``, so every bot meets seat 0 on both sides. Player 0's unit
actions are issued first and win conflicts, so sides matter. Without it, seat 0 is player 0.

**Observations** ``uint8 [E, A, 29, H, W]`` one-hot planes (:data:`OBS_PLANES`): hit points
(0..4+), carried/held resources (0..4+), owner (none/own/enemy: relative to the seat), unit type
(none, resource, base, barracks, worker, light, heavy, ranged), current action (none, move,
harvest, return, produce, attack), walls, visible (all ones without ``partial_obs``; with it, the
cells in sight of the seat's units, by the engine's rule; unseen cells have no other plane set).
With ``rotate_player1`` the board is also rotated 180 degrees for seats playing player 1 (so on
the point-symmetric shipped maps both sides see the same opening); actions and masks are rotated
back and forth to match (cell ``i`` <-> ``HW-1-i``, directions ``d`` <-> ``(d+2) % 4``, attack
offset ``k`` <-> ``48-k``). Default off: it costs ~15% of a step on 8x8 self-play and ~25% on
16x16 (the rotated masks are a gather; ``tools/bench_microrts_adapter.py``), and unrotated
policies learn both sides anyway.

**Global state** ``[E, A, 29, H, W]`` for a centralized critic: the unfogged board from the seat's
perspective (visible plane all ones). With full observability it is the observation array
itself. Masks come from the full game state, as in the engine, even with ``partial_obs``.

**Actions** ``[E, A, H*W, 7]``: per cell (type, move dir, harvest dir, return dir, produce dir,
produce unit type, attack target in the 7x7 window). **Masks** ``bool [E, A, H*W, 78]``: the
components' legal values concatenated; a cell with no own unit ready to act is all False. Masks
are per component, not conditional on each other, and ignore cells and resources reserved by
actions already under way: the engine silently drops such actions, and those that lose a
same-cycle conflict with another unit (player 0's are issued first).

**Rewards**: the weighted sum (``reward_weights``) of the engine's six components
(:data:`REWARD_COMPONENTS`); the last step's raw components are in ``last_reward_components``
``[E, A, 6]`` and per-episode sums in :meth:`episode_reward_components`.

**Episodes** end when a side has no units left (``terminated``; WIN/LOSS from the engine's
winner, DRAW if both were wiped out in one cycle) or after ``max_steps`` (``truncated``; outcome
DRAW by default, as in microRTS tournaments, or NONE with ``timeout_outcome="none"``). Envs reset
themselves; ``final_obs``/``final_state`` hold the last observation of finished episodes.

``seed`` is recorded only: the engine and the scripted bots are deterministic (same actions,
same game), while the random and search bots draw from Java's unseeded generators.

Returned arrays are reused: ``obs``, ``action_mask``, ``state`` and ``final_*`` alternate between
two buffers, so a :class:`~games.core.Batch` stays valid until the second ``step`` after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from games.core import (
    Batch,
    EpisodeStats,
    EpisodeTracker,
    GameError,
    GameSpec,
    MultiDiscrete,
    Outcome,
)
from games.microrts import bots as bots_mod
from games.microrts import engine
from games.microrts.maps import MapInfo, resolve_maps

REWARD_COMPONENTS = ("win_loss", "resource_gather", "produce_worker", "produce_building",
                     "attack", "produce_combat_unit")
DEFAULT_REWARD_WEIGHTS = (10.0, 1.0, 1.0, 0.2, 1.0, 4.0)  # MicroRTS-Py's
# Java order puts ProduceWorker (never "done") first: the vector client resets a game by itself
# when component 0 says done, and we want to read the last observation before resetting.
_JAVA_RFS = ("ProduceWorker", "WinLoss", "ResourceGather", "ProduceBuilding", "Attack",
             "ProduceCombatUnit")
_CANON_FROM_JAVA = np.array([1, 2, 0, 3, 4, 5])  # canonical k = java[_CANON_FROM_JAVA[k]]
_JAVA_WINLOSS = 1

OBS_PLANES = (
    *(f"hp_{i}" for i in range(5)), *(f"resources_{i}" for i in range(5)),
    "owner_none", "owner_own", "owner_enemy",
    "type_none", "type_resource", "type_base", "type_barracks", "type_worker", "type_light",
    "type_heavy", "type_ranged",
    "action_none", "action_move", "action_harvest", "action_return", "action_produce",
    "action_attack",
    "wall", "visible",
)
NUM_ENGINE_PLANES = 27  # the planes before "wall" come from the engine
_WALL, _VISIBLE = 27, 28
_EMPTY_CELL_PLANES = [0, 5, 10, 13, 21]  # what the engine writes for a cell without a unit
ACTION_NVEC = (6, 4, 4, 4, 4, 7, 49)
ACTION_GATES: tuple[tuple[int, ...] | None, ...] = (None, (1,), (2,), (3,), (4,), (4,), (5,))
_BIG_STEPS = 2**31 - 1  # the engine's own step limit, never reached: we truncate in Python


@dataclass
class MicroRTSOptions:
    """Options of the ``microrts`` game (``game.options`` in a config)."""

    map: str = "basesWorkers16x16"
    """shipped map name (e.g. basesWorkers8x8) or a path to an XML map"""
    maps: list[str] = field(default_factory=list)
    """several maps of one size, cycled over envs (overrides ``map``)"""
    bots: list[str] = field(default_factory=lambda: ["WorkerRush"])
    """opponents of the bot envs (see games.microrts.bots), cycled over them"""
    num_selfplay_envs: int = 0
    """how many of the envs are self-play games (2 seats); the others play bots"""
    max_steps: int = 2000
    """episode length limit in game cycles; reaching it truncates the episode"""
    reward_weights: tuple[float, ...] = DEFAULT_REWARD_WEIGHTS
    """weights of win_loss, resource_gather, produce_worker, produce_building, attack,
    produce_combat_unit"""
    partial_obs: bool = False
    """fog of war: seats see what their units see (bots are fogged too; state stays unfogged)"""
    rotate_player1: bool = False
    """rotate the board 180 degrees for seats playing player 1"""
    alternate_sides: bool = True
    """seat 0 plays player 0 in even envs and player 1 in odd ones (see module docs)"""
    timeout_outcome: Literal["draw", "none"] = "draw"
    """outcome of a game stopped by max_steps"""
    render: bool = False
    """accepted for uniformity with other games: render() always works here"""
    render_cell: int = 24
    """pixels per cell in render() frames"""

    def __post_init__(self) -> None:
        if len(self.reward_weights) != len(REWARD_COMPONENTS):
            raise ValueError(f"reward_weights needs {len(REWARD_COMPONENTS)} numbers "
                             f"({', '.join(REWARD_COMPONENTS)}), got {len(self.reward_weights)}")
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.num_selfplay_envs < 0:
            raise ValueError(f"num_selfplay_envs must be >= 0, got {self.num_selfplay_envs}")
        if not 4 <= self.render_cell <= 128:
            raise ValueError(f"render_cell must be in 4..128, got {self.render_cell}")


# --------------------------------------------------------------------------- index plans


@dataclass(frozen=True)
class _Copy:
    """Seat slots ``dst`` (flat ``e*A+s``) <-> engine rows ``src`` of one group, one rotation."""

    group: int
    rotated: bool
    dst: slice | np.ndarray
    src: slice | np.ndarray
    count: int


def _as_slice(idx: np.ndarray) -> slice | np.ndarray:
    """An arithmetic progression as a slice (numpy then uses views, not gathers)."""
    if len(idx) == 1:
        return slice(int(idx[0]), int(idx[0]) + 1)
    step = int(idx[1] - idx[0])
    if step > 0 and np.all(np.diff(idx) == step):
        return slice(int(idx[0]), int(idx[-1]) + 1, step)
    return idx


def _rotated_mask_index(nvec: tuple[int, ...], cells: int) -> np.ndarray:
    """Flat gather index turning a ``[cells * sum(nvec)]`` mask row into the 180-degree-rotated
    frame: cells reversed; directions ``d <- (d + 2) % 4``; attack offsets ``k <- n - 1 - k``."""
    columns = []
    off = 0
    for comp, n in enumerate(nvec):
        values = np.arange(n)
        if comp in (1, 2, 3, 4):
            values = (values + 2) % 4
        elif comp == 6:
            values = n - 1 - values
        columns.append(off + values)
        off += n
    column = np.concatenate(columns)
    return ((cells - 1 - np.arange(cells))[:, None] * off + column[None, :]).ravel()


@dataclass
class _Group:
    """One Java vector client: self-play games and bot envs whose seat 0 is ``learner``."""

    learner: int  # engine player of the agent in this group's bot envs
    sp_envs: list[int]  # global env index of each self-play game
    bot_envs: list[int]  # global env index of each bot env
    bot_specs: list[bots_mod.BotSpec]
    client: Any = None
    obs: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # [N, H, W, 27]
    mask: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # [N, HW, 78]
    act: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))  # [N, HW, 7]
    state: np.ndarray | None = None  # [N, H, W, 27] unfogged, partial_obs only
    state_nd: Any = None  # Java NDBuffer over ``state``
    staged: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))  # [N, HW, 27]
    mask_bits: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # [N, HW, 78]
    players_j: Any = None  # Java int[] of the agent's player per row
    keep: list[Any] = field(default_factory=list)  # Java buffers that must stay alive

    @property
    def rows(self) -> int:
        return 2 * len(self.sp_envs) + len(self.bot_envs)


class MicroRTSVecGame:
    """Batched microRTS (see the module docstring for every convention)."""

    def __init__(self, options: MicroRTSOptions, num_envs: int, seed: int | None = None,
                 name: str = "microrts") -> None:
        if num_envs < 1:
            raise GameError(f"microrts: num_envs must be >= 1, got {num_envs}")
        opts = options
        if opts.num_selfplay_envs > num_envs:
            raise GameError(f"microrts: num_selfplay_envs={opts.num_selfplay_envs} exceeds "
                            f"num_envs={num_envs}")
        self.options = opts
        self.seed = seed
        num_sp = opts.num_selfplay_envs
        num_bot = num_envs - num_sp
        bot_specs = [bots_mod.resolve_bot(b) for b in opts.bots]
        if num_bot and not bot_specs:
            raise GameError(f"microrts: {num_bot} bot envs but options.bots is empty; name "
                            f"bots or set num_selfplay_envs={num_envs}")
        self.map_infos: list[MapInfo] = resolve_maps(opts.maps or [opts.map])
        self.height, self.width = self.map_infos[0].shape
        height, width, cells = self.height, self.width, self.height * self.width
        num_seats = 2 if num_sp else 1
        self.num_envs, self.num_seats = num_envs, num_seats

        # --- who plays what where
        self.env_map = [self.map_infos[e % len(self.map_infos)] for e in range(num_envs)]
        self.players = np.full((num_envs, num_seats), -1, np.int64)  # [E, A]
        self.env_bot: list[str | None] = [None] * num_envs
        groups = [_Group(0, [], [], []), _Group(1, [], [], [])]
        for i in range(num_sp):
            side = i % 2 if opts.alternate_sides else 0
            self.players[i] = (side, 1 - side)
            groups[0].sp_envs.append(i)
        for j in range(num_bot):
            e = num_sp + j
            side = j % 2 if opts.alternate_sides else 0
            spec = bot_specs[(j // 2) % len(bot_specs) if opts.alternate_sides
                             else j % len(bot_specs)]
            self.players[e, 0] = side
            self.env_bot[e] = spec.name
            groups[side].bot_envs.append(e)
            groups[side].bot_specs.append(spec)
        self.groups = [g for g in groups if g.rows]
        self.alive = self.players >= 0  # [E, A]
        self.alive.setflags(write=False)

        # --- per seat: group, engine row, rotation
        env_group = np.zeros(num_envs, np.int64)
        env_row0 = np.zeros(num_envs, np.int64)  # a row of the env in its group (for "done")
        self._env_slot: list[tuple[int, str, int]] = [(0, "", 0)] * num_envs
        seat_group = np.zeros((num_envs, num_seats), np.int64)
        seat_row = np.zeros((num_envs, num_seats), np.int64)
        for gi, g in enumerate(self.groups):
            for i, e in enumerate(g.sp_envs):
                env_group[e], env_row0[e] = gi, 2 * i
                self._env_slot[e] = (gi, "selfplay", i)
                seat_group[e] = gi
                seat_row[e] = 2 * i + self.players[e]
            for j, e in enumerate(g.bot_envs):
                row = 2 * len(g.sp_envs) + j
                env_group[e], env_row0[e] = gi, row
                self._env_slot[e] = (gi, "bot", j)
                seat_group[e, 0], seat_row[e, 0] = gi, row
        self._env_group, self._env_row0 = env_group, env_row0
        self._seat_group, self._seat_row = seat_group, seat_row
        self._rotated = (self.players == 1) & opts.rotate_player1  # [E, A]
        self._full_plan = self._plan(np.arange(num_envs))

        # --- spaces, buffers
        self.spec = GameSpec(
            name=name, num_envs=num_envs, num_seats=num_seats,
            obs_shape=(len(OBS_PLANES), height, width), obs_dtype=np.dtype(np.uint8),
            action_space=MultiDiscrete(ACTION_NVEC, grid=(height, width), gates=ACTION_GATES),
            state_shape=(len(OBS_PLANES), height, width), state_dtype=np.dtype(np.uint8),
            obs_kind="grid", zero_sum=not any(opts.reward_weights[1:]), render_fps=30)
        self._weights = np.asarray(opts.reward_weights, np.float64)
        shape = (num_envs, num_seats, len(OBS_PLANES), height, width)
        self._obs = [np.zeros(shape, np.uint8) for _ in range(2)]
        self._final_obs = [np.zeros(shape, np.uint8) for _ in range(2)]
        self._state = [np.zeros(shape, np.uint8) for _ in range(2)] if opts.partial_obs else None
        self._final_state = ([np.zeros(shape, np.uint8) for _ in range(2)]
                             if opts.partial_obs else None)
        mask_width = int(sum(ACTION_NVEC))
        self._mask = [np.zeros((num_envs, num_seats, cells, mask_width), bool) for _ in range(2)]
        self._flip = self._final_flip = 0
        walls = np.zeros((num_envs, num_seats, height, width), np.uint8)
        for e in range(num_envs):
            for s in range(num_seats):
                if self.alive[e, s]:
                    w = self.env_map[e].walls
                    walls[e, s] = w[::-1, ::-1] if self._rotated[e, s] else w
        for buffers in (self._obs, self._final_obs, self._state or [], self._final_state or []):
            for buf in buffers:
                buf[:, :, _WALL] = walls
                buf[:, :, _VISIBLE] = self.alive[:, :, None, None]  # fog: recomputed per step
        self._sight = np.zeros(7, np.int64)  # sight radius per unit type id, from the engine
        self._grid_y = np.arange(height)[None, :, None]
        self._grid_x = np.arange(width)[None, None, :]
        self._rot_mask_index = _rotated_mask_index(ACTION_NVEC, cells)  # [HW * 78]

        self._steps = np.zeros(num_envs, np.int64)
        self._tracker = EpisodeTracker(num_envs, num_seats)
        self._component_sums = np.zeros((num_envs, num_seats, len(REWARD_COMPONENTS)))
        self.last_reward_components = np.zeros((num_envs, num_seats, len(REWARD_COMPONENTS)))
        self._episode_components = np.zeros((0, len(REWARD_COMPONENTS)))
        self._sp_gs_field: Any = None
        self._closed = False
        self._start_engine()

    # ------------------------------------------------------------------ engine set-up

    def _start_engine(self) -> None:
        engine.start_jvm()
        import jpype
        from jpype.nio import convertToDirectBuffer

        byte_order = jpype.JClass("java.nio.ByteOrder").nativeOrder()
        nd_buffer = jpype.JClass("util.NDBuffer")
        utt = jpype.JClass("rts.units.UnitTypeTable")()
        nvec = (6, 4, 4, 4, 4, int(utt.getUnitTypes().size()),
                (2 * int(utt.getMaxAttackRange()) + 1) ** 2)
        if nvec != ACTION_NVEC:
            raise GameError(f"unexpected microRTS unit-type table: action sizes {nvec}")
        self._utt = utt
        for unit_type in utt.getUnitTypes():
            self._sight[int(unit_type.ID)] = int(unit_type.sightRadius)
        rf_cls = "ai.rewardfunction.{}RewardFunction"
        rf_base = jpype.JClass("ai.rewardfunction.RewardFunctionInterface")
        rfs = jpype.JArray(rf_base)([jpype.JClass(rf_cls.format(n))() for n in _JAVA_RFS])
        ai_array = jpype.JArray(jpype.JClass("ai.core.AI"))
        client_cls = jpype.JClass("tests.JNIGridnetSharedMemVecClient")
        height, width, cells = self.height, self.width, self.height * self.width

        def shared(shape: tuple[int, ...]) -> tuple[np.ndarray, Any]:
            arr = np.zeros(shape, np.int32)
            return arr, convertToDirectBuffer(arr).order(byte_order).asIntBuffer()

        for g in self.groups:
            rows = g.rows
            g.obs, obs_j = shared((rows, height, width, NUM_ENGINE_PLANES))
            g.mask, mask_j = shared((rows, cells, int(sum(ACTION_NVEC))))
            g.act, act_j = shared((rows, cells, len(ACTION_NVEC)))
            g.keep = [obs_j, mask_j, act_j]
            g.staged = np.zeros((rows, cells, NUM_ENGINE_PLANES), np.uint8)
            g.mask_bits = np.zeros((rows, cells, int(sum(ACTION_NVEC))), bool)
            bots = ai_array([bots_mod.make_bot(spec, utt) for spec in g.bot_specs])
            first_map = str(self.env_map[(g.sp_envs + g.bot_envs)[0]].path)
            try:
                g.client = client_cls(2 * len(g.sp_envs), len(g.bot_envs), _BIG_STEPS, rfs, "",
                                      first_map, bots, utt, self.options.partial_obs, obs_j,
                                      mask_j, act_j, 0)
            except jpype.JException as exc:
                raise GameError(f"microRTS engine failed to start on {first_map}: "
                                f"{exc.message()}") from exc
            g.players_j = jpype.JArray(jpype.JInt)([0, 1] * len(g.sp_envs)
                                                   + [g.learner] * len(g.bot_envs))
            if self.options.partial_obs:
                g.state, state_j = shared((rows, height, width, NUM_ENGINE_PLANES))
                g.keep.append(state_j)
                g.state_nd = nd_buffer(state_j, jpype.JArray(jpype.JInt)(
                    [rows, height, width, NUM_ENGINE_PLANES]))
        if len(self.map_infos) > 1:
            self._set_client_maps()

    def _set_client_maps(self) -> None:
        """Point each game at its own map (the Java client takes one map for all)."""
        import jpype

        fields = {}
        for kind, cls in (("selfplay", "tests.JNIGridnetSharedMemClientSelfPlay"),
                          ("bot", "tests.JNIGridnetSharedMemClient")):
            f = jpype.JClass(cls).class_.getDeclaredField("mapPath")
            f.setAccessible(True)
            fields[kind] = f
        for e in range(self.num_envs):
            gi, kind, k = self._env_slot[e]
            fields[kind].set(self._java_game(gi, kind, k), jpype.JString(str(self.env_map[e].path)))

    def _java_game(self, gi: int, kind: str, k: int) -> Any:
        client = self.groups[gi].client
        return client.selfPlayClients[k] if kind == "selfplay" else client.clients[k]

    def _game_state(self, e: int) -> Any:
        """The engine's full ``rts.GameState`` of env ``e``."""
        gi, kind, k = self._env_slot[e]
        game = self._java_game(gi, kind, k)
        if kind == "bot":
            return game.gs
        if self._sp_gs_field is None:
            import jpype

            f = jpype.JClass("tests.JNIGridnetSharedMemClientSelfPlay").class_.getDeclaredField(
                "gs")
            f.setAccessible(True)
            self._sp_gs_field = f
        return self._sp_gs_field.get(game)

    # ------------------------------------------------------------------ conversions

    def _plan(self, envs: np.ndarray) -> list[_Copy]:
        """Copy plans for the live seats of ``envs``: one per (group, rotation), with slices
        where the indices are arithmetic progressions (numpy then uses views, not gathers)."""
        seats = np.nonzero(self.alive[envs])
        env, seat = envs[seats[0]], seats[1]
        plans = []
        for gi in range(len(self.groups)):
            for rotated in (False, True):
                sel = (self._seat_group[env, seat] == gi) & (self._rotated[env, seat] == rotated)
                if not sel.any():
                    continue
                dst = env[sel] * self.num_seats + seat[sel]
                src = self._seat_row[env[sel], seat[sel]]
                plans.append(_Copy(gi, rotated, _as_slice(dst), _as_slice(src), int(sel.sum())))
        return plans

    def _convert_obs(self, plans: list[_Copy], out: np.ndarray, source: str = "obs") -> None:
        """Engine rows -> ``out`` ``[E, A, C, H, W]`` for ``plans``. With fog the observation is
        the unfogged board masked by the seat's sight: the engine's own fogged encoding is one
        cycle stale and leaves value-0 planes unset, so it is not used."""
        flat = out.reshape(out.shape[0] * out.shape[1], out.shape[2], -1)  # [E*A, C, HW]
        fogged = source == "obs" and self.options.partial_obs
        staged_groups = set()
        for c in plans:
            g = self.groups[c.group]
            buffer = g.state if fogged or source == "state" else g.obs
            assert buffer is not None
            if c.group not in staged_groups:  # one contiguous int32 -> uint8 pass per group
                np.copyto(g.staged, buffer.reshape(g.staged.shape), casting="unsafe")
                staged_groups.add(c.group)
            cells = g.staged[c.src]  # [K, HW, 27]
            visible = None
            if fogged:
                visible = self._visibility(buffer[c.src]).reshape(c.count, -1)  # [K, HW]
            if c.rotated:  # 180 degrees = reversed cell order
                cells = cells[:, ::-1]
                visible = visible[:, ::-1] if visible is not None else None
            planes = cells.transpose(0, 2, 1)  # [K, 27, HW]
            if visible is not None:
                planes = planes * visible[:, None]
                flat[c.dst, _VISIBLE] = visible
            if isinstance(c.dst, slice):
                np.copyto(flat[c.dst, :NUM_ENGINE_PLANES], planes)
            else:
                flat[c.dst, :NUM_ENGINE_PLANES] = planes

    def _visibility(self, state: np.ndarray) -> np.ndarray:
        """``bool [K, H, W]``: cells within sight of the seat's units, from unfogged
        ``state`` ``[K, H, W, 27]`` (the engine's rule: squared distance <= radius^2)."""
        k, y, x = np.nonzero(state[..., 11])  # own units, sorted by k
        visible = np.zeros(state.shape[:3], bool)
        if len(k) == 0:
            return visible
        radius = self._sight[state[k, y, x, 14:21].argmax(-1)]  # [U]
        dist2 = (y[:, None, None] - self._grid_y) ** 2 + (x[:, None, None] - self._grid_x) ** 2
        within = dist2 <= (radius ** 2)[:, None, None]  # [U, H, W]
        starts = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
        visible[k[starts]] = np.logical_or.reduceat(within, starts, axis=0)
        return visible

    def _convert_masks(self, out: np.ndarray) -> None:
        flat = out.reshape(-1, *out.shape[2:])  # [E*A, HW, 78]
        for g in self.groups:
            np.not_equal(g.mask, 0, out=g.mask_bits)
        for c in self._full_plan:
            bits = self.groups[c.group].mask_bits[c.src]  # [K, HW, 78]
            if c.rotated:
                bits = np.take(bits.reshape(c.count, -1), self._rot_mask_index, axis=1,
                               mode="clip").reshape(bits.shape)
            if isinstance(c.dst, slice):
                np.copyto(flat[c.dst], bits)
            else:
                flat[c.dst] = bits

    def _write_actions(self, actions: np.ndarray) -> None:
        flat = actions.reshape(-1, *actions.shape[2:])  # [E*A, HW, 7]
        for c in self._full_plan:
            act = self.groups[c.group].act
            src = flat[c.dst]
            if not c.rotated:
                act[c.src] = src
                continue
            rot = src[:, ::-1].astype(np.int32)
            rot[..., 1:5] = (rot[..., 1:5] + 2) % 4
            rot[..., 6] = ACTION_NVEC[6] - 1 - rot[..., 6]
            act[c.src] = rot

    def _fix_reset_obs(self, envs: np.ndarray) -> None:
        """After a reset the engine leaves empty cells all-zero; mark them empty as in play."""
        for e in envs:
            g = self.groups[self._env_group[e]]
            rows = self._seat_row[e][self.alive[e]]
            for buf in (g.state,) if self.options.partial_obs else (g.obs,):
                if buf is None:
                    continue
                view = buf[rows]  # [k, H, W, 27]
                empty = ~view.any(axis=-1)
                view[..., _EMPTY_CELL_PLANES] |= empty[..., None].astype(np.int32)
                buf[rows] = view

    def _read_state(self, envs: np.ndarray) -> None:
        """Unfogged observations into the groups' state buffers (partial_obs only)."""
        for e in envs:
            gs = self._game_state(int(e))
            g = self.groups[self._env_group[e]]
            for s in range(self.num_seats):
                if self.alive[e, s]:
                    gs.getBufferObservation(int(self.players[e, s]), int(self._seat_row[e, s]),
                                            g.state_nd)

    # ------------------------------------------------------------------ VecGame

    def reset(self, seed: int | None = None) -> Batch:
        """Start a new game in every env (``seed`` is recorded; the engine is deterministic)."""
        self._check_open()
        if seed is not None:
            self.seed = seed
        for g in self.groups:
            g.client.reset(g.players_j)
        envs = np.arange(self.num_envs)
        if self.options.partial_obs:
            self._read_state(envs)
        self._fix_reset_obs(envs)
        self._steps[:] = 0
        self._tracker = EpisodeTracker(self.num_envs, self.num_seats)
        self._component_sums[:] = 0
        self.last_reward_components[:] = 0
        self._episode_components = np.zeros((0, len(REWARD_COMPONENTS)))
        obs, state, mask = self._outputs()
        return Batch(obs, mask, state, np.zeros((self.num_envs, self.num_seats), np.float32),
                     np.zeros(self.num_envs, bool), np.zeros(self.num_envs, bool),
                     self.alive, EpisodeStats.empty(), None, None)

    def _outputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fresh obs/state/mask into the next pair of buffers (engine masks computed here)."""
        self._flip ^= 1
        obs = self._obs[self._flip]
        self._convert_obs(self._full_plan, obs)
        state = obs
        if self._state is not None:
            state = self._state[self._flip]
            self._convert_obs(self._full_plan, state, "state")
        for g in self.groups:
            g.client.getMasks(g.learner)
        mask = self._mask[self._flip]
        self._convert_masks(mask)
        return obs, state, mask

    def step(self, actions: np.ndarray) -> Batch:
        """One game cycle in every env; ``actions`` is ``int [E, A, H*W, 7]``."""
        self._check_open()
        expected = (self.num_envs, self.num_seats, self.height * self.width, len(ACTION_NVEC))
        if actions.shape != expected:
            raise GameError(f"microrts: actions must have shape {expected}, got {actions.shape}")
        self._write_actions(actions)
        num_envs, num_seats = self.num_envs, self.num_seats
        raw = np.zeros((num_envs * num_seats, len(REWARD_COMPONENTS)))  # [E*A, 6]
        terminated = np.zeros(num_envs, bool)
        for gi, g in enumerate(self.groups):
            response = g.client.gameStep(g.players_j)
            reward = np.asarray(response.reward)[:, _CANON_FROM_JAVA]  # [N, 6]
            done = np.asarray(response.done)[:, _JAVA_WINLOSS]  # [N]
            for c in self._full_plan:
                if c.group == gi:
                    raw[c.dst] = reward[c.src]
            mine = self._env_group == gi
            terminated[mine] = done[self._env_row0[mine]]
        components = raw.reshape(num_envs, num_seats, -1)  # [E, A, 6]
        self.last_reward_components = components
        reward = (components @ self._weights).astype(np.float32)  # [E, A]
        self._steps += 1
        truncated = (self._steps >= self.options.max_steps) & ~terminated
        finished = terminated | truncated
        if self.options.partial_obs:
            self._read_state(np.arange(num_envs))
        outcome = np.zeros((num_envs, num_seats), np.int8)
        final_obs = final_state = None
        if finished.any():
            envs = np.flatnonzero(finished)
            outcome[envs] = self._outcomes(envs, terminated)
            final_obs, final_state = self._final_observations(envs)
            for e in envs:  # the engine leaves finished games alone: reset them here
                gi, kind, k = self._env_slot[e]
                if kind == "selfplay":
                    self.groups[gi].client.selfPlayClients[k].reset()
                else:
                    self.groups[gi].client.clients[k].reset(self.groups[gi].learner)
            if self.options.partial_obs:
                self._read_state(envs)
            self._fix_reset_obs(envs)
            self._steps[envs] = 0
        self._component_sums += components
        episodes = self._tracker.update(reward, finished, outcome)
        if len(episodes.env):
            keep = self.alive[episodes.env, episodes.seat]
            episodes = EpisodeStats(*(x[keep] for x in episodes))
            self._episode_components = self._component_sums[episodes.env, episodes.seat].copy()
            self._component_sums[finished] = 0
        else:
            self._episode_components = np.zeros((0, len(REWARD_COMPONENTS)))
        obs, state, mask = self._outputs()
        return Batch(obs, mask, state, reward, terminated, truncated, self.alive, episodes,
                     final_obs, final_state)

    def _outcomes(self, envs: np.ndarray, terminated: np.ndarray) -> np.ndarray:
        """``int8 [len(envs), A]`` outcomes of finished envs (engine winner, or timeout)."""
        timeout = Outcome.DRAW if self.options.timeout_outcome == "draw" else Outcome.NONE
        out = np.full((len(envs), self.num_seats), timeout, np.int8)
        for i, e in enumerate(envs):
            if not terminated[e]:
                continue
            winner = int(self._game_state(int(e)).winner())
            for s in range(self.num_seats):
                if self.alive[e, s]:
                    out[i, s] = (Outcome.DRAW if winner < 0 else
                                 Outcome.WIN if winner == self.players[e, s] else Outcome.LOSS)
        return out

    def _final_observations(self, envs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The last observations of finished envs, read before the engine resets them."""
        self._final_flip ^= 1
        final_obs = self._final_obs[self._final_flip]
        plan = self._plan(envs)
        self._convert_obs(plan, final_obs)
        if self._final_state is None:
            return final_obs, final_obs
        final_state = self._final_state[self._final_flip]
        self._convert_obs(plan, final_state, "state")
        return final_obs, final_state

    def episode_reward_components(self) -> np.ndarray:
        """``float64 [K, 6]`` per-component returns of the seat-episodes in the last
        ``Batch.episodes`` (same order; columns as :data:`REWARD_COMPONENTS`)."""
        return self._episode_components

    def render(self, env_index: int = 0) -> np.ndarray:
        """An RGB frame ``uint8 [H*cell, W*cell, 3]`` of env ``env_index`` (player 0 blue)."""
        from games.microrts.render import draw_board

        self._check_open()
        if not 0 <= env_index < self.num_envs:
            raise GameError(f"microrts: env_index {env_index} out of range 0..{self.num_envs - 1}")
        e = env_index
        g = self.groups[self._env_group[e]]
        source = g.state if g.state is not None else g.obs
        raw = source[self._seat_row[e, 0]]  # [H, W, 27] seen by seat 0, never rotated
        return draw_board(raw, self.env_map[e].walls, int(self.players[e, 0]),
                          self.options.render_cell)

    def close(self) -> None:
        """Release the engine's games (the JVM itself lives until the process exits)."""
        if self._closed:
            return
        self._closed = True
        for g in self.groups:
            if g.client is not None:
                g.client.close()
                g.client = None

    def _check_open(self) -> None:
        if self._closed:
            raise GameError("microrts: this game was closed")

    def __enter__(self) -> MicroRTSVecGame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        num_sp = self.options.num_selfplay_envs
        bots = sorted({b for b in self.env_bot if b})
        return (f"MicroRTSVecGame({self.num_envs} envs: {num_sp} self-play, "
                f"{self.num_envs - num_sp} vs {', '.join(bots) or '-'}; "
                f"map {', '.join(m.name for m in self.map_infos)}; A={self.num_seats})")
