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

**Observations** ``uint8 [E, A, 30, H, W]`` one-hot planes (:data:`OBS_PLANES`): hit points
(0..4+), carried/held resources (0..4+), owner (none/own/enemy: relative to the seat), unit type
(none, resource, base, barracks, worker, light, heavy, ranged), current action (none, move,
harvest, return, produce, attack), walls, visible (all ones without ``partial_obs``; with it, the
cells in sight of the seat's units, by the engine's rule; unseen cells have no other plane set),
off_map (:data:`PAD_PLANE`: all zeros here; 1 on the padding cells of a smaller map in a
mixed-size batch, :mod:`games.microrts.mixed_sizes`).
The engine already writes ownership relative to each row's player, so a step's conversion is one
transposing byte copy per (group, seat pattern), with no recomputation.
With ``rotate_player1`` the board is also rotated 180 degrees for seats playing player 1 (so on
the point-symmetric shipped maps both sides see the same opening); actions and masks are rotated
back and forth to match (cell ``i`` <-> ``HW-1-i``, directions ``d`` <-> ``(d+2) % 4``, attack
offset ``k`` <-> ``48-k``), touching only the cells with units. Default off: unrotated
policies learn both sides anyway.

**Global state** ``[E, A, 30, H, W]`` for a centralized critic: the unfogged board from the seat's
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

**Code.** This module is the batched interface; the Java clients and the buffers they share
are in :mod:`games.microrts.engine_groups`, the per-step conversions in
:mod:`games.microrts.conversions`, rewards, ends and outcomes in :mod:`games.microrts.episodes`,
and the bots' swaps and seeds in :mod:`games.microrts.opponents`.
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np

from games.core import (
    Batch,
    EpisodeStats,
    GameError,
    GameSpec,
    MultiDiscrete,
)
from games.microrts import bots as bots_mod
from games.microrts import engine, jvm_signals, kernels
from games.microrts.conversions import Conversions, first_out_of_range
from games.microrts.engine_groups import JAVA_WINLOSS as _JAVA_WINLOSS  # noqa: F401 (bench tool)
from games.microrts.engine_groups import EngineGroups
from games.microrts.episodes import Episodes, no_components
from games.microrts.maps import MapInfo, resolve_maps
from games.microrts.opponents import Opponents
from games.microrts.options import (
    ACTION_GATES,
    ACTION_NAMES,
    ACTION_NVEC,
    DEFAULT_REWARD_WEIGHTS,
    MASK_WIDTH,
    NUM_ENGINE_PLANES,
    OBS_PLANES,
    PAD_PLANE,
    REWARD_COMPONENTS,
    SELFPLAY,
    EnvLayout,
    MicroRTSOptions,
    env_layout,
)
from games.microrts.render import draw_board

__all__ = [  # the game's interface (options and layout re-exported from options.py)
    "ACTION_GATES", "ACTION_NVEC", "DEFAULT_REWARD_WEIGHTS", "MASK_WIDTH", "NUM_ENGINE_PLANES",
    "OBS_PLANES", "PAD_PLANE", "REWARD_COMPONENTS", "SELFPLAY", "EnvLayout", "MicroRTSOptions",
    "MicroRTSVecGame", "env_layout", "random_legal_actions",
]

_ACTION_OFFSETS = tuple(int(x) for x in np.cumsum((0, *ACTION_NVEC)))  # 0, 6, ..., 29, 78
_NO_EPISODES = EpisodeStats.empty()  # shared: its arrays are empty


# --------------------------------------------------------------------------- sampling


def random_legal_actions(mask: np.ndarray, rng: np.random.Generator,
                         out: np.ndarray | None = None) -> np.ndarray:
    """Uniformly random legal actions ``[..., HW, 7]`` for a microRTS mask ``[..., HW, 78]``
    (bool, or the engine's 0/1 ints), written into ``out`` when given.

    Only cells whose unit may act (mask column 0, no-op, is set) are drawn; each component is
    uniform among its legal values (0 when none is legal); other cells get all zeros. Much
    cheaper than :func:`games.batches.random_actions`, which draws noise for every cell.
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


def out_of_range(actions: np.ndarray, slot: int, cell: int,
                 env_ids: np.ndarray | None = None) -> NoReturn:
    """A :class:`GameError` naming the action component out of its range at ``cell`` of
    seat slot ``slot`` (env * seats + seat) of ``actions`` ``[E, A, cells, 7]``; ``env_ids``:
    the envs' indices in the whole layout (the engine took such values without a word)."""
    env, seat = divmod(slot, actions.shape[1])
    action = actions[env, seat, cell]
    nvec = np.asarray(ACTION_NVEC)
    comp = int(np.flatnonzero((action < 0) | (action >= nvec))[0])
    whole = int(env_ids[env]) if env_ids is not None else env
    raise GameError(f"microrts: action component {ACTION_NAMES[comp]} = {int(action[comp])} "
                    f"(env {whole}, seat {seat}, cell {cell}) is out of range "
                    f"0..{int(nvec[comp]) - 1}")


def check_action_ranges(actions: np.ndarray, env_ids: np.ndarray | None = None) -> None:
    """:func:`out_of_range` for the first out-of-range action among every cell of every seat
    of ``actions`` ``int [E, A, cells, 7]`` (also where no unit stands: one rule everywhere),
    before any of them is stepped (worker processes and map-size groups check in the parent:
    a refusal after some had stepped left their envs a cycle apart)."""
    bad = first_out_of_range(actions)
    if bad >= 0:
        slot, cell = divmod(bad, actions.shape[2])
        out_of_range(actions, slot, cell, env_ids)


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
                 compiled: bool | None = None, env_ids: np.ndarray | None = None) -> None:
        """``envs=(start, stop)`` builds only those envs of the ``num_envs``-env layout (a
        worker process's share, see :mod:`games.microrts.workers`), ``env_ids`` only the envs
        listed (increasing; one map size: a size group of
        :class:`~games.microrts.mixed_sizes.MixedSizeGame`). ``compiled`` picks the
        per-step conversions: numba kernels (:mod:`games.microrts.kernels`; the default when
        numba is installed) or numpy (the reference they are tested against)."""
        if compiled and not kernels.AVAILABLE:
            raise GameError("microrts: compiled=True needs numba (pip install numba)")
        self.compiled = kernels.AVAILABLE if compiled is None else compiled
        opts = options
        layout = env_layout(opts, num_envs)
        if env_ids is None:
            start, stop = envs if envs is not None else (0, num_envs)
            if not 0 <= start < stop <= num_envs:
                raise GameError(f"microrts: env range {start}..{stop} outside 0..{num_envs}")
            env_ids = np.arange(start, stop)
        ids = np.asarray(env_ids, np.int64)
        self._env_ids = ids  # [E] the envs' indices in the whole layout (errors name them)
        num_envs = len(ids)
        self.options = opts
        self.seed = seed
        self.map_infos: list[MapInfo] = resolve_maps(opts.maps or [opts.map], same_size=False)

        # --- who plays what where: engine groups, seats' engine rows, opponents
        self.env_map = [self.map_infos[layout.maps[e]] for e in ids.tolist()]
        sizes = {m.shape for m in self.env_map}
        if len(sizes) > 1:
            raise GameError(f"microrts: maps of sizes {sorted(sizes)} in one batch: only "
                            "games.microrts.make pads mixed sizes (MixedSizeGame)")
        self.height, self.width = self.env_map[0].shape
        height, width, cells = self.height, self.width, self.height * self.width
        num_seats = layout.players.shape[1]
        self.num_envs, self.num_seats = num_envs, num_seats
        self.players = layout.players[ids].copy()  # [E, A]
        bot_specs = [layout.bots[e] for e in ids.tolist()]
        self._engine = eng = EngineGroups(self.players, bot_specs, self.env_map, opts.partial_obs)
        self.groups = eng.groups
        self._env_slot, self._env_group = eng.env_slot, eng.env_group
        self._seat_group, self._seat_row = eng.seat_group, eng.seat_row
        self._game_state = eng.game_state
        self._opponents = opp = Opponents(
            eng, [spec.name if spec is not None else None for spec in bot_specs], ids)
        self.env_bot, self.opponent_names, self.ended_opponent_names = (
            opp.env_bot, opp.names, opp.ended)
        self._num_sp = self.env_bot.count(None)  # self-play games: envs 0.._num_sp-1 here
        self.alive = eng.alive  # [E, A]
        self.alive.setflags(write=False)
        self._rotated = (self.players == 1) & opts.rotate_player1  # [E, A]

        # --- spaces, buffers
        self.spec = GameSpec(
            name=name, num_envs=num_envs, num_seats=num_seats,
            obs_shape=(len(OBS_PLANES), height, width), obs_dtype=np.dtype(np.uint8),
            action_space=MultiDiscrete(ACTION_NVEC, grid=(height, width), gates=ACTION_GATES,
                                       names=ACTION_NAMES),
            state_shape=(len(OBS_PLANES), height, width), state_dtype=np.dtype(np.uint8),
            state_is_obs=not opts.partial_obs,
            obs_kind="grid", zero_sum=not any(opts.reward_weights[1:]), render_fps=30,
            pad_plane=PAD_PLANE)
        self._action_shape = (num_envs, num_seats, cells, len(ACTION_NVEC))
        self._conv = Conversions(eng, opts, self._rotated, self.env_map, self._num_sp,
                                 (height, width), self.compiled)
        self._episodes = Episodes(eng, self._conv, opts)
        self._flip = 0
        self._failed: str | None = None  # a Java exception left the games in an unknown state
        self._closed = False
        self._java_exception: type[BaseException] = Exception
        eng.start(height, width, several_maps=len({m.path for m in self.env_map}) > 1)
        self._java_exception = eng.java_exception
        self._conv.link()
        # the engine's int32 buffers [R, ...] (all groups' rows), for tests and the benchmark
        self._engine_act, self._engine_masks = eng.act, eng.masks
        self._engine_planes = self._conv.engine_planes

    # ------------------------------------------------------------------ VecGame

    @property
    def last_reward_components(self) -> np.ndarray:
        """``float64 [E, A, 6]`` raw reward components of the last step (a copy; columns as
        :data:`REWARD_COMPONENTS`)."""
        return self._episodes.last_components()

    def reset(self, seed: int | None = None) -> Batch:
        """Start a new game in every env (a ``seed`` replaces the bots' seed and restarts their
        game numbering, see the module docstring). Also the way out after an engine error."""
        if self._closed:
            self._check_open()
        if seed is not None:
            self.seed = seed
            self._opponents.games_started[:] = 0
        jvm_signals.restore()
        envs = np.arange(self.num_envs)
        if self.seed is not None:
            entropy = (self.seed, int(self._opponents.env_ids[0]), self.num_envs)
            bots_mod.seed_engine(int(np.random.SeedSequence(entropy).generate_state(1)[0]))
        self._opponents.install(envs)
        try:
            for g in self.groups:
                g.client.reset(g.players_j)
            self._opponents.seed(envs, self.seed)
            if self.options.partial_obs:
                self._engine.read_unfogged(envs)
        except self._java_exception as exc:
            raise self._engine_failed(self._failing_reset(), exc) from exc
        self._failed = None
        self._engine.fix_reset_obs(envs)
        self._episodes.reset()
        return self._fresh_batch()

    def _fresh_batch(self) -> Batch:
        """The batch after new games began: no rewards, ends or episode statistics."""
        ep = self._episodes
        ep.components = no_components()
        self._flip ^= 1
        try:
            obs, state, mask = self._conv.outputs(self._flip)
        except self._java_exception as exc:
            raise self._engine_failed("getMasks", exc) from exc
        reward = ep.reward[self._flip]
        reward[:] = 0
        return Batch(obs, mask, state, reward, ep.all_false, ep.all_false, self.alive,
                     EpisodeStats.empty(), None, None)

    def restart(self, envs: np.ndarray | list[int]) -> Batch:
        """Abandon the games of ``envs`` and start new ones there (a tournament handing an env
        its next match). The abandoned games report no statistics; other envs are untouched
        (their observations are those of the last batch)."""
        self._check_open()
        envs = np.unique(np.asarray(envs, np.int64))
        if len(envs) and not (0 <= envs[0] and envs[-1] < self.num_envs):
            raise GameError(f"microrts: env indices must be in 0..{self.num_envs - 1}")
        jvm_signals.restore()
        self._new_games(envs)
        self._episodes.restarted(envs)
        return self._fresh_batch()

    def set_bot(self, env: int, bot: str) -> str:
        """Make ``bot`` the engine opponent of bot env ``env`` from its next game on (call
        :meth:`restart` to start that game now); returns the bot's canonical name. The game
        in progress goes on against its bot, and is reported against it."""
        self._check_open()
        jvm_signals.restore()
        return self._opponents.choose(env, bot)

    def bot_choices(self) -> list[str]:
        """The canonical names of the options' ``bots`` (each once, in order): the engine bots
        this game's bot envs were configured with."""
        return bots_mod.canonical_pool(list(self.options.bots))

    def step(self, actions: np.ndarray) -> Batch:
        """One game cycle in every env; ``actions`` is ``int [E, A, H*W, 7]``."""
        if self._closed or self._failed is not None:
            self._check_open()
        if actions.shape != self._action_shape or actions.dtype.kind not in "iu":
            raise GameError(f"microrts: actions must be integers of shape {self._action_shape}, "
                            f"got {actions.dtype} {actions.shape}")
        check_action_ranges(actions, self._env_ids)  # before anything of the step is written
        jvm_signals.restore()
        conv, ep = self._conv, self._episodes
        conv.write_actions(actions, self._flip)
        self._flip ^= 1
        flip = self._flip
        raw = ep.raw  # [E*A, 6] Java order; dead seats stay 0
        terminated = ep.terminated[flip]  # [E]
        reward = ep.reward[flip]  # [E, A] float32
        all_false = ep.all_false
        over = False
        try:
            for g in self.groups:
                rewards = np.asarray(g.client.gameStep(g.players_j).reward)  # [N, 6] Java order
                if self.compiled:
                    over |= kernels.read_rewards(rewards, g.row_slot, ep.weights, raw,
                                                 ep.reward_slots[flip], ep.component_sums)
                else:
                    raw[g.row_slot] = rewards
            if self.options.partial_obs:
                self._engine.read_unfogged(np.arange(self.num_envs))
        except self._java_exception as exc:
            raise self._engine_failed("step", exc) from exc
        if not self.compiled:
            over = bool(ep.raw_winloss.any())
            np.dot(raw, ep.weights, out=ep.reward64)
            np.copyto(reward.reshape(-1), ep.reward64, casting="same_kind")
            ep.component_sums += raw
        # the win/loss component is +-1 exactly when the game is over (-1 for both players of
        # a draw), so the engine's done flags need not be read; seat 0 is always alive
        if over:
            np.not_equal(ep.raw_winloss, 0, out=terminated)
        else:
            terminated = all_false
        ep.t += 1
        truncated = all_false
        if ep.t >= ep.next_truncation:
            truncated = ep.truncated[flip]
            np.greater_equal(ep.t - ep.start, self.options.max_steps, out=truncated)
            truncated &= ~terminated
        final_obs = final_state = None
        if truncated is not all_false or terminated is not all_false:
            episodes, final_obs, final_state = self._finish(terminated, truncated)
        elif len(ep.components):
            ep.components = no_components()
            episodes = _NO_EPISODES
        else:
            episodes = _NO_EPISODES
        try:
            obs, state, mask = conv.outputs(flip)
        except self._java_exception as exc:
            raise self._engine_failed("getMasks", exc) from exc
        return Batch(obs, mask, state, reward, terminated, truncated, self.alive, episodes,
                     final_obs, final_state)

    def _finish(self, terminated: np.ndarray, truncated: np.ndarray
                ) -> tuple[EpisodeStats, np.ndarray | None, np.ndarray | None]:
        """Statistics and last observations of the episodes that ended this step; then the
        engine's reset of those games (it leaves finished games alone)."""
        envs = np.flatnonzero(terminated | truncated)
        ep = self._episodes
        if len(envs) == 0:
            ep.components = no_components()
            return _NO_EPISODES, None, None
        outcome = ep.outcomes(envs, terminated)  # [K, A]
        final_obs, final_state = ep.final_observations(envs)
        self._opponents.credit_ended(envs)
        self._new_games(envs)
        return ep.record(envs, outcome), final_obs, final_state

    def _new_games(self, envs: np.ndarray) -> None:
        """New games in ``envs`` (Java), their unfogged state and reset-board fix-up."""
        e = -1
        self._opponents.install(envs)
        try:
            for e in envs.tolist():
                self._engine.reset_env(e)
            self._opponents.seed(envs, self.seed)
            if self.options.partial_obs:
                self._engine.read_unfogged(envs)
        except self._java_exception as exc:
            raise self._engine_failed(f"the reset of {self._describe_env(e)}", exc) from exc
        self._engine.fix_reset_obs(envs)

    def episode_reward_components(self) -> np.ndarray:
        """``float64 [K, 6]`` per-component returns of the seat-episodes in the last
        ``Batch.episodes`` (same order; columns as :data:`REWARD_COMPONENTS`)."""
        return self._episodes.components

    def render(self, env_index: int = 0) -> np.ndarray:
        """An RGB frame ``uint8 [H*cell, W*cell, 3]`` of env ``env_index`` (player 0 blue)."""
        e = self._render_env(env_index)
        return draw_board(self._engine.board(e), self.env_map[e].walls, int(self.players[e, 0]),
                          self.options.render_cell)

    def render_final(self, env_index: int = 0) -> np.ndarray:
        """The last position of env ``env_index``'s latest finished game, drawn as
        :meth:`render` (the current position if none has finished yet): ``render`` after the
        step that ends a game already shows the next game's start."""
        e = self._render_env(env_index)
        board = self._episodes.final_board(e)
        if board is None:
            return self.render(e)
        return draw_board(board, self.env_map[e].walls, int(self.players[e, 0]),
                          self.options.render_cell)

    def _render_env(self, env_index: int) -> int:
        self._check_open()
        if not 0 <= env_index < self.num_envs:
            raise GameError(f"microrts: env_index {env_index} out of range 0..{self.num_envs - 1}")
        return env_index

    def close(self) -> None:
        """Release the engine's games (the JVM itself lives until the process exits)."""
        if self._closed:
            return
        self._closed = True
        self._engine.close()

    # ------------------------------------------------------------------ errors

    def _check_open(self) -> None:
        if self._closed:
            raise GameError("microrts: this game was closed")
        if self._failed is not None:
            raise GameError(f"microrts: the engine failed ({self._failed}); call reset() to "
                            "start new games")

    def _describe_env(self, e: int) -> str:
        if e < 0:
            return "an env"
        return f"env {e} (map {self.env_map[e].path}, opponent {self.opponent_names[e]})"

    def _failing_reset(self) -> str:
        """After a failed batch reset: reset the envs one by one to name the first that fails."""
        for e in range(self.num_envs):
            try:
                self._engine.reset_env(e)
            except self._java_exception:
                return f"the reset of {self._describe_env(e)}"
        return "reset"

    def _engine_failed(self, where: str, exc: BaseException) -> GameError:
        """Record that a Java exception left the games in an unknown state; the error."""
        message = engine.java_error_message(exc)
        self._failed = message
        return GameError(f"microRTS engine error during {where}: {message}")

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
