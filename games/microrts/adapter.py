"""microRTS as a :class:`~games.core.VecGame`: grid observations, per-cell actions, masks.

Engine: one ``tests.JNIGridnetSharedMemVecClient`` per *side group* (below), ``threads=0`` (the
thread pool corrupts rewards), stepping every game one cycle per ``step``. Observation, mask and
action arrays are direct buffers shared with Java and read/written by numpy without Java calls.

**Environments and seats.** Envs ``0..S-1`` are self-play games (``num_selfplay_envs``), the rest
play a scripted bot. ``A = 2`` seats when any self-play env exists, else ``A = 1``; a bot env's
second seat is then ``alive=False`` (zero obs, all-False mask, reward 0, ignored actions).
:attr:`MicroRTSVecGame.opponent_names` (``list[str]``, length ``E``) names each env's opponent:
the bot's canonical name (``"WorkerRush"``) or ``"selfplay"`` (:data:`SELFPLAY`), for logging
results per opponent. :meth:`~MicroRTSVecGame.set_bot` changes a bot env's bot from its next
game on; ``ended_opponent_names`` names the opponent of each env's last finished game, the one
its episode statistics belong to.

**Sides.** ``players[e, s]`` is the engine player (0 or 1, -1 for a dead seat) that seat ``s`` of
env ``e`` controls. With ``alternate_sides`` (default) seat 0 plays player ``e % 2`` in self-play
env ``e`` and player ``j % 2`` in bot env ``j`` (counting bot envs from 0), and the bot of bot env
``j`` is ``bots[(j // 2) % len(bots)]``, so every bot meets seat 0 on both sides. In self-play
games player 0's unit actions are issued before player 1's are read, so player 0 wins a cell
both claim; against a bot, both sides' orders are read first and two orders for one cell cancel
each other (the engine's default conflict rule). Sides matter. Without it, seat 0 is player 0.

**Observations** ``uint8 [E, A, 29, H, W]`` one-hot planes (:data:`OBS_PLANES`): hit points
(0..4+), carried/held resources (0..4+), owner (none/own/enemy: relative to the seat), unit type
(none, resource, base, barracks, worker, light, heavy, ranged), current action (none, move,
harvest, return, produce, attack), walls, visible (all ones without ``partial_obs``; with it, the
cells in sight of the seat's units, by the engine's rule; unseen cells have no other plane set).
The engine already writes ownership relative to each row's player, so a step's conversion is one
transposing byte copy per (group, seat pattern), with no recomputation.
With ``rotate_player1`` the board is also rotated 180 degrees for seats playing player 1 (so on
the point-symmetric shipped maps both sides see the same opening); actions and masks are rotated
back and forth to match (cell ``i`` <-> ``HW-1-i``, directions ``d`` <-> ``(d+2) % 4``, attack
offset ``k`` <-> ``48-k``), touching only the cells with units. Default off: unrotated
policies learn both sides anyway.

**Global state** ``[E, A, 29, H, W]`` for a centralized critic: the unfogged board from the seat's
perspective (visible plane all ones). With full observability it is the observation array
itself. Masks come from the full game state, as in the engine, even with ``partial_obs``.

**Actions** ``[E, A, H*W, 7]``: per cell (type, move dir, harvest dir, return dir, produce dir,
produce unit type, attack target in the 7x7 window). **Masks** ``bool [E, A, H*W, 78]``: the
components' legal values concatenated; a cell with no own unit ready to act is all False (and a
cell with one always allows type 0, no-op). Masks are per component, not conditional on each
other, and ignore cells and resources reserved by actions already under way: the engine silently
drops such actions, and those that lose a same-cycle conflict with another unit (an earlier
cell's of the same side, in the engine's cell order; the other side's, as under **Sides**).
Every other legal action is carried out (tested with all units of both sides acting at
random). :func:`random_legal_actions` samples uniformly random legal actions cheaply.

**Rewards**: the weighted sum (``reward_weights``) of the engine's six components
(:data:`REWARD_COMPONENTS`); the last step's raw components are in ``last_reward_components``
``[E, A, 6]`` and per-episode sums in :meth:`episode_reward_components`.

**Episodes** end when a side has no units left (``terminated``; WIN/LOSS from the engine's
winner, DRAW if both were wiped out in one cycle) or after ``max_steps`` (``truncated``; outcome
DRAW by default, as in microRTS tournaments, or NONE with ``timeout_outcome="none"``). Envs reset
themselves; ``final_obs``/``final_state`` hold the last observation of finished episodes.

**Seeds.** The engine and the scripted bots are deterministic (same actions, same game). With a
``seed``, :meth:`reset` reseeds the engine's static generators that bots share
(:func:`~games.microrts.bots.seed_engine`), and every game a bot env starts reseeds that bot's
own ``java.util.Random`` fields from ``(seed, env index in the whole layout, game number in that
env)`` (:func:`~games.microrts.bots.seed_bot`). Random bots such as RandomBiased then replay the
same games for the same seed, layout, worker count and actions; ``seed=None`` leaves Java's
clock-seeded generators alone. Bots with other randomness (a fresh ``Random`` inside a method,
a wall-clock budget) stay non-deterministic.

**Errors.** A Java exception inside the engine (an out-of-range action value, a map the engine
cannot load, a bot that crashes) surfaces as a :class:`~games.core.GameError` carrying the Java
class and message; the games are then in an unknown state, so ``step`` refuses to run until
``reset``.

Returned arrays are reused: ``obs``, ``action_mask``, ``state``, ``reward``, ``terminated``,
``truncated`` and ``final_*`` alternate between two buffers, so a :class:`~games.core.Batch`
stays valid until the second ``step`` after it; on steps where no episode ends, ``terminated``
and ``truncated`` are one shared all-False array (read-only). Treat them all as read-only.

**Cost.** The engine writes int32 0/1 buffers (one array of each kind for all the adapter's
Java clients) that are read in place. With numba installed (the ``microrts`` extra) a step
converts them with three compiled loops over the seat slots (:mod:`games.microrts.kernels`):
actions in; rewards out; the observation right after the engine step, while it is in the cache;
masks only at cells with an own unit, found in that observation. Without numba (or with
``compiled=False``) the same conversions are a fixed handful of numpy calls per step (one
transposing copy per group and seat pattern, a sparse mask gather); tests check that both give
identical batches. The engine's done flags are not read.
``tools/bench_microrts_adapter.py`` compares a step with a bare loop over the same Java clients
playing the same games.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from games.core import (
    Batch,
    EpisodeStats,
    GameError,
    GameSpec,
    MultiDiscrete,
    Outcome,
)
from games.microrts import bots as bots_mod
from games.microrts import engine, kernels
from games.microrts.maps import MapInfo, resolve_maps
from games.microrts.options import (
    ACTION_GATES,
    ACTION_NVEC,
    DEFAULT_REWARD_WEIGHTS,
    MASK_WIDTH,
    NUM_ENGINE_PLANES,
    OBS_PLANES,
    REWARD_COMPONENTS,
    SELFPLAY,
    EnvLayout,
    MicroRTSOptions,
    env_layout,
)
from games.microrts.plans import (
    LOW_BYTE,
    ROTATED_COLUMNS,
    CopyPlan,
    byte_view,
    rotate_actions,
)
from games.microrts.plans import runs as index_runs

__all__ = [  # the game's interface (options and layout re-exported from options.py)
    "ACTION_GATES", "ACTION_NVEC", "DEFAULT_REWARD_WEIGHTS", "MASK_WIDTH", "NUM_ENGINE_PLANES",
    "OBS_PLANES", "REWARD_COMPONENTS", "SELFPLAY", "EnvLayout", "MicroRTSOptions",
    "MicroRTSVecGame", "env_layout", "random_legal_actions",
]

# Java order puts ProduceWorker (never "done") first: the vector client resets a game by itself
# when component 0 says done, and we want to read the last observation before resetting.
_JAVA_RFS = ("ProduceWorker", "WinLoss", "ResourceGather", "ProduceBuilding", "Attack",
             "ProduceCombatUnit")
_CANON_FROM_JAVA = np.array([1, 2, 0, 3, 4, 5])  # canonical k = java[_CANON_FROM_JAVA[k]]
_JAVA_WINLOSS = 1

_WALL, _VISIBLE = 27, 28
_OWNER_OWN = 11
_EMPTY_CELL_PLANES = [0, 5, 10, 13, 21]  # what the engine writes for a cell without a unit
_ACTION_OFFSETS = tuple(int(x) for x in np.cumsum((0, *ACTION_NVEC)))  # 0, 6, ..., 29, 78
_NO_EPISODES = EpisodeStats.empty()  # shared: its arrays are empty
_BIG_STEPS = 2**31 - 1  # the engine's own step limit, never reached: we truncate in Python



# --------------------------------------------------------------------------- sampling


def random_legal_actions(mask: np.ndarray, rng: np.random.Generator,
                         out: np.ndarray | None = None) -> np.ndarray:
    """Uniformly random legal actions ``[..., HW, 7]`` for a microRTS mask ``[..., HW, 78]``
    (bool, or the engine's 0/1 ints), written into ``out`` when given.

    Only cells whose unit may act (mask column 0, no-op, is set) are drawn; each component is
    uniform among its legal values (0 when none is legal); other cells get all zeros. Much
    cheaper than :func:`games.core.random_actions`, which draws noise for every cell.
    """
    if out is None:
        out = np.zeros((*mask.shape[:-1], len(ACTION_NVEC)), np.int64)
    else:
        out.fill(0)
    rows = mask.reshape(-1, mask.shape[-1])  # [cells, 78]
    cells = np.flatnonzero(rows[:, 0])
    if len(cells):
        noise = rng.random((len(cells), rows.shape[1]))  # [K, 78]
        legal = rows[cells]
        noise *= legal if legal.dtype == bool else legal != 0  # illegal values score 0
        flat = out.reshape(-1, len(ACTION_NVEC))
        bounds = _ACTION_OFFSETS
        flat[cells] = np.stack([noise[:, a:b].argmax(1) for a, b in zip(bounds[:-1], bounds[1:],
                                                                        strict=True)], 1)
    return out


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
    planes: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint8))  # [N, HW, 27] view
    row_slot: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # -> e*A+s
    players_j: Any = None  # Java int[] of the agent's player per row
    keep: list[Any] = field(default_factory=list)  # Java buffers that must stay alive

    @property
    def rows(self) -> int:
        return 2 * len(self.sp_envs) + len(self.bot_envs)




class MicroRTSVecGame:
    """Batched microRTS (see the module docstring for every convention)."""

    opponent_names: list[str]
    """Each env's opponent, length ``E``: a bot's canonical name or ``"selfplay"``."""
    env_map: list[MapInfo]
    """Each env's map, length ``E`` (one of the options' ``maps``, or ``map``)."""
    ended_opponent_names: list[str]
    """The opponent of each env's last finished game (credit finished episodes to it)."""
    reward_component_names: tuple[str, ...] = REWARD_COMPONENTS
    """Columns of :meth:`episode_reward_components` (logged as ``reward/<name>``)."""

    def __init__(self, options: MicroRTSOptions, num_envs: int, seed: int | None = None,
                 name: str = "microrts", envs: tuple[int, int] | None = None,
                 compiled: bool | None = None) -> None:
        """``envs=(start, stop)`` builds only those envs of the ``num_envs``-env layout (a
        worker process's share, see :mod:`games.microrts.workers`). ``compiled`` picks the
        per-step conversions: numba kernels (:mod:`games.microrts.kernels`; the default when
        numba is installed) or numpy (the reference they are tested against)."""
        if compiled and not kernels.AVAILABLE:
            raise GameError("microrts: compiled=True needs numba (pip install numba)")
        self.compiled = kernels.AVAILABLE if compiled is None else compiled
        opts = options
        layout = env_layout(opts, num_envs)
        start, stop = envs if envs is not None else (0, num_envs)
        if not 0 <= start < stop <= num_envs:
            raise GameError(f"microrts: env range {start}..{stop} outside 0..{num_envs}")
        num_envs = stop - start
        self.options = opts
        self.seed = seed
        self._first_env = start  # env e here is env start + e of the layout (bot seeds)
        self._games_started = np.zeros(num_envs, np.int64)  # per env, for bot seeds
        self._pending_bots: dict[int, tuple[str, Any]] = {}  # env -> (name, Java bot), set_bot
        self.map_infos: list[MapInfo] = resolve_maps(opts.maps or [opts.map])
        self.height, self.width = self.map_infos[0].shape
        height, width, cells = self.height, self.width, self.height * self.width
        num_seats = layout.players.shape[1]
        self.num_envs, self.num_seats = num_envs, num_seats

        # --- who plays what where
        self.env_map = [self.map_infos[k] for k in layout.maps[start:stop]]
        self.players = layout.players[start:stop].copy()  # [E, A]
        self.env_bot: list[str | None] = [
            spec.name if spec is not None else None for spec in layout.bots[start:stop]]
        groups = [_Group(0, [], [], []), _Group(1, [], [], [])]
        for e, spec in enumerate(layout.bots[start:stop]):
            if spec is None:
                groups[0].sp_envs.append(e)
            else:
                side = int(self.players[e, 0])
                groups[side].bot_envs.append(e)
                groups[side].bot_specs.append(spec)
        self.opponent_names = [b if b is not None else SELFPLAY for b in self.env_bot]
        # the opponent of each env's last finished game: what its episode statistics are
        # credited to (a set_bot takes over opponent_names as the next game starts, before
        # the step reporting the end returns)
        self.ended_opponent_names = list(self.opponent_names)
        self._num_sp = self.env_bot.count(None)  # self-play games: envs 0.._num_sp-1 here
        self.groups = [g for g in groups if g.rows]
        self.alive = self.players >= 0  # [E, A]
        self.alive.setflags(write=False)

        # --- per seat: group, engine row, rotation
        env_group = np.zeros(num_envs, np.int64)
        self._env_slot: list[tuple[int, str, int]] = [(0, "", 0)] * num_envs
        seat_group = np.zeros((num_envs, num_seats), np.int64)
        seat_row = np.zeros((num_envs, num_seats), np.int64)
        for gi, g in enumerate(self.groups):
            for i, e in enumerate(g.sp_envs):
                env_group[e] = gi
                self._env_slot[e] = (gi, "selfplay", i)
                seat_group[e] = gi
                seat_row[e] = 2 * i + self.players[e]
            for j, e in enumerate(g.bot_envs):
                row = 2 * len(g.sp_envs) + j
                env_group[e] = gi
                self._env_slot[e] = (gi, "bot", j)
                seat_group[e, 0], seat_row[e, 0] = gi, row
        self._env_group = env_group
        self._seat_group, self._seat_row = seat_group, seat_row
        self._rotated = (self.players == 1) & opts.rotate_player1  # [E, A]
        self._full_plan = self._plan(np.arange(num_envs),
                                     pairs=not (opts.rotate_player1 or opts.partial_obs))
        self._env_plans = [self._plan(np.array([e])) for e in range(num_envs)]

        # --- spaces, buffers
        self.spec = GameSpec(
            name=name, num_envs=num_envs, num_seats=num_seats,
            obs_shape=(len(OBS_PLANES), height, width), obs_dtype=np.dtype(np.uint8),
            action_space=MultiDiscrete(ACTION_NVEC, grid=(height, width), gates=ACTION_GATES),
            state_shape=(len(OBS_PLANES), height, width), state_dtype=np.dtype(np.uint8),
            state_is_obs=not opts.partial_obs,
            obs_kind="grid", zero_sum=not any(opts.reward_weights[1:]), render_fps=30)
        self._action_shape = (num_envs, num_seats, cells, len(ACTION_NVEC))
        # reward weights in the engine's component order (rewards are read in that order)
        self._weights = np.zeros(len(REWARD_COMPONENTS))
        self._weights[_CANON_FROM_JAVA] = opts.reward_weights
        shape = (num_envs, num_seats, len(OBS_PLANES), height, width)
        self._obs = [np.zeros(shape, np.uint8) for _ in range(2)]
        self._final_obs = [np.zeros(shape, np.uint8) for _ in range(2)]
        self._state = [np.zeros(shape, np.uint8) for _ in range(2)] if opts.partial_obs else None
        self._final_state = ([np.zeros(shape, np.uint8) for _ in range(2)]
                             if opts.partial_obs else None)
        self._mask = [np.zeros((num_envs, num_seats, cells, MASK_WIDTH), bool) for _ in range(2)]
        self._reward = [np.zeros((num_envs, num_seats), np.float32) for _ in range(2)]
        self._reward64 = np.zeros(num_envs * num_seats)  # [E*A]
        self._terminated = [np.zeros(num_envs, bool) for _ in range(2)]
        self._truncated = [np.zeros(num_envs, bool) for _ in range(2)]
        self._all_false = np.zeros(num_envs, bool)  # terminated/truncated of most steps
        self._all_false.setflags(write=False)
        self._raw = np.zeros((num_envs * num_seats, len(REWARD_COMPONENTS)))  # [E*A, 6] Java order
        self._raw_winloss = self._raw.reshape(num_envs, num_seats, -1)[:, 0, _JAVA_WINLOSS]  # [E]
        self._flip = self._final_flip = 0
        self._final_flip_of = np.full(num_envs, -1, np.int64)  # [E] final buffer of the last end
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

        # --- episode bookkeeping: env e's episode started at step self._start[e] of self._t
        self._t = 0
        self._start = np.zeros(num_envs, np.int64)
        self._next_truncation = opts.max_steps  # min(self._start) + max_steps
        self._component_sums = np.zeros_like(self._raw)  # [E*A, 6] Java order
        self._episode_components = np.zeros((0, len(REWARD_COMPONENTS)))
        self._sp_gs_field: Any = None
        self._failed: str | None = None  # a Java exception left the games in an unknown state
        self._closed = False
        self._java_exception: type[BaseException] = Exception
        self._start_engine()
        self._static_copies()

    # ------------------------------------------------------------------ engine set-up

    def _start_engine(self) -> None:
        engine.start_jvm()
        import jpype
        from jpype.nio import convertToDirectBuffer

        self._java_exception = jpype.JException
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

        def shared(shape: tuple[int, ...], arr: np.ndarray | None = None
                   ) -> tuple[np.ndarray, Any]:
            arr = np.zeros(shape, np.int32) if arr is None else arr
            return arr, convertToDirectBuffer(arr).order(byte_order).asIntBuffer()

        # one array of each kind for all groups (each client gets its rows), so that a step's
        # conversion scans each once
        total = sum(g.rows for g in self.groups)
        self._engine_obs = np.zeros((total, height, width, NUM_ENGINE_PLANES), np.int32)
        self._engine_masks = np.zeros((total, cells, MASK_WIDTH), np.int32)  # [R, HW, 78]
        self._engine_act = np.zeros((total, cells, len(ACTION_NVEC)), np.int32)  # [R, HW, 7]
        self._engine_state = (np.zeros_like(self._engine_obs) if self.options.partial_obs
                              else None)
        first_row = 0
        for g in self.groups:
            rows = slice(first_row, first_row + g.rows)
            first_row += g.rows
            g.obs, obs_j = shared((), self._engine_obs[rows])
            g.mask, mask_j = shared((), self._engine_masks[rows])
            g.act, act_j = shared((), self._engine_act[rows])
            g.keep = [obs_j, mask_j, act_j]
            bots = ai_array([bots_mod.make_bot(spec, utt) for spec in g.bot_specs])
            first_map = str(self.env_map[(g.sp_envs + g.bot_envs)[0]].path)
            try:
                g.client = client_cls(2 * len(g.sp_envs), len(g.bot_envs), _BIG_STEPS, rfs, "",
                                      first_map, bots, utt, self.options.partial_obs, obs_j,
                                      mask_j, act_j, 0)
            except jpype.JException as exc:
                raise GameError(f"microRTS engine failed to start on {first_map}: "
                                f"{engine.java_error_message(exc)}") from exc
            g.players_j = jpype.JArray(jpype.JInt)([0, 1] * len(g.sp_envs)
                                                   + [g.learner] * len(g.bot_envs))
            if self._engine_state is not None:
                g.state, state_j = shared((), self._engine_state[rows])
                g.keep.append(state_j)
                g.state_nd = nd_buffer(state_j, jpype.JArray(jpype.JInt)(
                    [g.rows, height, width, NUM_ENGINE_PLANES]))
            g.planes = byte_view(g.state if g.state is not None else g.obs)
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

    def _reset_env(self, e: int) -> None:
        """A new game in env ``e`` (Java; the engine leaves finished games alone)."""
        gi, kind, k = self._env_slot[e]
        if kind == "selfplay":
            self.groups[gi].client.selfPlayClients[k].reset()
        else:
            self.groups[gi].client.clients[k].reset(self.groups[gi].learner)

    def _seed_bots(self, envs: np.ndarray) -> None:
        """Seed the bots of the games just started in ``envs`` (nothing without a seed)."""
        if self.seed is None:
            return
        for e in envs.tolist():
            gi, kind, k = self._env_slot[e]
            if kind == "bot":
                entropy = (self.seed, self._first_env + e, int(self._games_started[e]))
                seed = int(np.random.SeedSequence(entropy).generate_state(1)[0])
                bots_mod.seed_bot(self.groups[gi].client.clients[k].ai2, seed)
        self._games_started[envs] += 1

    def _new_games(self, envs: np.ndarray) -> None:
        """New games in ``envs`` (Java), their unfogged state and reset-board fix-up."""
        e = -1
        self._install_pending_bots(envs)
        try:
            for e in envs.tolist():
                self._reset_env(e)
            self._seed_bots(envs)
            if self.options.partial_obs:
                self._read_state(envs)
        except self._java_exception as exc:
            raise self._engine_failed(f"the reset of {self._describe_env(e)}", exc) from exc
        self._fix_reset_obs(envs)

    def _describe_env(self, e: int) -> str:
        if e < 0:
            return "an env"
        return f"env {e} (map {self.env_map[e].path}, opponent {self.opponent_names[e]})"

    def _failing_reset(self) -> str:
        """After a failed batch reset: reset the envs one by one to name the first that fails."""
        for e in range(self.num_envs):
            try:
                self._reset_env(e)
            except self._java_exception:
                return f"the reset of {self._describe_env(e)}"
        return "reset"

    def _engine_failed(self, where: str, exc: BaseException) -> GameError:
        """Record that a Java exception left the games in an unknown state; the error."""
        message = engine.java_error_message(exc)
        self._failed = message
        return GameError(f"microRTS engine error during {where}: {message}")

    # ------------------------------------------------------------------ conversions

    def _plan(self, envs: np.ndarray, pairs: bool = False) -> list[CopyPlan]:
        """Copy plans for the live seats of ``envs``: runs of seats whose slots and engine rows
        are both arithmetic progressions, found per (group, rotation, kind, seat, side) class
        (alternating sides make the row order a permutation of the slot order). With ``pairs``
        (no rotation), self-play envs move both seats per copy: at most two plans for them."""
        plans = []
        num_sp = self._num_sp
        if pairs and num_sp and len(envs) == self.num_envs:
            games = len(self.groups[0].sp_envs)  # self-play games are envs 0..S-1 of group 0
            step = 2 if self.options.alternate_sides else 1
            for first in range(min(step, num_sp)):
                count = len(range(first, num_sp, step))
                plans.append(CopyPlan(0, False, slice(first, num_sp, step),
                                   slice(first, num_sp, step), count, pairs=True,
                                   swapped=bool(self.players[first, 0] == 1), games=games))
            envs = envs[envs >= num_sp]
        seats = np.nonzero(self.alive[envs])
        env, seat = envs[seats[0]], seats[1]
        group = self._seat_group[env, seat]
        rotated = self._rotated[env, seat]
        selfplay = env < num_sp
        side = self.players[env, seat]
        dst = env * self.num_seats + seat
        src = self._seat_row[env, seat]
        keys = np.stack([group, rotated, selfplay, seat, side], 1)
        for key in np.unique(keys, axis=0):
            sel = (keys == key).all(1)
            for d, s, count in index_runs(dst[sel], src[sel]):
                plans.append(CopyPlan(int(key[0]), bool(key[1]), d, s, count))
        return plans

    def _convert_obs(self, plans: list[CopyPlan], out: np.ndarray, source: str = "obs") -> None:
        """Engine rows -> ``out`` ``[E, A, C, H, W]`` for ``plans``: one transposing copy of the
        int32 buffers' low bytes per plan. With fog the observation is the unfogged board masked
        by the seat's sight: the engine's own fogged encoding is one cycle stale and leaves
        value-0 planes unset, so it is not used."""
        flat = out.reshape(out.shape[0] * out.shape[1], out.shape[2], -1)  # [E*A, C, HW]
        fogged = source == "obs" and self.options.partial_obs
        for c in plans:
            g = self.groups[c.group]
            cells = c.src_view(g.planes)  # [K, HW, 27] (or [K, 2, HW, 27]) uint8 view
            if c.rotated:  # 180 degrees = reversed cell order
                cells = cells[:, ::-1]
            planes = cells.swapaxes(-1, -2)  # [K, 27, HW]
            dst = c.dst_view(flat)  # [K, C, HW]
            if fogged:  # never a pairs plan
                assert g.state is not None
                visible = self._visibility(g.state[c.src]).reshape(c.count, -1)  # [K, HW]
                if c.rotated:
                    visible = visible[:, ::-1]
                planes = planes * visible[:, None]
                dst[:, _VISIBLE] = visible
            np.copyto(dst[..., :NUM_ENGINE_PLANES, :], planes)

    def _static_copies(self) -> None:
        """Views of the fixed buffers for the per-step conversions (made once: a step then
        costs one numpy call per plan and array)."""
        self._obs_copies: list[list[tuple[np.ndarray, np.ndarray]]] = []
        for flip in range(2):
            flat = self._obs[flip].reshape(self.num_envs * self.num_seats,
                                           len(OBS_PLANES), -1)  # [E*A, C, HW]
            self._obs_copies.append([
                (c.dst_view(flat)[..., :NUM_ENGINE_PLANES, :],
                 (c.src_view(self.groups[c.group].planes)[:, ::-1] if c.rotated
                  else c.src_view(self.groups[c.group].planes)).swapaxes(-1, -2))
                for c in self._full_plan])
        self._act_copies = [(c, c.src_view(self.groups[c.group].act)) for c in self._full_plan]
        # output mask row (e * A + s) * HW + cell -> engine mask row (group's first row + row)
        # * HW + cell' (cell' = HW - 1 - cell where the seat sees the board rotated), and the
        # engine rows -> seat slots of each group's rewards
        cells = self.height * self.width
        cell = np.arange(cells)
        slots = self.num_envs * self.num_seats
        self._mask_src = np.full(slots * cells, -1, np.int64)
        turn = np.zeros(slots * cells, bool)
        self._slot_row = np.full(slots, -1, np.int64)  # seat slot -> row of the engine arrays
        self._slot_rot = self._rotated.reshape(-1).copy()  # [E*A]
        first_row = 0
        for gi, g in enumerate(self.groups):
            g.row_slot = np.zeros(g.rows, np.int64)  # engine row -> flat seat slot e * A + s
            for e, s in np.argwhere(self.alive & (self._seat_group == gi)):
                slot = e * self.num_seats + s
                g.row_slot[self._seat_row[e, s]] = slot
                self._slot_row[slot] = first_row + self._seat_row[e, s]
                src_cell = cells - 1 - cell if self._rotated[e, s] else cell
                dst = slice(slot * cells, (slot + 1) * cells)
                self._mask_src[dst] = (first_row + self._seat_row[e, s]) * cells + src_cell
                turn[dst] = self._rotated[e, s]
            first_row += g.rows
        self._mask_turn = turn if turn.any() else None
        self._mask_rows = [np.zeros(0, np.int64) for _ in range(2)]  # rows set, per buffer
        # for the compiled conversions: the same buffers by seat slot, and which mask rows
        # each mask buffer holds
        self._obs_slots = [o.reshape(slots, len(OBS_PLANES), cells) for o in self._obs]
        self._mask_slots = [m.reshape(slots, cells, MASK_WIDTH) for m in self._mask]
        self._mask_set = [np.zeros((slots, cells), bool) for _ in range(2)]
        self._reward_slots = [r.reshape(slots) for r in self._reward]
        self._slot_action_shape = (slots, cells, len(ACTION_NVEC))
        self._engine_planes = self._engine_obs.reshape(-1, cells, NUM_ENGINE_PLANES)
        # the engine's 0/1 int32 mask rows as bytes: [all rows * HW, 78] uint8 view
        self._engine_mask_bytes = self._engine_masks.view(np.uint8).reshape(
            -1, MASK_WIDTH, 4)[..., LOW_BYTE]

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

    def _convert_masks(self, flip: int) -> None:
        """Engine masks (int32 0/1) -> the bool mask buffer ``flip``, sparsely. Only cells with
        an own unit (in the observation just converted) can have a mask, so only their engine
        rows are gathered (rows of units busy with an action are all zero), rotated for seats
        that see the board rotated, and scattered into the buffer after clearing the rows it
        held."""
        cells = np.flatnonzero(self._obs[flip][:, :, _OWNER_OWN])  # (e * A + s) * HW + cell
        rows = self._engine_mask_bytes[self._mask_src[cells]].view(bool)  # [U, 78]
        if self._mask_turn is not None:
            turn = self._mask_turn[cells]
            rows[turn] = rows[turn][:, ROTATED_COLUMNS]
        out = self._mask[flip].reshape(-1, MASK_WIDTH)  # [E*A*HW, 78]
        out[self._mask_rows[flip]] = False
        out[cells] = rows
        self._mask_rows[flip] = cells

    def _write_actions(self, actions: np.ndarray) -> None:
        flat = actions.reshape(self._slot_action_shape)  # [E*A, HW, 7]
        if self.compiled:
            kernels.write_actions(flat, self._slot_row, self._slot_rot,
                                  self._mask_set[self._flip], self._engine_act)
            return
        for c, engine_view in self._act_copies:  # [K, (2,) HW, 7] int32 views
            if c.rotated:
                rotate_actions(c.dst_view(flat), engine_view)
            else:
                np.copyto(engine_view, c.dst_view(flat))

    def _fix_reset_obs(self, envs: np.ndarray) -> None:
        """After a reset the engine leaves empty cells all-zero; mark them empty as in play."""
        for gi, g in enumerate(self.groups):
            mine = envs[self._env_group[envs] == gi]
            if not len(mine):
                continue
            rows = self._seat_row[mine][self.alive[mine]]  # engine rows of their live seats
            buf = g.state if g.state is not None else g.obs
            view = buf[rows]  # [k, H, W, 27]
            empty = ~view.any(axis=-1)
            view[..., _EMPTY_CELL_PLANES] |= empty[..., None]
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

    @property
    def last_reward_components(self) -> np.ndarray:
        """``float64 [E, A, 6]`` raw reward components of the last step (a copy; columns as
        :data:`REWARD_COMPONENTS`)."""
        return self._raw[:, _CANON_FROM_JAVA].reshape(self.num_envs, self.num_seats, -1)

    def reset(self, seed: int | None = None) -> Batch:
        """Start a new game in every env (a ``seed`` replaces the bots' seed and restarts their
        game numbering, see the module docstring). Also the way out after an engine error."""
        if self._closed:
            self._check_open()
        if seed is not None:
            self.seed = seed
            self._games_started[:] = 0
        envs = np.arange(self.num_envs)
        if self.seed is not None:
            entropy = (self.seed, self._first_env, self.num_envs)
            bots_mod.seed_engine(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
        self._install_pending_bots(envs)
        try:
            for g in self.groups:
                g.client.reset(g.players_j)
            self._seed_bots(envs)
            if self.options.partial_obs:
                self._read_state(envs)
        except self._java_exception as exc:
            raise self._engine_failed(self._failing_reset(), exc) from exc
        self._failed = None
        self._fix_reset_obs(envs)
        self._t = 0
        self._start[:] = 0
        self._next_truncation = self.options.max_steps
        self._component_sums[:] = 0
        self._raw[:] = 0
        self._final_flip_of[:] = -1  # render_final: no game of these has finished yet
        return self._fresh_batch()

    def _fresh_batch(self) -> Batch:
        """The batch after new games began: no rewards, ends or episode statistics."""
        self._episode_components = np.zeros((0, len(REWARD_COMPONENTS)))
        self._flip ^= 1
        obs, state, mask = self._outputs(self._flip)
        reward = self._reward[self._flip]
        reward[:] = 0
        return Batch(obs, mask, state, reward, self._all_false, self._all_false, self.alive,
                     EpisodeStats.empty(), None, None)

    def restart(self, envs: np.ndarray | list[int]) -> Batch:
        """Abandon the games of ``envs`` and start new ones there (a tournament handing an env
        its next match). The abandoned games report no statistics; other envs are untouched
        (their observations are those of the last batch)."""
        self._check_open()
        envs = np.unique(np.asarray(envs, np.int64))
        if len(envs) and not (0 <= envs[0] and envs[-1] < self.num_envs):
            raise GameError(f"microrts: env indices must be in 0..{self.num_envs - 1}")
        self._new_games(envs)
        rows = (envs[:, None] * self.num_seats + np.arange(self.num_seats)).ravel()
        self._component_sums[rows] = 0.0
        self._start[envs] = self._t
        self._next_truncation = int(self._start.min()) + self.options.max_steps
        return self._fresh_batch()

    def set_bot(self, env: int, bot: str) -> str:
        """Make ``bot`` the engine opponent of bot env ``env`` from its next game on (call
        :meth:`restart` to start that game now); returns the bot's canonical name. The game
        in progress goes on against its bot, and is reported against it."""
        self._check_open()
        gi, kind, k = self._env_slot[env]
        if kind != "bot":
            raise GameError(f"microrts: env {env} is a self-play game; it has no engine bot")
        spec = bots_mod.resolve_bot(bot)
        self._pending_bots[env] = (spec.name, bots_mod.make_bot(spec, self._utt))
        return spec.name

    def _install_pending_bots(self, envs: np.ndarray) -> None:
        """Hand ``envs`` about to start a game the bots :meth:`set_bot` chose for them."""
        for e in envs.tolist():
            pending = self._pending_bots.pop(e, None)
            if pending is not None:
                gi, _, k = self._env_slot[e]
                self.groups[gi].client.clients[k].ai2 = pending[1]
                self.env_bot[e] = pending[0]
                self.opponent_names[e] = pending[0]

    def _outputs(self, flip: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Fresh obs/state/mask into buffer set ``flip`` (engine masks computed here)."""
        obs = self._obs[flip]
        if self.options.partial_obs:
            self._convert_obs(self._full_plan, obs)
        elif self.compiled:
            kernels.read_observations(self._engine_planes, self._slot_row, self._slot_rot,
                                      self._obs_slots[flip])
        else:
            for dst, src in self._obs_copies[flip]:
                np.copyto(dst, src)
        state = obs
        if self._state is not None:
            state = self._state[flip]
            self._convert_obs(self._full_plan, state, "state")
        try:
            for g in self.groups:
                g.client.getMasks(g.learner)
        except self._java_exception as exc:
            raise self._engine_failed("getMasks", exc) from exc
        if self.compiled:
            kernels.read_masks(self._engine_masks, self._slot_row, self._slot_rot,
                               ROTATED_COLUMNS, self._obs_slots[flip][:, _OWNER_OWN],
                               self._mask_slots[flip], self._mask_set[flip])
        else:
            self._convert_masks(flip)
        return obs, state, self._mask[flip]

    def step(self, actions: np.ndarray) -> Batch:
        """One game cycle in every env; ``actions`` is ``int [E, A, H*W, 7]``."""
        if self._closed or self._failed is not None:
            self._check_open()
        if actions.shape != self._action_shape or actions.dtype.kind not in "iu":
            raise GameError(f"microrts: actions must be integers of shape {self._action_shape}, "
                            f"got {actions.dtype} {actions.shape}")
        self._write_actions(actions)
        self._flip ^= 1
        flip = self._flip
        raw = self._raw  # [E*A, 6] Java order; dead seats stay 0
        terminated = self._terminated[flip]  # [E]
        reward = self._reward[flip]  # [E, A] float32
        over = False
        try:
            for g in self.groups:
                rewards = np.asarray(g.client.gameStep(g.players_j).reward)  # [N, 6] Java order
                if self.compiled:
                    over |= kernels.read_rewards(rewards, g.row_slot, self._weights, raw,
                                                 self._reward_slots[flip], self._component_sums)
                else:
                    raw[g.row_slot] = rewards
            if self.options.partial_obs:
                self._read_state(np.arange(self.num_envs))
        except self._java_exception as exc:
            raise self._engine_failed("step", exc) from exc
        if not self.compiled:
            over = bool(self._raw_winloss.any())
            np.dot(raw, self._weights, out=self._reward64)
            np.copyto(reward.reshape(-1), self._reward64, casting="same_kind")
            self._component_sums += raw
        # the win/loss component is +-1 exactly when the game is over (-1 for both players of
        # a draw), so the engine's done flags need not be read; seat 0 is always alive
        if over:
            np.not_equal(self._raw_winloss, 0, out=terminated)
        else:
            terminated = self._all_false
        self._t += 1
        truncated = self._all_false
        if self._t >= self._next_truncation:
            truncated = self._truncated[flip]
            np.greater_equal(self._t - self._start, self.options.max_steps, out=truncated)
            truncated &= ~terminated
        final_obs = final_state = None
        if truncated is not self._all_false or terminated is not self._all_false:
            episodes, final_obs, final_state = self._finish(terminated, truncated)
        elif len(self._episode_components):
            self._episode_components = np.zeros((0, len(REWARD_COMPONENTS)))
            episodes = _NO_EPISODES
        else:
            episodes = _NO_EPISODES
        obs, state, mask = self._outputs(flip)
        return Batch(obs, mask, state, reward, terminated, truncated, self.alive, episodes,
                     final_obs, final_state)

    def _finish(self, terminated: np.ndarray, truncated: np.ndarray
                ) -> tuple[EpisodeStats, np.ndarray | None, np.ndarray | None]:
        """Statistics and last observations of the episodes that ended this step; then the
        engine's reset of those games (it leaves finished games alone)."""
        envs = np.flatnonzero(terminated | truncated)
        if len(envs) == 0:
            self._episode_components = np.zeros((0, len(REWARD_COMPONENTS)))
            return _NO_EPISODES, None, None
        num_seats = self.num_seats
        outcome = self._outcomes(envs, terminated)  # [K, A]
        final_obs, final_state = self._final_observations(envs)
        for e in envs.tolist():
            self.ended_opponent_names[e] = self.opponent_names[e]
        self._new_games(envs)
        live = self.alive[envs]  # [K, A]
        env_idx = np.repeat(envs, num_seats)[live.ravel()]
        seat_idx = np.tile(np.arange(num_seats), len(envs))[live.ravel()]
        rows = env_idx * num_seats + seat_idx
        sums = self._component_sums[rows]  # [K, 6] Java order
        episodes = EpisodeStats(env_idx, seat_idx, sums @ self._weights,
                                self._t - self._start[env_idx], outcome[live])
        self._episode_components = sums[:, _CANON_FROM_JAVA]
        self._component_sums[rows] = 0.0
        self._start[envs] = self._t
        self._next_truncation = int(self._start.min()) + self.options.max_steps
        return episodes, final_obs, final_state

    def _outcomes(self, envs: np.ndarray, terminated: np.ndarray) -> np.ndarray:
        """``int8 [len(envs), A]`` outcomes of finished envs: the engine's winner, or the
        timeout outcome. A +1 win/loss reward names the winner; only when every live seat got
        -1 (a loss to a bot, or a draw) is the engine asked."""
        timeout = Outcome.DRAW if self.options.timeout_outcome == "draw" else Outcome.NONE
        out = np.full((len(envs), self.num_seats), timeout, np.int8)
        win_loss = self._raw.reshape(self.num_envs, self.num_seats, -1)[envs, :, _JAVA_WINLOSS]
        for i, e in enumerate(envs):
            if not terminated[e]:
                continue
            live = self.alive[e]
            if (win_loss[i] > 0).any():
                out[i, live] = np.where(win_loss[i, live] > 0, Outcome.WIN, Outcome.LOSS)
                continue
            winner = int(self._game_state(int(e)).winner())
            for s in np.flatnonzero(live):
                out[i, s] = (Outcome.DRAW if winner < 0 else
                             Outcome.WIN if winner == self.players[e, s] else Outcome.LOSS)
        return out

    def _final_observations(self, envs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The last observations of finished envs, read before the engine resets them."""
        self._final_flip ^= 1
        self._final_flip_of[envs] = self._final_flip  # only these rows of that buffer change
        final_obs = self._final_obs[self._final_flip]
        plan = [c for e in envs for c in self._env_plans[e]]
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

    def render_final(self, env_index: int = 0) -> np.ndarray:
        """The last position of env ``env_index``'s latest finished game, drawn as
        :meth:`render` (the current position if none has finished yet): ``render`` after the
        step that ends a game already shows the next game's start."""
        from games.microrts.render import draw_board

        self._check_open()
        if not 0 <= env_index < self.num_envs:
            raise GameError(f"microrts: env_index {env_index} out of range 0..{self.num_envs - 1}")
        e = env_index
        flip = int(self._final_flip_of[e])
        if flip < 0:
            return self.render(e)
        finals = self._final_state if self._final_state is not None else self._final_obs
        planes = finals[flip][e, 0]  # [29, H, W] unfogged, seen by seat 0
        if self._rotated[e, 0]:
            planes = planes[:, ::-1, ::-1]
        return draw_board(planes.transpose(1, 2, 0), self.env_map[e].walls,
                          int(self.players[e, 0]), self.options.render_cell)

    def close(self) -> None:
        """Release the engine's games (the JVM itself lives until the process exits)."""
        if self._closed:
            return
        self._closed = True
        for g in self.groups:
            if g.client is not None:
                try:
                    g.client.close()
                except self._java_exception:
                    pass  # closing after an engine failure: nothing more to release
                g.client = None

    def _check_open(self) -> None:
        if self._closed:
            raise GameError("microrts: this game was closed")
        if self._failed is not None:
            raise GameError(f"microrts: the engine failed ({self._failed}); call reset() to "
                            "start new games")

    def __enter__(self) -> MicroRTSVecGame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        num_sp = self._num_sp
        bots = sorted({b for b in self.env_bot if b})
        return (f"MicroRTSVecGame({self.num_envs} envs: {num_sp} self-play, "
                f"{self.num_envs - num_sp} vs {', '.join(bots) or '-'}; "
                f"map {', '.join(m.name for m in self.map_infos)}; A={self.num_seats})")
