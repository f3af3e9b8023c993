"""microRTS maps of several sizes in one batch: one :class:`MicroRTSVecGame` per map size,
padded to the largest board.

``game.options.maps`` may mix sizes (``[basesWorkers8x8A, NoWhereToRun9x8,
basesWorkers16x16A]``). The env layout is the same as for one size
(:func:`~games.microrts.options.env_layout`: self-play envs first, maps and bots spread over
side pairs, ``map_weights``); each map size's envs are stepped by their own
:class:`~games.microrts.adapter.MicroRTSVecGame` (built with ``env_ids``: a bot's seed is the
same whichever size group or worker holds its env), and every batch is laid out on the largest
board ``H x W`` of the options' maps:

- an env on an ``h x w`` map occupies the top-left ``h x w`` cells (after the seat's own
  rotation with ``rotate_player1``); the other cells are *padding*: every observation (and
  state) plane 0 except ``off_map`` (:data:`~games.microrts.options.PAD_PLANE`), which is 1;
- masks are all False on padding cells, so no action is ever sampled, scored or entropy-counted
  there (the distributions drop all-False cells), and a critic that pools over the board
  (``network.grid_critic: pool``) excludes them through the off_map plane;
- actions ``[E, A, H*W, 7]`` are cropped back to each env's ``h*w`` cells; whatever is written
  on padding cells is ignored.

The arrays returned alternate between two buffers as the adapter's do. Each size group costs
one Java client per side group; stepping them one after the other costs what their envs
would cost in separate runs, plus the padding copies (``tools/bench_microrts_adapter.py``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from games.core import Batch, EpisodeStats, GameError, GameSpec, MultiDiscrete
from games.microrts import bots as bots_mod
from games.microrts.adapter import MicroRTSVecGame, check_action_ranges
from games.microrts.maps import MapInfo, resolve_maps
from games.microrts.options import (
    MASK_WIDTH,
    PAD_PLANE,
    REWARD_COMPONENTS,
    MicroRTSOptions,
    env_layout,
)


def board_grid(options: MicroRTSOptions) -> tuple[int, int]:
    """The batch grid of ``options``: the largest height and width of its maps."""
    infos = resolve_maps(options.maps or [options.map], same_size=False)
    return max(m.height for m in infos), max(m.width for m in infos)


def has_mixed_sizes(options: MicroRTSOptions) -> bool:
    infos = resolve_maps(options.maps or [options.map], same_size=False)
    return len({m.shape for m in infos}) > 1


def vec_game(options: MicroRTSOptions, num_envs: int, seed: int | None = None,
             name: str = "microrts", envs: tuple[int, int] | None = None
             ) -> MicroRTSVecGame | MixedSizeGame:
    """The envs ``envs`` (all by default) of ``options`` in this process: padded to the largest
    map when the maps differ in size (a worker's share too, whatever sizes it holds)."""
    if has_mixed_sizes(options):
        return MixedSizeGame(options, num_envs, seed=seed, name=name, envs=envs)
    return MicroRTSVecGame(options, num_envs, seed=seed, name=name, envs=envs)


class _SizeGroup:
    """The envs on maps of one size: their game and where they sit in the batch."""

    def __init__(self, game: MicroRTSVecGame, rows: np.ndarray) -> None:
        self.game = game
        self.rows = rows  # [k] this game's envs in the batch (increasing)
        self.height, self.width = game.height, game.width
        self.last: Batch | None = None


class MixedSizeGame:
    """``num_envs`` microRTS envs on maps of several sizes, padded to the largest (see the
    module docstring); the interface of :class:`MicroRTSVecGame`."""

    reward_component_names: tuple[str, ...] = REWARD_COMPONENTS

    def __init__(self, options: MicroRTSOptions, num_envs: int, seed: int | None = None,
                 name: str = "microrts", envs: tuple[int, int] | None = None,
                 compiled: bool | None = None) -> None:
        layout = env_layout(options, num_envs)
        start, stop = envs if envs is not None else (0, num_envs)
        if not 0 <= start < stop <= num_envs:
            raise GameError(f"microrts: env range {start}..{stop} outside 0..{num_envs}")
        self.options = options
        self.seed = seed
        self.map_infos: list[MapInfo] = resolve_maps(options.maps or [options.map],
                                                     same_size=False)
        self.height, self.width = board_grid(options)
        ids = np.arange(start, stop)
        self.num_envs = n = len(ids)
        self.env_map = [self.map_infos[layout.maps[e]] for e in ids.tolist()]
        self.players = layout.players[ids].copy()  # [E, A]
        self.num_seats = a = self.players.shape[1]
        self.alive = self.players >= 0
        self.alive.setflags(write=False)
        self._groups: list[_SizeGroup] = []
        try:
            for shape in sorted({m.shape for m in self.env_map}):
                rows = np.array([i for i, m in enumerate(self.env_map) if m.shape == shape])
                game = MicroRTSVecGame(options, num_envs, seed=seed, name=name,
                                       compiled=compiled, env_ids=ids[rows])
                self._groups.append(_SizeGroup(game, rows))
        except BaseException:
            self.close()
            raise
        self._group_of = np.zeros(n, np.int64)  # env -> group
        self._local = np.zeros(n, np.int64)  # env -> index in its group's game
        for gi, g in enumerate(self._groups):
            self._group_of[g.rows] = gi
            self._local[g.rows] = np.arange(len(g.rows))
        h, w = self.height, self.width
        first = self._groups[0].game.spec
        space = first.action_space
        assert isinstance(space, MultiDiscrete)
        board = (first.obs_shape[0], h, w)
        self.spec: GameSpec = replace(
            first, num_envs=n, obs_shape=board, state_shape=board,
            action_space=MultiDiscrete(space.nvec, grid=(h, w), gates=space.gates,
                                       names=space.names))
        self._action_shape = (n, a, h * w, len(space.nvec))
        self._fogged = not first.state_is_obs
        self._obs = [self._padded_boards() for _ in range(2)]
        self._state = [self._padded_boards() for _ in range(2)] if self._fogged else self._obs
        self._mask = [np.zeros((n, a, h * w, MASK_WIDTH), bool) for _ in range(2)]
        self._reward = [np.zeros((n, a), np.float32) for _ in range(2)]
        self._terminated = [np.zeros(n, bool) for _ in range(2)]
        self._truncated = [np.zeros(n, bool) for _ in range(2)]
        self._components = np.zeros((0, len(REWARD_COMPONENTS)))
        self._flip = 0
        self._closed = False

    def _padded_boards(self) -> np.ndarray:
        """``uint8 [E, A, C, H, W]`` zeros with off_map set outside each env's board."""
        boards = np.zeros((self.num_envs, self.num_seats, *self.spec.obs_shape), np.uint8)
        for e, m in enumerate(self.env_map):
            boards[e, :, PAD_PLANE] = 1
            boards[e, :, PAD_PLANE, :m.height, :m.width] = 0
        return boards

    # ------------------------------------------------------------------ VecGame

    def reset(self, seed: int | None = None) -> Batch:
        self._check_open()
        if seed is not None:
            self.seed = seed
        for g in self._groups:
            g.last = g.game.reset(seed)
        return self._assemble(stepped=False)

    def restart(self, envs: np.ndarray | list[int]) -> Batch:
        """Abandon the games of ``envs`` and start new ones there (as the adapter's)."""
        self._check_open()
        envs = np.unique(np.asarray(envs, np.int64))
        if len(envs) and not (0 <= envs[0] and envs[-1] < self.num_envs):
            raise GameError(f"microrts: env indices must be in 0..{self.num_envs - 1}")
        for gi, g in enumerate(self._groups):
            mine = self._local[envs[self._group_of[envs] == gi]]
            g.last = g.game.restart(mine)
        return self._assemble(stepped=False)

    def step(self, actions: np.ndarray) -> Batch:
        """One game cycle in every env; ``actions`` is ``int [E, A, H*W, 7]`` on the batch
        grid (padding cells ignored)."""
        self._check_open()
        if actions.shape != self._action_shape or actions.dtype.kind not in "iu":
            raise GameError(f"microrts: actions must be integers of shape {self._action_shape}, "
                            f"got {actions.dtype} {actions.shape}")
        check_action_ranges(actions)  # before any size group steps (padding cells included)
        grid = actions.reshape(self.num_envs, self.num_seats, self.height, self.width, -1)
        for g in self._groups:
            own = grid[g.rows, :, :g.height, :g.width]
            g.last = g.game.step(own.reshape(len(g.rows), self.num_seats,
                                             g.height * g.width, -1))
        return self._assemble(stepped=True)

    def _assemble(self, stepped: bool) -> Batch:
        """The batch from every group's last batch, into the other flip's buffers (without
        ``stepped``: new games, no rewards, ends or episodes)."""
        self._flip ^= 1
        f = self._flip
        obs, state, mask = self._obs[f], self._state[f], self._mask[f]
        reward, terminated, truncated = self._reward[f], self._terminated[f], self._truncated[f]
        episodes: list[EpisodeStats] = []
        components: list[np.ndarray] = []
        final_obs = final_state = None
        ends = False
        for g in self._groups:
            b = g.last
            assert b is not None and b.action_mask is not None
            h, w, rows = g.height, g.width, g.rows
            obs[rows, :, :, :h, :w] = b.obs
            if self._fogged:
                assert b.state is not None
                state[rows, :, :, :h, :w] = b.state
            mask.reshape(self.num_envs, self.num_seats, self.height, self.width, -1)[
                rows, :, :h, :w] = b.action_mask.reshape(len(rows), self.num_seats, h, w, -1)
            reward[rows] = b.reward if stepped else 0.0
            terminated[rows] = b.terminated if stepped else False
            truncated[rows] = b.truncated if stepped else False
            if stepped and len(b.episodes.env):
                stats = b.episodes
                episodes.append(stats._replace(env=rows[stats.env]))
                components.append(g.game.episode_reward_components())
            if stepped and b.final_obs is not None:
                ends = True
        if ends:
            final_obs, final_state = self._finals()
        self._components = (np.concatenate(components) if components
                            else np.zeros((0, len(REWARD_COMPONENTS))))
        stats = (EpisodeStats(*(np.concatenate(parts) for parts in zip(*episodes, strict=True)))
                 if episodes else EpisodeStats.empty())
        return Batch(obs, mask, state, reward, terminated, truncated, self.alive, stats,
                     final_obs, final_state)

    def _finals(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Padded last observations (and states) of the episodes that just ended."""
        final_obs = self._padded_boards()
        final_state = self._padded_boards() if self._fogged else None
        for g in self._groups:
            b = g.last
            assert b is not None
            if b.final_obs is None:
                continue
            final_obs[g.rows, :, :, :g.height, :g.width] = b.final_obs
            if final_state is not None and b.final_state is not None:
                final_state[g.rows, :, :, :g.height, :g.width] = b.final_state
        return final_obs, final_state if self._fogged else final_obs

    # ------------------------------------------------------------------ the adapter's extras

    @property
    def opponent_names(self) -> list[str]:
        """Each env's opponent (a bot's canonical name or ``"selfplay"``)."""
        return [self._groups[gi].game.opponent_names[k]
                for gi, k in zip(self._group_of.tolist(), self._local.tolist(), strict=True)]

    @property
    def ended_opponent_names(self) -> list[str]:
        """The opponent of each env's last finished game."""
        return [self._groups[gi].game.ended_opponent_names[k]
                for gi, k in zip(self._group_of.tolist(), self._local.tolist(), strict=True)]

    @property
    def last_reward_components(self) -> np.ndarray:
        """``float64 [E, A, 6]`` raw reward components of the last step."""
        out = np.zeros((self.num_envs, self.num_seats, len(REWARD_COMPONENTS)))
        for g in self._groups:
            out[g.rows] = g.game.last_reward_components
        return out

    def episode_reward_components(self) -> np.ndarray:
        """``float64 [K, 6]`` per-component returns of the last batch's seat-episodes."""
        return self._components

    def bot_choices(self) -> list[str]:
        return bots_mod.canonical_pool(list(self.options.bots))

    def set_bot(self, env: int, bot: str) -> str:
        self._check_open()
        if not 0 <= env < self.num_envs:
            raise GameError(f"microrts: env {env} out of range 0..{self.num_envs - 1}")
        return self._groups[self._group_of[env]].game.set_bot(int(self._local[env]), bot)

    def render(self, env_index: int = 0) -> np.ndarray:
        """An RGB frame of env ``env_index`` on its own board (not padded)."""
        gi, k = self._where(env_index)
        return self._groups[gi].game.render(k)

    def render_final(self, env_index: int = 0) -> np.ndarray:
        gi, k = self._where(env_index)
        return self._groups[gi].game.render_final(k)

    def _where(self, env_index: int) -> tuple[int, int]:
        self._check_open()
        if not 0 <= env_index < self.num_envs:
            raise GameError(f"microrts: env_index {env_index} out of range 0..{self.num_envs - 1}")
        return int(self._group_of[env_index]), int(self._local[env_index])

    def close(self) -> None:
        if getattr(self, "_closed", False):
            return
        self._closed = True
        for g in getattr(self, "_groups", []):
            g.game.close()

    def _check_open(self) -> None:
        if self._closed:
            raise GameError("microrts: this game was closed")

    def __enter__(self) -> MixedSizeGame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        sizes = ", ".join(f"{g.height}x{g.width}: {len(g.rows)}" for g in self._groups)
        return (f"MixedSizeGame({self.num_envs} envs on a {self.height}x{self.width} grid; "
                f"envs per size {sizes}; A={self.num_seats})")
