"""Two-player PettingZoo Atari games as a :class:`games.core.VecGame` (``pettingzoo/<game>``).

PettingZoo is used to find each game's ROM, game mode and action set (its ``raw_env`` with the
ROMs of ale-py); the emulators are then driven directly (:mod:`games.pettingzoo.emulator`).
Preprocessing matches CleanRL's ``ppo_pettingzoo_ma_atari`` SuperSuit chain (see
:class:`PettingZooAtariOptions`):

- ``frame_skip`` 4 (rewards summed), max over the last two frames, grayscale (the ALE's
  luminance; CleanRL keeps the blue channel), bilinear resize to 84x84, ``frame_stack`` 4;
- rewards clipped to their sign in ``Batch.reward``; statistics keep the raw score;
- obs ``uint8 [E, A, frame_stack + A, 84, 84]``: channels ``0..3`` the frames (oldest first),
  channel ``4 + i`` the agent indicator of seat ``i`` (255 in the observing seat's channel,
  0 in the other). Both seats see the same screen; the indicator tells them apart (and
  ``mirror_second_seat`` flips seat 1's frames in the pong family);
- ``state`` (the centralized critic's input) is the unmirrored obs of each seat.

Seats: seat ``i`` is PettingZoo's agent ``["first_0", "second_0"][i]``. A seat whose lives drop
below 0 (out of the game while the other plays on) is not ``alive`` until the episode ends;
its actions are replaced by NOOP as PettingZoo does. Episodes end when the game is over
(``terminated``) or after ``max_cycles`` frames (``truncated``); the env resets on the same
step, ``final_obs`` / ``final_state`` hold the finished episode's last observation (they are
the ``obs`` / ``state`` arrays themselves on steps where no episode ended). A new episode's
frame stack repeats its first frame (as gymnasium's ``FrameStackObservation`` with
``padding_type="reset"``; SuperSuit's ``frame_stack``, CleanRL's, starts from zero frames
instead: a difference for the first three steps of each episode).

Seeds: env ``i``'s emulator RNG (sticky actions) is seeded with ``seed + i``; most games are
then deterministic given the actions, and ``get_state`` / ``set_state`` continue bit-exactly.
A few ROMs (maze_craze, space_war, combat_plane) also read bits that multi_agent_ale_py draws
from a generator seeded outside our control (it changes from run to run), so their episodes
are not reproducible.

Episode statistics report each seat's raw return, the length in agent steps and, in
competitive games, WIN / LOSS / DRAW from the sign of the return difference (NONE for
truncated episodes and in mixed-sum or cooperative games).

Built-in opponent (``builtin_opponent_share``, games of
:func:`games.pettingzoo.catalog.builtin_opponent_games`): the last
``floor(share * num_envs)`` envs run the same ROM in its single-player mode, where the console
plays the other side (Pong's CPU paddle, ...); the learner is seat 0 there. Their emulators
are stepped with the others (same preprocessing, frame skip, sticky actions, seeds); seat 1
is never ``alive``, its actions are ignored, its reward is 0, it reports no episodes, and
its observation is built as in the other envs. Seat 0's reward is the game's single-player
reward (in Pong its points minus the console's), so the outcome is the sign of its return.
``opponent_names[e]`` is ``"builtin"`` or ``"selfplay"``; ``players[e, s]`` is the ALE player
that seat ``s`` controls, -1 for seat 1 of the builtin envs (the league pits no snapshot
there).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from games.batches import EpisodeTracker
from games.core import Batch, Discrete, EpisodeStats, GameError, GameSpec, Outcome
from games.options import from_mapping
from games.pettingzoo import catalog
from games.pettingzoo.catalog import GameInfo
from games.pettingzoo.emulator import AleBatch
from games.pettingzoo.options import PettingZooAtariOptions
from games.pettingzoo.probe import NUM_SEATS, game_setup

STATE_FORMAT = "pettingzoo-atari/1"
BUILTIN = "builtin"  # opponent_names entry of an env against the console's own opponent
SELFPLAY = "selfplay"  # opponent_names entry of a two-player env
_INTERPOLATION = {"linear": cv2.INTER_LINEAR, "area": cv2.INTER_AREA}


class PettingZooAtari:
    """``E`` two-player Atari games stepped together (see the module docstring)."""

    opponent_names: list[str]
    """Each env's opponent, length ``E``: ``"selfplay"`` or ``"builtin"``."""
    ended_opponent_names: list[str]
    """The opponent of each env's last finished game: an env keeps its opponent, so the same
    list as :attr:`opponent_names`."""
    players: np.ndarray
    """``int64 [E, A]``: the ALE player each seat controls, -1 where it controls none."""

    def __init__(self, info: GameInfo, num_envs: int, seed: int | None,
                 opts: PettingZooAtariOptions) -> None:
        if num_envs < 1:
            raise GameError(f"num_envs must be >= 1, got {num_envs}")
        rom_dir = Path(opts.rom_dir) if opts.rom_dir else catalog.rom_directory()
        setup = game_setup(info, rom_dir, opts.game_kwargs, opts.full_action_space)
        self.info, self.opts = info, opts
        self.rom_path = setup.rom_path
        self._action_map = np.asarray(setup.action_mapping, np.intc)  # agent action -> ALE code
        num_builtin = builtin_envs(opts.builtin_opponent_share, num_envs)
        modes = [setup.mode] * num_envs
        if opts.builtin_opponent_share > 0:  # the check also when rounding leaves no env
            solo = catalog.builtin_opponent_mode(info, setup.mode)
            modes[num_envs - num_builtin:] = [solo] * num_builtin
        if seed is None:
            seed = int(np.random.SeedSequence().generate_state(1)[0] >> 1)
        self._em = AleBatch(self.rom_path, modes, NUM_SEATS, seed,
                            opts.frame_skip, opts.screen_size, opts.max_pool,
                            opts.repeat_action_probability, _INTERPOLATION[opts.interpolation],
                            opts.num_threads)
        e, a, f, s = num_envs, NUM_SEATS, opts.frame_stack, opts.screen_size
        self.num_builtin_envs = num_builtin
        self.opponent_names = [SELFPLAY] * (e - num_builtin) + [BUILTIN] * num_builtin
        self.ended_opponent_names = self.opponent_names
        self.players = np.tile(np.arange(a, dtype=np.int64), (e, 1))  # [E, A]
        self.players[e - num_builtin:, 1:] = -1
        channels = f + (a if opts.agent_indicator else 0)
        self.spec = GameSpec(
            name=info.registry_name, num_envs=e, num_seats=a, obs_shape=(channels, s, s),
            obs_dtype=np.dtype(np.uint8), action_space=Discrete(len(self._action_map)),
            state_shape=(channels, s, s) if opts.global_state else None,
            state_dtype=np.dtype(np.uint8), obs_kind="image",
            zero_sum=info.kind == "competitive",
            decided=info.kind == "competitive", render_fps=max(1, 60 // opts.frame_skip))
        self._indicator = np.zeros((a, a, s, s), np.uint8)  # [A seat, A channel, S, S]
        for i in range(a):
            self._indicator[i, i] = 255
        self._stack = np.zeros((e, f, s, s), np.uint8)  # [E, F, S, S] oldest frame first
        self._seated = self.players >= 0  # [E, A] shared, never modified
        self._alive = self._seated.copy()  # [E, A]
        self._some_out = False  # a seated seat is out of the game (not alive)
        self._mask = np.ones((e, a, len(self._action_map)), bool)  # shared, never modified
        self._tracker = EpisodeTracker(e, a)
        self._final_rgb: dict[int, np.ndarray] = {}
        self._max_frames = opts.max_cycles or 0
        self._started = False

    # ------------------------------------------------------------------ stepping

    def reset(self, seed: int | None = None) -> Batch:
        """Start a new game in every env; ``seed`` re-seeds env ``i``'s emulator with
        ``seed + i`` (as PettingZoo's ``reset(seed=...)``); without it the emulators go on."""
        em = self._em
        if em.closed:
            raise GameError(f"{self.spec.name}: the game is closed")
        if seed is not None:
            em.reseed(seed)
        em.reset(list(range(em.num_envs)))
        self._stack[...] = em.frames[:, None]
        self._alive[...] = self._seated
        self._some_out = False
        self._tracker = EpisodeTracker(em.num_envs, NUM_SEATS)
        self._final_rgb.clear()
        self._started = True
        obs, state = self._observe()
        e = em.num_envs
        return Batch(obs=obs, action_mask=self._mask, state=state,
                     reward=np.zeros((e, NUM_SEATS), np.float32),
                     terminated=np.zeros(e, bool), truncated=np.zeros(e, bool),
                     alive=self._seated, episodes=EpisodeStats.empty(),
                     final_obs=obs, final_state=state)

    def step(self, actions: np.ndarray) -> Batch:
        """Advance every env by one agent step; ``actions`` is ``int [E, A]``."""
        if not self._started:
            raise GameError(f"{self.spec.name}: call reset() before step()")
        em = self._em
        em.actions[...] = self._action_map[self._check(actions)]
        some_out = self._some_out  # unseated seats need no care: single-player ROMs skip them
        if some_out:
            em.actions[~self._alive] = self._action_map[0]  # seats out of the game: NOOP
        em.step(self._max_frames)
        stack = self._stack
        stack[:, :-1] = stack[:, 1:]
        stack[:, -1] = em.frames
        raw = em.rewards.astype(np.float64)  # [E, A]
        if some_out:
            raw *= self._alive
        terminated = em.game_over.copy()  # [E]
        truncated = ~terminated & (em.elapsed >= self._max_frames) if self._max_frames \
            else np.zeros_like(terminated)
        ended = np.flatnonzero(terminated | truncated).tolist()
        outcome = self._outcomes(raw, ended, terminated) if ended else None
        stats = self._tracker.update(raw, ended, outcome)
        if self.num_builtin_envs and len(stats.env):
            seated = self._seated[stats.env, stats.seat]  # [K] drop seat 1 of builtin envs
            if not seated.all():
                stats = EpisodeStats(*(column[seated] for column in stats))
        obs, state = self._observe()
        final_obs, final_state = obs, state
        if ended:
            for e in ended:
                self._final_rgb[e] = em.rgb(e)
            em.reset(ended)
            stack[ended] = em.frames[ended][:, None]
            obs, state = self._observe()
        np.greater_equal(em.read_lives(), 0, out=self._alive)
        if self.num_builtin_envs:
            self._alive &= self._seated
        self._alive[ended] = self._seated[ended]
        self._some_out = not np.array_equal(self._alive, self._seated)
        reward = np.sign(raw, dtype=np.float32) if self.opts.clip_rewards \
            else raw.astype(np.float32)
        alive = self._alive.copy() if self._some_out else self._seated
        return Batch(obs=obs, action_mask=self._mask, state=state, reward=reward,
                     terminated=terminated, truncated=truncated, alive=alive, episodes=stats,
                     final_obs=final_obs, final_state=final_state)

    def _check(self, actions: np.ndarray) -> np.ndarray:
        """``actions`` as ``int [E, A]`` within the action space (GameError otherwise)."""
        acts = np.asarray(actions)
        e, n = self._em.num_envs, len(self._action_map)
        if acts.size != e * NUM_SEATS:
            raise GameError(f"{self.spec.name}: actions must be [E, A] = [{e}, {NUM_SEATS}], "
                            f"got shape {acts.shape}")
        if acts.dtype.kind not in "iu":
            if not np.array_equal(acts, np.round(acts)):
                raise GameError(f"{self.spec.name}: actions must be integers")
            acts = acts.astype(np.int64)
        acts = acts.reshape(e, NUM_SEATS)
        if acts.min() < 0 or acts.max() >= n:
            raise GameError(f"{self.spec.name}: actions must be in [0, {n}), got "
                            f"{acts.reshape(-1).tolist()}")
        return acts

    def _outcomes(self, raw: np.ndarray, ended: list[int], terminated: np.ndarray
                  ) -> np.ndarray | None:
        """Outcome ``int8 [E, A]`` of the ``ended`` envs (rows of the others are unused)."""
        if self.info.kind != "competitive":
            return None
        returns = self._tracker.returns[ended] + raw[ended]  # [K, A] this step included
        sign = np.sign(returns[:, 0] - returns[:, 1]).astype(np.int8)  # [K]
        outcome = np.full(raw.shape, Outcome.NONE, np.int8)
        outcome[ended, 0] = np.where(terminated[ended], sign, Outcome.NONE)
        outcome[ended, 1] = np.where(terminated[ended], -sign, Outcome.NONE)
        return outcome

    def _observe(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Fresh ``obs`` and ``state`` ``uint8 [E, A, C, S, S]`` from the frame stacks."""
        opts, stack = self.opts, self._stack
        f = opts.frame_stack
        obs = np.empty((stack.shape[0], NUM_SEATS, *self.spec.obs_shape), np.uint8)
        obs[:, :, :f] = stack[:, None]
        if opts.agent_indicator:
            obs[:, :, f:] = self._indicator
        if not opts.global_state:
            state = None
        elif opts.mirror_second_seat:
            state = obs.copy()
        else:
            state = obs
        if opts.mirror_second_seat:
            obs[:, 1, :f] = stack[:, :, :, ::-1]
        return obs, state

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        """Emulators (with their RNGs), frame stacks, counters and episode statistics."""
        if not self._started:
            raise GameError(f"{self.spec.name}: call reset() before get_state()")
        em = self._em
        return {
            "format": STATE_FORMAT,
            "name": self.spec.name,
            "num_envs": em.num_envs,
            "builtin_envs": self.num_builtin_envs,
            "ale": [em.save(e) for e in range(em.num_envs)],
            "stack": self._stack.copy(),
            "elapsed": em.elapsed.copy(),
            "alive": self._alive.copy(),
            "tracker": self._tracker.state_dict(),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`get_state` snapshot of a game built with the same options."""
        if state.get("format") != STATE_FORMAT:
            raise GameError(f"{self.spec.name}: not a PettingZoo Atari state (format "
                            f"{state.get('format')!r}, expected {STATE_FORMAT!r})")
        em = self._em
        if state["name"] != self.spec.name or int(state["num_envs"]) != em.num_envs:
            raise GameError(f"state is for {state['name']} x{state['num_envs']}, "
                            f"this game is {self.spec.name} x{em.num_envs}")
        builtin = int(state.get("builtin_envs", 0))
        if builtin != self.num_builtin_envs:
            raise GameError(f"state has {builtin} envs against the built-in opponent, this "
                            f"game {self.num_builtin_envs}; build it with the same "
                            "builtin_opponent_share")
        for e, data in enumerate(state["ale"]):
            em.load(e, bytes(data))
        self._stack[...] = state["stack"]
        em.elapsed[...] = state["elapsed"]
        self._alive[...] = state["alive"]
        self._some_out = not np.array_equal(self._alive, self._seated)
        self._tracker.load_state_dict(state["tracker"])
        self._final_rgb.clear()
        self._started = True

    # ------------------------------------------------------------------ misc

    def render(self, env_index: int = 0) -> np.ndarray:
        """The RGB screen ``uint8 [210, 160, 3]`` of env ``env_index``."""
        return self._em.rgb(env_index)

    def render_final(self, env_index: int = 0) -> np.ndarray:
        """The last screen of env ``env_index``'s finished episode (the current one if none
        finished yet)."""
        frame = self._final_rgb.get(env_index)
        return frame.copy() if frame is not None else self.render(env_index)

    def close(self) -> None:
        self._em.close()
        self._started = False


def builtin_envs(share: float, num_envs: int) -> int:
    """How many of ``num_envs`` envs play the built-in opponent at ``share``."""
    return math.floor(share * num_envs + 1e-9)


def make(name: str, num_envs: int = 1, seed: int | None = None,
         **options: Any) -> PettingZooAtari:
    """Registry factory: ``make("pettingzoo/pong_v3", num_envs=8, seed=1)``."""
    info = catalog.resolve(name)
    opts = from_mapping(PettingZooAtariOptions, options, where="game.options.")
    return PettingZooAtari(info, num_envs, seed, opts)
