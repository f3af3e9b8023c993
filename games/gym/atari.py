"""Single-agent Atari through ale-py (``atari/Pong`` -> ``ALE/Pong-v5``) as a ``GymVecGame``.

Preprocessing follows CleanRL's ``ppo_atari`` (the "37 implementation details" wrappers), done
in one wrapper that talks to the ALE directly (no per-frame RGB copies, one resize per step):

- no-op reset: 1..``noop_max`` no-op frames after each new game;
- frame skip ``frame_skip`` with a max over the last two frames;
- episodic life: a lost life ends the learner's episode (``terminated``) but the game goes on
  (the reset after it is one no-op step); episode statistics still cover the whole game, with
  the raw score, and the length in agent steps;
- fire reset (FIRE, then action 2) when the game's action 1 is FIRE;
- rewards clipped to their sign (``Batch.reward`` only; statistics stay raw);
- grayscale (the ALE's luminance palette), ``screen_size`` x ``screen_size`` with area
  interpolation, ``frame_stack`` frames: obs ``uint8 [frame_stack, screen_size, screen_size]``.

Sticky actions are off by default (``repeat_action_probability=0.0``, as in the v4
``NoFrameskip`` envs CleanRL trains on); Machado et al. (2018) recommend 0.25 for evaluation.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import cv2
import gymnasium as gym
import numpy as np

from games.ale_roms import MAX_FRAME_STACK, MAX_SCREEN_SIZE, rom_key, single_player_games
from games.core import GameError
from games.gym.adapter import GymVecGame
from games.options import from_mapping

_EMPTY_INFO: dict[str, Any] = {}


@dataclass
class AtariOptions:
    """Options of ``atari/<Game>`` (``game.options`` in a config)."""

    repeat_action_probability: float = 0.0
    """Sticky actions: 0.0 like v4 NoFrameskip envs (CleanRL); 0.25 is the v5 / Machado default."""
    full_action_space: bool = False
    """All 18 joystick actions instead of the game's minimal set."""
    episodic_life: bool = True
    """A lost life ends the learner's episode (statistics still count whole games)."""
    clip_rewards: bool = True
    """Clip learner rewards to their sign (-1, 0, 1); statistics keep the raw score."""
    noop_max: int = 30
    """At most this many no-op frames (at least 1) at the start of each game; 0 disables."""
    frame_skip: int = 4
    """Frames per agent step (the action repeats; the obs is the max of the last two frames)."""
    frame_stack: int = 4
    """Observation frames stacked along the channel axis."""
    screen_size: int = 84
    """Observation height and width after resizing."""
    max_episode_steps: int | None = 108_000
    """Truncate a game after this many *frames* (108,000 = 30 minutes); None: no limit."""
    render: bool = False
    """Allow ``render()`` (the RGB screen)."""
    mode: int | None = None
    """Game mode (None: the ROM's default)."""
    difficulty: int | None = None
    """Game difficulty (None: the ROM's default)."""

    def __post_init__(self) -> None:
        if not 0.0 <= self.repeat_action_probability <= 1.0:
            raise ValueError(f"repeat_action_probability must be in [0, 1], "
                             f"got {self.repeat_action_probability}")
        for key in ("frame_skip", "frame_stack", "screen_size"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")
        if self.screen_size > MAX_SCREEN_SIZE or self.frame_stack > MAX_FRAME_STACK:
            raise ValueError(f"screen_size must be <= {MAX_SCREEN_SIZE} (the screen is "
                             f"210x160) and frame_stack <= {MAX_FRAME_STACK}, got "
                             f"{self.screen_size} and {self.frame_stack}")
        if self.noop_max < 0:
            raise ValueError(f"noop_max must be >= 0, got {self.noop_max}")
        if self.max_episode_steps is not None and self.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be >= 1 or null, "
                             f"got {self.max_episode_steps}")


def resolve_game(name: str) -> str:
    """``"atari/Pong"``, ``"Pong"``, ``"pong"``, ``"PongNoFrameskip-v4"`` -> ``"Pong"``."""
    game = name.split("/", 1)[1] if "/" in name else name
    game = re.sub(r"(NoFrameskip)?-v\d+$", "", game)
    games = single_player_games()
    if rom_key(game) in games:
        return games[rom_key(game)]
    names = sorted(games.values())
    by_lower = {n.lower(): n for n in names}
    close = [by_lower[c] for c in difflib.get_close_matches(game.lower(), list(by_lower), n=5,
                                                            cutoff=0.5)]
    hint = f" (did you mean {', '.join(f'atari/{c}' for c in close)}?)" if close else ""
    raise GameError(f"unknown Atari game {game!r}{hint}; the {len(names)} games bundled with "
                    f"ale-py include atari/Pong, atari/Breakout, atari/SpaceInvaders, "
                    f"atari/MontezumaRevenge (names as in gymnasium's ALE/<Game>-v5)")


class AtariPreprocessed(gym.Wrapper[np.ndarray, Any, np.ndarray, Any]):
    """CleanRL-style Atari preprocessing in one wrapper over an ale-py ``AtariEnv``.

    Implements :class:`games.gym.adapter.MultiLifeEnv`: ``terminated`` marks a lost life (with
    ``episodic_life``), ``game_over`` the end of the game and ``raw_reward`` the unclipped
    reward (including reward earned during the preceding automatic reset).
    """

    def __init__(self, env: gym.Env[Any, Any], opts: AtariOptions) -> None:
        super().__init__(env)
        core = env.unwrapped
        self.ale = core.ale  # type: ignore[attr-defined]
        action_set = (self.ale.getLegalActionSet() if opts.full_action_space
                      else self.ale.getMinimalActionSet())
        self._actions = tuple(int(a.value) for a in action_set)  # agent action -> ALE action
        meanings = core.get_action_meanings()  # type: ignore[attr-defined]
        self._fire = len(meanings) >= 3 and meanings[1] == "FIRE"
        self._skip = opts.frame_skip
        self._size = opts.screen_size
        self._noop_max = opts.noop_max
        self._episodic_life = opts.episodic_life
        self._clip = opts.clip_rewards
        height, width = self.ale.getScreenDims()
        self._screens = np.zeros((2, height, width), np.uint8)  # last two frames of a step
        self._pooled = np.zeros((height, width), np.uint8)
        self._frame = np.zeros((opts.screen_size, opts.screen_size), np.uint8)
        self._stack = np.zeros((opts.frame_stack, opts.screen_size, opts.screen_size), np.uint8)
        self.observation_space = gym.spaces.Box(0, 255, self._stack.shape, np.uint8)
        self.action_space = gym.spaces.Discrete(len(self._actions))
        self._lives = 0
        self._pending = 0.0  # raw reward earned during resets, reported with the next step
        self.raw_reward = 0.0
        self.game_over = True
        self.ended_in_reset = False  # the last reset's steps ended the game it continued
        self.reset_reward = 0.0  # the raw reward that game earned in them

    # ------------------------------------------------------------------ frames

    def _act(self, action: int) -> float:
        """Repeat ALE ``action`` for ``frame_skip`` frames; max-pool and resize into _frame."""
        ale, screens, skip = self.ale, self._screens, self._skip
        reward = 0.0
        for t in range(skip):
            reward += ale.act(action)
            if t >= skip - 2:
                ale.getScreenGrayscale(screens[t - skip + 2])
            if ale.game_over():
                if t < skip - 1:  # ended early: pool the final frame with itself
                    ale.getScreenGrayscale(screens[1])
                    screens[0] = screens[1]
                break
        if skip > 1:
            np.maximum(screens[0], screens[1], out=self._pooled)
            source = self._pooled
        else:
            source = screens[1]
        cv2.resize(source, (self._size, self._size), dst=self._frame,
                   interpolation=cv2.INTER_AREA)
        return reward

    def _grab(self) -> None:
        """The current screen, resized into _frame (the first obs of a game)."""
        self.ale.getScreenGrayscale(self._screens[1])
        cv2.resize(self._screens[1], (self._size, self._size), dst=self._frame,
                   interpolation=cv2.INTER_AREA)

    # ------------------------------------------------------------------ gymnasium API

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        reward = self._act(self._actions[action])
        ale = self.ale
        stack = self._stack
        stack[:-1] = stack[1:]
        stack[-1] = self._frame
        truncated = ale.game_truncated()
        terminated = ale.game_over(with_truncation=False)
        lives = ale.lives()
        if self._episodic_life and 0 < lives < self._lives:
            terminated = True
        self._lives = lives
        self.game_over = ale.game_over()  # the whole game ended (terminal or truncated)
        self.raw_reward = reward + self._pending
        self._pending = 0.0
        if self._clip:
            reward = float((reward > 0) - (reward < 0))
        return stack.copy(), reward, terminated, truncated, _EMPTY_INFO

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        """Start a new game (seeded, after game over, or with ``new_game``), else the next life;
        a game that its next life's no-op or FIRE frames end (its last life lost, its time
        limit reached) is left for a new one, and said so (``ended_in_reset``)."""
        self.ended_in_reset, self.reset_reward = False, 0.0
        continuing = not (seed is not None or self.game_over
                          or (options and options.get("new_game")))
        if not continuing:
            self._new_game(seed)
        else:
            self._pending += self._act(self._actions[0])
            if self.ale.game_over():
                self._end_in_reset()
        if self._fire:
            for action in (1, 2):
                self._pending += self._act(self._actions[action])
                if self.ale.game_over():
                    if continuing and not self.ended_in_reset:
                        self._end_in_reset()
                    else:
                        self._new_game(None)
        self._lives = self.ale.lives()
        self.game_over = False
        self._stack[...] = self._frame
        return self._stack.copy(), {}

    def _end_in_reset(self) -> None:
        """The game being continued ended in the reset's own frames: its reward so far goes
        with it (``reset_reward``), and a new game begins."""
        self.ended_in_reset, self.reset_reward = True, self._pending
        self._new_game(None)

    def _new_game(self, seed: int | None) -> None:
        self.env.reset(seed=seed)
        self._pending = 0.0
        ale = self.ale
        noops = int(self.np_random.integers(1, self._noop_max + 1)) if self._noop_max else 0
        for _ in range(noops):
            self._pending += ale.act(self._actions[0])
            if ale.game_over():
                ale.reset_game()
        self._grab()

    def render(self) -> np.ndarray:  # type: ignore[override]
        return self.ale.getScreenRGB()

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        """ALE state (with its RNG) as bytes plus the wrapper's frames and counters."""
        return {
            "ale": self.ale.cloneState(include_rng=True).serialize(),
            "stack": self._stack.copy(),
            "frame": self._frame.copy(),
            "lives": self._lives,
            "pending": self._pending,
            "raw_reward": self.raw_reward,
            "game_over": self.game_over,
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        import ale_py

        self.ale.restoreState(ale_py.ALEState(bytes(state["ale"])))
        self._stack[...] = state["stack"]
        self._frame[...] = state["frame"]
        self._lives = int(state["lives"])
        self._pending = float(state["pending"])
        self.raw_reward = float(state["raw_reward"])
        self.game_over = bool(state["game_over"])


class AtariCodec:
    """Delegates to :meth:`AtariPreprocessed.get_state` / ``set_state``."""

    def get(self, env: gym.Env[Any, Any]) -> dict[str, Any]:
        assert isinstance(env, AtariPreprocessed)
        return env.get_state()

    def set(self, env: gym.Env[Any, Any], state: Mapping[str, Any]) -> None:
        assert isinstance(env, AtariPreprocessed)
        env.set_state(state)


def make_env(game: str, opts: AtariOptions) -> AtariPreprocessed:
    """One preprocessed env for CamelCase ``game`` (see :func:`resolve_game`)."""
    with rom_needed(game):
        env = _make_ale(game, opts)
    return AtariPreprocessed(env, opts)


@contextlib.contextmanager
def rom_needed(game: str) -> Iterator[None]:
    """A ROM file ale-py ships but cannot find (a damaged install) as one line naming it and
    the fix, not the bare ``[Errno 2] No such file or directory: .../roms/pong.bin``."""
    try:
        yield
    except FileNotFoundError as exc:
        if not str(exc.filename or "").endswith(".bin"):
            raise
        raise GameError(f"atari/{game}: its ROM {exc.filename} is missing from ale-py's "
                        "install: pip install --force-reinstall ale-py") from exc


def _make_ale(game: str, opts: AtariOptions) -> gym.Env[Any, Any]:
    return gym.make(
        f"ALE/{game}-v5",
        frameskip=1,
        repeat_action_probability=opts.repeat_action_probability,
        full_action_space=opts.full_action_space,
        max_num_frames_per_episode=opts.max_episode_steps or 0,
        mode=opts.mode,
        difficulty=opts.difficulty,
        render_mode="rgb_array" if opts.render else None,
        disable_env_checker=True,
        max_episode_steps=None,
    ).unwrapped


def check_mode(game: str, opts: AtariOptions) -> None:
    """``mode`` and ``difficulty`` among those the ROM offers: a :class:`GameError` listing
    them (the ALE's own error names neither the value nor the choices)."""
    if opts.mode is None and opts.difficulty is None:
        return
    with rom_needed(game):
        probe = gym.make(f"ALE/{game}-v5", disable_env_checker=True).unwrapped
    try:
        ale = probe.ale  # type: ignore[attr-defined]
        offered = {"mode": [int(m) for m in ale.getAvailableModes()],
                   "difficulty": [int(d) for d in ale.getAvailableDifficulties()]}
    finally:
        probe.close()
    for key, value in (("mode", opts.mode), ("difficulty", opts.difficulty)):
        if value is not None and value not in offered[key]:
            raise GameError(f"atari/{game}: game.options.{key} {value} is not one of "
                            f"{offered[key]}")


def make(name: str, num_envs: int = 1, seed: int | None = None,
         **options: Any) -> GymVecGame:
    """``num_envs`` preprocessed copies of ``atari/<Game>``, e.g. ``make("atari/Pong", 8)``."""
    game = resolve_game(name)
    opts = from_mapping(AtariOptions, options, where="game.options.")
    if num_envs < 1:
        raise GameError(f"num_envs must be >= 1, got {num_envs}")
    check_mode(game, opts)
    envs = [make_env(game, opts) for _ in range(num_envs)]
    return GymVecGame(f"atari/{game}", envs, seed=seed, codec=AtariCodec(), obs_kind="image",
                      render=opts.render, render_fps=max(1, 60 // opts.frame_skip))
