"""``GymVecGame``: single-agent gymnasium envs as a :class:`~games.core.VecGame` (one seat).

The envs are stepped in a plain Python loop (no ``SyncVectorEnv``): the loop writes into
preallocated arrays and allocates only the arrays it hands back. Time limits are enforced
here (the envs are unwrapped), so the elapsed-step counters live in plain lists and are part
of :meth:`GymVecGame.get_state`.

Envs that split one game into several learner episodes (Atari's "episodic life") implement
:class:`MultiLifeEnv`: their ``terminated`` flag ends a learner episode (a life), while
``game_over`` and ``raw_reward`` drive the episode statistics (whole games, raw score).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

import gymnasium as gym
import numpy as np

from games.batches import EpisodeTracker
from games.core import ActionSpace, Batch, Box, Discrete, EpisodeStats, GameError, GameSpec

STATE_FORMAT = "selfplay.games.gym/1"
_NEW_GAME: dict[str, Any] = {"new_game": True}  # reset options of a MultiLifeEnv
_NO_EPISODES = EpisodeStats.empty()  # shared: its arrays are empty


class EnvStateCodec(Protocol):
    """Captures and restores the simulator state of one env as plain data.

    Plain data means numpy arrays, Python scalars, strings, non-empty bytes and dicts/lists of
    those, so that :func:`games.files.save_checkpoint` can store it (arrays as tensors)
    and ``torch.load(weights_only=True)`` read it back. The env's ``np_random`` state is handled
    by :class:`GymVecGame`, not by the codec.
    """

    def get(self, env: gym.Env[Any, Any]) -> dict[str, Any]: ...

    def set(self, env: gym.Env[Any, Any], state: Mapping[str, Any]) -> None: ...


@runtime_checkable
class MultiLifeEnv(Protocol):
    """An env whose learner episodes (lives) are parts of one game.

    After each ``step``: ``raw_reward`` is the unclipped reward (plus any reward earned during
    the automatic reset before it) and ``game_over`` tells whether the whole game ended (so the
    next ``reset()`` starts a new game instead of continuing after a lost life).
    ``reset(options={"new_game": True})`` always starts a new game. After a ``reset()`` that
    continues a game, ``ended_in_reset`` tells whether the game ended in its own steps (a
    lost last life, or the time limit, during the no-op and FIRE frames; a new game then
    began) and ``reset_reward`` is the raw reward the ended game earned in them.
    """

    raw_reward: float
    game_over: bool
    ended_in_reset: bool
    reset_reward: float


def action_space_of(space: gym.Space[Any]) -> ActionSpace:
    """The common action space for a gymnasium ``Discrete`` or ``Box`` space."""
    if isinstance(space, gym.spaces.Discrete):
        if int(space.start) != 0:
            raise GameError(f"Discrete action spaces must start at 0, got start={space.start}")
        return Discrete(int(space.n))
    if isinstance(space, gym.spaces.Box) and len(space.shape) == 1:
        low = tuple(float(x) for x in space.low)
        high = tuple(float(x) for x in space.high)
        return Box(low, high)
    raise GameError(f"unsupported gymnasium action space {space}; expected Discrete or 1-D Box")


def rng_state(env: gym.Env[Any, Any]) -> dict[str, Any]:
    """The bit-generator state of ``env.unwrapped.np_random`` (plain dict of ints/strings)."""
    return dict(env.unwrapped.np_random.bit_generator.state)


def set_rng_state(env: gym.Env[Any, Any], state: Mapping[str, Any]) -> None:
    generator = env.unwrapped.np_random  # creates one if the env was never seeded
    if generator.bit_generator.state["bit_generator"] != state["bit_generator"]:
        generator = np.random.Generator(getattr(np.random, str(state["bit_generator"]))())
        env.unwrapped.np_random = generator
    generator.bit_generator.state = dict(state)


class GymVecGame:
    """``E`` single-agent gymnasium envs stepped together as one seat each (``A = 1``).

    Autoreset happens on the same step: the returned ``obs`` of a finished env is the first
    observation of its next episode and ``final_obs`` holds the finished episode's last
    observation (``final_obs`` equals ``obs`` in the other rows). Discrete actions come with an
    all-True mask (one shared array: do not modify it); Box actions are clipped to their
    bounds before stepping. Episode statistics report the raw (unclipped) return and the length
    in agent steps.

    The arrays of a returned :class:`Batch` are fresh each step, except ``action_mask`` and
    ``alive``, which are constant and shared.
    """

    def __init__(
        self,
        name: str,
        envs: Sequence[gym.Env[Any, Any]],
        *,
        seed: int | None = None,
        max_episode_steps: int | None = None,
        codec: EnvStateCodec | None = None,
        obs_kind: str = "vector",
        render: bool = False,
        render_fps: int | None = None,
    ) -> None:
        """Take ownership of ``envs`` (unwrapped or with wrappers of their own).

        Args:
            name: the game's registry name, used in the spec and checked by ``set_state``.
            envs: one env per batch row, all with the same spaces.
            seed: env ``i`` is reset with ``seed + i`` on the first reset (None: random).
            max_episode_steps: truncate episodes after this many agent steps (None: never).
            codec: captures each env's simulator state; without one, ``get_state`` fails.
            obs_kind: ``"vector"`` (obs cast to float32) or ``"image"`` (uint8 ``[C, H, W]``).
            render: whether the envs were created to render ``rgb_array`` frames.
            render_fps: frames per second of rendered agent steps (default: the env's).
        """
        if not envs:
            raise GameError(f"{name}: need at least one env")
        self.envs = list(envs)
        self._seed = seed
        self._max_steps = max_episode_steps
        self._codec = codec
        self._render = render
        first = self.envs[0]
        obs_space = first.observation_space
        if not isinstance(obs_space, gym.spaces.Box):
            raise GameError(f"{name}: unsupported observation space {obs_space}; expected a Box")
        num_envs = len(self.envs)
        action_space = action_space_of(first.action_space)
        obs_dtype = np.dtype(np.uint8 if obs_kind == "image" else np.float32)
        self.spec = GameSpec(
            name=name,
            num_envs=num_envs,
            num_seats=1,
            obs_shape=tuple(int(d) for d in obs_space.shape),
            obs_dtype=obs_dtype,
            action_space=action_space,
            obs_kind=obs_kind,
            render_fps=render_fps or int(first.metadata.get("render_fps") or 30),
        )
        lives = [isinstance(env, MultiLifeEnv) for env in self.envs]
        if any(lives) and not all(lives):
            raise GameError(f"{name}: mixes multi-life envs with plain ones")
        self._multi_life = all(lives)
        self._obs = np.zeros((num_envs, 1, *self.spec.obs_shape), obs_dtype)  # [E, 1, *obs]
        self._reward = np.zeros((num_envs, 1), np.float64)  # [E, 1] learner reward
        self._raw = np.zeros((num_envs, 1), np.float64) if self._multi_life else self._reward
        self._term = np.zeros(num_envs, bool)  # [E]
        self._trunc = np.zeros(num_envs, bool)  # [E]
        self._elapsed = [0] * num_envs
        self._tracker = EpisodeTracker(num_envs, 1)
        self._alive = np.ones((num_envs, 1), bool)  # [E, 1], shared
        self._mask: np.ndarray | None = None  # bool [E, 1, n], shared
        self._low: np.ndarray | None = None
        self._high: np.ndarray | None = None
        self._num_actions = 0
        self._action_size = num_envs * int(np.prod(action_space.action_shape, dtype=np.int64))
        if isinstance(action_space, Discrete):
            self._num_actions = action_space.n
            self._mask = np.ones((num_envs, 1, action_space.n), bool)
        else:
            assert isinstance(action_space, Box)
            self._low = np.asarray(action_space.low, np.float32)
            self._high = np.asarray(action_space.high, np.float32)
        self._started = False

    # ------------------------------------------------------------------ stepping

    def reset(self, seed: int | None = None) -> Batch:
        """Start a new episode (a new game) in every env; env ``i`` gets ``seed + i``.

        Without ``seed`` the constructor's seed is used on the first reset; later resets
        without a seed continue each env's random stream.
        """
        base = seed if seed is not None else (None if self._started else self._seed)
        options = _NEW_GAME if self._multi_life else None
        for i, env in enumerate(self.envs):
            obs, _ = env.reset(seed=None if base is None else base + i, options=options)
            self._obs[i, 0] = obs
        self._elapsed = [0] * len(self.envs)
        self._tracker = EpisodeTracker(len(self.envs), 1)
        self._started = True
        num_envs = len(self.envs)
        obs = self._obs.copy()
        return Batch(
            obs=obs,
            action_mask=self._mask,
            state=None,
            reward=np.zeros((num_envs, 1), np.float32),
            terminated=np.zeros(num_envs, bool),
            truncated=np.zeros(num_envs, bool),
            alive=self._alive,
            episodes=EpisodeStats.empty(),
            final_obs=obs.copy(),
        )

    def step(self, actions: np.ndarray) -> Batch:
        """Advance every env by one agent step; ``actions`` is ``[E, 1, *action_shape]``."""
        if not self._started:
            raise GameError(f"{self.spec.name}: call reset() before step()")
        acts = self._prepare_actions(actions)
        reward, raw = self._reward, self._raw  # float64 [E, 1]; the same array unless multi-life
        term, trunc = self._term, self._trunc  # bool [E]
        term.fill(False)
        trunc.fill(False)
        obs_buf, elapsed, limit = self._obs, self._elapsed, self._max_steps or 0
        multi_life = self._multi_life
        finals: list[tuple[int, Any]] = []  # (env, last obs of its episode)
        ended: list[int] = []  # envs whose episode for the statistics (whole game) ended
        for i, env in enumerate(self.envs):
            obs, r, terminated, truncated, _ = env.step(acts[i])
            reward[i, 0] = r
            steps = elapsed[i] + 1
            if limit and steps >= limit:
                truncated = True
            lives = cast(MultiLifeEnv, env)  # read where multi_life (every env is one then)
            if multi_life:
                raw[i, 0] = lives.raw_reward
            if terminated or truncated:
                finals.append((i, obs))
                term[i] = terminated
                trunc[i] = truncated
                steps = 0
                if not multi_life:
                    ended.append(i)
                    obs, _ = env.reset()
                elif lives.game_over or truncated:
                    ended.append(i)
                    obs, _ = env.reset(options=_NEW_GAME)
                else:  # a lost life: the game goes on
                    obs, _ = env.reset()
                    if lives.ended_in_reset:
                        # its no-op and FIRE frames ended it: the game's end is this step's
                        raw[i, 0] += lives.reset_reward
                        ended.append(i)
            elapsed[i] = steps
            obs_buf[i, 0] = obs
        stats = self._tracker.update(raw, ended)
        obs_out = obs_buf.copy()
        final = obs_out.copy()
        for i, last in finals:
            final[i, 0] = last
        return Batch(
            obs=obs_out,
            action_mask=self._mask,
            state=None,
            reward=reward.astype(np.float32),
            terminated=term.copy(),
            truncated=trunc.copy(),
            alive=self._alive,
            episodes=stats,
            final_obs=final,
        )

    def _prepare_actions(self, actions: np.ndarray) -> Any:
        """Per-env actions: Python ints for Discrete, clipped float32 rows for Box."""
        arr = np.asarray(actions)
        if arr.size != self._action_size:
            space = self.spec.action_space
            raise GameError(f"{self.spec.name}: actions must be [E, 1, *{space.action_shape}] "
                            f"with E={len(self.envs)}, got shape {arr.shape}")
        if self._low is None:  # Discrete
            if arr.dtype.kind not in "iu":
                if not np.array_equal(arr, np.round(arr)):
                    raise GameError(f"{self.spec.name}: discrete actions must be integers, "
                                    f"got {arr.reshape(-1).tolist()}")
                arr = arr.astype(np.int64)
            acts = arr.reshape(-1).tolist()
            if min(acts) < 0 or max(acts) >= self._num_actions:
                raise GameError(f"{self.spec.name}: actions must be in "
                                f"[0, {self._num_actions}), got {acts}")
            return acts
        low, high = self._low, self._high
        assert high is not None
        rows = arr.reshape(self._action_size // low.size, low.size)  # [E, d]
        return np.minimum(np.maximum(rows.astype(np.float32, copy=False), low), high)

    # ------------------------------------------------------------------ state

    def get_state(self) -> dict[str, Any]:
        """Everything needed to continue bit-exactly: sims, RNGs, time limits, stats, obs."""
        if self._codec is None:
            raise GameError(f"{self.spec.name}: this game cannot capture its state")
        if not self._started:
            raise GameError(f"{self.spec.name}: call reset() before get_state()")
        return {
            "format": STATE_FORMAT,
            "name": self.spec.name,
            "num_envs": len(self.envs),
            "obs": self._obs.copy(),  # [E, 1, *obs]
            "elapsed": np.array(self._elapsed, np.int64),  # [E]
            "tracker": self._tracker.state_dict(),
            "envs": [{"rng": rng_state(env), "sim": self._codec.get(env)} for env in self.envs],
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Restore a :meth:`get_state` snapshot taken from a game built with the same options."""
        if self._codec is None:
            raise GameError(f"{self.spec.name}: this game cannot restore a state")
        if state.get("format") != STATE_FORMAT:
            raise GameError(f"{self.spec.name}: not a gym game state (format "
                            f"{state.get('format')!r}, expected {STATE_FORMAT!r})")
        if state["name"] != self.spec.name or int(state["num_envs"]) != len(self.envs):
            raise GameError(f"state is for {state['name']} x{state['num_envs']}, "
                            f"this game is {self.spec.name} x{len(self.envs)}")
        for env, env_state in zip(self.envs, state["envs"], strict=True):
            set_rng_state(env, env_state["rng"])
            self._codec.set(env, env_state["sim"])
        self._obs[...] = state["obs"]
        self._elapsed = [int(x) for x in state["elapsed"]]
        self._tracker.load_state_dict(state["tracker"])
        self._started = True

    # ------------------------------------------------------------------ misc

    @property
    def rendering(self) -> bool:
        """Whether the envs were made to render (option ``render``)."""
        return bool(self._render)

    def render(self, env_index: int = 0) -> np.ndarray:
        """An RGB frame ``uint8 [H, W, 3]`` of env ``env_index`` (needs option ``render``)."""
        if not self._render:
            raise GameError(f"{self.spec.name}: rendering is off; create the game with "
                            "options {render: true}")
        with dependency_needed(self.spec.name):  # classic control draws with pygame
            frame = self.envs[env_index].render()
        if frame is None:
            raise GameError(f"{self.spec.name}: env {env_index} returned no frame")
        return np.ascontiguousarray(frame, dtype=np.uint8)

    def close(self) -> None:
        for env in self.envs:
            env.close()


_MAKE_KEYWORDS = frozenset({"max_episode_steps", "autoreset", "apply_api_compatibility",
                            "disable_env_checker", "render_mode"})
"""keyword arguments of ``gymnasium.make`` itself (not of the env)"""


@contextlib.contextmanager
def dependency_needed(env_id: str) -> Iterator[None]:
    """gymnasium's ``DependencyNotInstalled`` (MuJoCo without ``mujoco``, a classic-control
    frame without ``pygame``) as a :class:`GameError`: its message already names the package
    and the ``pip install`` that brings it."""
    try:
        yield
    except gym.error.DependencyNotInstalled as exc:
        raise GameError(f"{env_id}: {str(exc).strip()}") from exc


def _probe(env_id: str, env: gym.Env, env_kwargs: Mapping[str, Any], seed: int | None) -> None:
    """Reset ``env`` and play one random action: a :class:`GameError` naming ``env_kwargs``
    if that fails (``g: abc`` for Pendulum failed at the first step, mid-training)."""
    try:
        env.reset(seed=seed)
        env.action_space.seed(seed)
        env.step(env.action_space.sample())
        env.reset(seed=seed)
    except Exception as exc:  # noqa: BLE001 - any failure here comes from the kwargs
        raise GameError(f"{env_id}: env_kwargs {dict(env_kwargs)} break the env "
                        f"({type(exc).__name__}: {exc})") from exc


def make_registered(env_id: str, num_envs: int, seed: int | None, *,
                    max_episode_steps: int | None, render: bool,
                    env_kwargs: Mapping[str, Any], codec: EnvStateCodec) -> GymVecGame:
    """A ``GymVecGame`` over unwrapped ``gymnasium.make(env_id)`` envs.

    The time limit (``max_episode_steps``, default: the registered one) is enforced by the
    adapter; gymnasium's checker, order-enforcing and time-limit wrappers are dropped.
    """
    if num_envs < 1:
        raise GameError(f"num_envs must be >= 1, got {num_envs}")
    if max_episode_steps is not None and max_episode_steps < 1:
        raise GameError(f"max_episode_steps must be >= 1 or null, got {max_episode_steps}")
    limit = max_episode_steps if max_episode_steps is not None else \
        gym.spec(env_id).max_episode_steps
    render_mode = "rgb_array" if render else None
    wrapping = sorted(set(env_kwargs) & _MAKE_KEYWORDS)
    if wrapping:  # gymnasium.make's own: they set wrappers, which the adapter drops
        fix = ("use game.options.max_episode_steps for the time limit"
               if "max_episode_steps" in wrapping else
               "the adapter sets them itself (rendering: game.options.render)")
        raise GameError(f"{env_id}: env_kwargs {wrapping} are gymnasium.make's own, not the "
                        f"env's; {fix}")
    try:
        with dependency_needed(env_id):
            envs = [gym.make(env_id, render_mode=render_mode, disable_env_checker=True,
                             **env_kwargs).unwrapped for _ in range(num_envs)]
    except TypeError as exc:
        raise GameError(f"{env_id}: bad env_kwargs {dict(env_kwargs)}: {exc}") from exc
    if env_kwargs:  # a value of the wrong kind fails only once the env steps: now, not mid-run
        _probe(env_id, envs[0], env_kwargs, seed)
    return GymVecGame(env_id, envs, seed=seed, max_episode_steps=limit, codec=codec,
                      render=render)
