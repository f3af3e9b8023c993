"""``GymEnvFacade``: a single-env, single-seat :class:`~games.core.VecGame` as a ``gymnasium.Env``.

Lets gymnasium tooling (``check_env``, wrappers, other libraries' trainers) drive any of our
games. The action mask of a discrete game is passed in ``info["action_mask"]``; finished
episodes add ``info["game_episode"] = {"r": raw return, "l": length}`` (``"episode"`` is
gymnasium's ``RecordEpisodeStatistics``' key, which refuses to find it taken). The mask is int8,
as gymnasium's ``Discrete.sample(mask=...)`` takes it; the step that ends an episode returns its
last observation with an all-zero mask (nothing is played from it).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from games.core import Batch, Box, GameError, SupportsRender, VecGame, can_render
from games.gym_spaces import action_array, gym_action_space


def observation_space_of(game: VecGame) -> gym.spaces.Box:
    """A Box over one seat's observation: ``[0, 255]`` for uint8 images, unbounded otherwise."""
    spec = game.spec
    if spec.obs_dtype == np.uint8:
        return gym.spaces.Box(0, 255, spec.obs_shape, np.uint8)
    return gym.spaces.Box(-np.inf, np.inf, spec.obs_shape, spec.obs_dtype.type)


class GymEnvFacade(gym.Env[np.ndarray, Any]):
    """One environment of a one-seat ``VecGame`` behind the gymnasium ``Env`` API.

    The game must have ``num_envs == 1`` and ``num_seats == 1``. The game resets itself when an
    episode ends; the facade returns that episode's last observation from ``step`` and hands out
    the already-started next episode on the following ``reset()`` (a ``reset(seed=...)`` resets
    the game again, deterministically). Observations and masks are copies: games reuse their
    arrays, and gymnasium's users keep what they are given.
    """

    metadata: dict[str, Any] = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, game: VecGame, render_mode: str | None = None) -> None:
        spec = game.spec
        if spec.num_envs != 1 or spec.num_seats != 1:
            raise GameError(f"GymEnvFacade needs a game with one env and one seat, "
                            f"got {spec.name} with {spec.num_envs} envs x {spec.num_seats} seats")
        if render_mode not in (None, "rgb_array"):
            raise GameError(f"unsupported render_mode {render_mode!r}; use 'rgb_array' or None")
        if render_mode == "rgb_array" and not can_render(game):
            raise GameError(f"render_mode 'rgb_array': {spec.name} draws no frames as made "
                            "(create it with options {render: true})")
        self.game = game
        self.render_mode = render_mode
        self.metadata = {"render_modes": ["rgb_array"], "render_fps": spec.render_fps}
        self.observation_space = observation_space_of(game)
        self.action_space = gym_action_space(game.spec.action_space)
        self._action_shape = (1, 1, *spec.action_space.action_shape)
        self._action_dtype = np.float32 if isinstance(spec.action_space, Box) else np.int64
        self._next: Batch | None = None  # the started next episode after an autoreset

    def reset(self, *, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is None and self._next is not None:
            batch = self._next
        else:
            batch = self.game.reset(seed=seed)
        self._next = None
        return batch.obs[0, 0].copy(), self._info(batch)

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        actions = action_array(action, self._action_dtype, self._action_shape)
        batch = self.game.step(actions)
        terminated = bool(batch.terminated[0])
        truncated = bool(batch.truncated[0])
        info = self._info(batch)
        obs = batch.obs[0, 0]
        self._next = None  # a step past an episode's end (no reset) plays the next one
        if terminated or truncated:
            self._next = batch
            if batch.final_obs is not None:
                obs = batch.final_obs[0, 0]
            if "action_mask" in info:  # the mask is the next episode's first position's
                info["action_mask"] = np.zeros_like(info["action_mask"])
        obs = obs.copy()  # games reuse their arrays; gym users keep what they are given
        if len(batch.episodes.env):
            info["game_episode"] = {"r": float(batch.episodes.ret[0]),
                                    "l": int(batch.episodes.length[0])}
        return obs, float(batch.reward[0, 0]), terminated, truncated, info

    def _info(self, batch: Batch) -> dict[str, Any]:
        if batch.action_mask is None:
            return {}
        return {"action_mask": batch.action_mask[0, 0].astype(np.int8)}

    def render(self) -> np.ndarray | None:  # type: ignore[override]
        if self.render_mode is None:
            return None
        if not isinstance(self.game, SupportsRender):  # refused when made: never here
            raise GameError(f"{self.game.spec.name} cannot render")
        return np.asarray(self.game.render(0))

    def close(self) -> None:
        self.game.close()
