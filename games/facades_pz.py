"""PettingZoo view of a :class:`games.core.VecGame`: :class:`ParallelEnvFacade`.

Wraps a game with ``num_envs == 1`` as a ``pettingzoo.ParallelEnv`` so that outside tools
(PettingZoo's API tests, other libraries' trainers, notebooks) can drive our games.

* Agents are ``"seat_0"``, ``"seat_1"``, ...; all of them stay in ``agents`` until the episode
  ends (PettingZoo's parallel API expects every live agent to act each step). In turn-based
  games a seat that is not ``alive`` this step still gets its observation, its action is ignored
  and may be left out of the action dict; ``infos[agent]["alive"]`` says who acts next.
* With an action mask, an observation is ``{"observation": obs, "action_mask": int8 mask}``
  (PettingZoo's convention for classic games); without one it is the plain array.
* When the episode ends every agent is removed and the last observation is returned (its
  ``action_mask`` all zeros). The facade never autoresets: call :meth:`reset` again, which, with
  no ``seed``, continues into the game's own next episode (the game autoresets internally, so
  e.g. the first player keeps alternating); ``reset(seed=...)`` re-seeds the game.
* :meth:`state` returns the global state of every seat, ``[A, *state_shape]``.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from pettingzoo import ParallelEnv

from games.core import (
    Batch,
    GameError,
    SupportsFinalFrame,
    SupportsRender,
    VecGame,
    can_render,
)
from games.gym_spaces import action_array, gym_action_space


def _array_box(shape: tuple[int, ...], dtype: np.dtype) -> gymnasium.spaces.Box:
    """An unbounded (or dtype-bounded) Box for arrays of ``shape`` and ``dtype``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return gymnasium.spaces.Box(int(info.min), int(info.max), shape, dtype)
    if dtype.kind == "b":
        return gymnasium.spaces.Box(0, 1, shape, np.int8)
    return gymnasium.spaces.Box(-np.inf, np.inf, shape, dtype)


class ParallelEnvFacade(ParallelEnv[str, Any, Any]):
    """A one-env :class:`VecGame` as a PettingZoo ``ParallelEnv`` (see the module docstring)."""

    def __init__(self, game: VecGame, render_mode: str | None = "auto") -> None:
        """``render_mode``: ``"rgb_array"``, ``None``, or ``"auto"`` (``"rgb_array"`` when the
        game can render)."""
        spec = game.spec
        if spec.num_envs != 1:
            raise GameError(f"ParallelEnvFacade needs a game with num_envs=1, got "
                            f"{spec.num_envs}; build it with make_game(name, num_envs=1)")
        renders = can_render(game)  # a gymnasium game made without the render option: no
        if render_mode == "auto":
            render_mode = "rgb_array" if renders else None
        if render_mode not in (None, "rgb_array") or (render_mode and not renders):
            hint = ("; create it with options {render: true}"
                    if isinstance(game, SupportsRender) and not renders else "")
            raise GameError(f"render_mode {render_mode!r} is not supported by {spec.name!r} "
                            f"as made (supported: {['rgb_array'] if renders else []}{hint})")
        self.game = game
        self.render_mode = render_mode
        self.metadata = {"name": spec.name, "render_modes": ["rgb_array"] if renders else [],
                         "render_fps": spec.render_fps, "is_parallelizable": True}
        self.possible_agents = [f"seat_{i}" for i in range(spec.num_seats)]
        self.agents: list[str] = []
        obs_box = _array_box(spec.obs_shape, spec.obs_dtype)
        self._obs_dtype = obs_box.dtype
        self._has_mask = spec.has_mask
        self._mask_shape = spec.action_space.mask_shape
        self.observation_spaces: dict[str, gymnasium.spaces.Space[Any]] = {}
        self.action_spaces: dict[str, gymnasium.spaces.Space[Any]] = {}
        for agent in self.possible_agents:
            if self._has_mask:
                mask_box = gymnasium.spaces.Box(0, 1, self._mask_shape, np.int8)
                self.observation_spaces[agent] = gymnasium.spaces.Dict(
                    {"observation": obs_box, "action_mask": mask_box})
            else:
                self.observation_spaces[agent] = obs_box
            self.action_spaces[agent] = gym_action_space(spec.action_space)
        sample = self.action_spaces[self.possible_agents[0]]
        self._action_shape = spec.action_space.action_shape
        self._action_dtype = sample.dtype if sample.dtype is not None else np.dtype(np.int64)
        self.state_space: gymnasium.spaces.Box | None = None
        if spec.state_shape is not None:
            self.state_space = _array_box((spec.num_seats, *spec.state_shape), spec.state_dtype)
        self._alive = np.zeros(spec.num_seats, bool)  # [A]
        self._state: np.ndarray | None = None  # [A, *state_shape]
        self._next: Batch | None = None  # the game's autoreset batch, held after an episode

    # ----------------------------------------------------------------------- spaces

    def observation_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        return self.observation_spaces[agent]

    def action_space(self, agent: str) -> gymnasium.spaces.Space[Any]:
        return self.action_spaces[agent]

    # ----------------------------------------------------------------------- API

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Start an episode; ``options`` are ignored (game options are fixed at construction)."""
        if seed is not None:
            for i, agent in enumerate(self.possible_agents):
                self.action_spaces[agent].seed(seed + i)
        if seed is None and self._next is not None and not self.agents:
            batch = self._next  # the game already started its next episode
        else:
            batch = self.game.reset(seed=seed)
        self._next = None
        self.agents = list(self.possible_agents)
        self._alive = batch.alive[0].copy()
        self._state = None if batch.state is None else batch.state[0].copy()
        obs = self._observations(batch.obs[0], batch.action_mask)
        infos = {agent: {"alive": bool(self._alive[i])}
                 for i, agent in enumerate(self.possible_agents)}
        return obs, infos

    def step(self, actions: dict[str, Any]) -> tuple[
            dict[str, Any], dict[str, float], dict[str, bool], dict[str, bool],
            dict[str, dict[str, Any]]]:
        """Advance one step; actions of seats that are not alive may be omitted."""
        if not self.agents:
            raise GameError("the episode is over; call reset() before step()")
        unknown = sorted(set(actions) - set(self.possible_agents))
        if unknown:
            raise GameError(f"unknown agents {unknown}; agents are {self.possible_agents}")
        acts = np.zeros((1, len(self.possible_agents), *self._action_shape), self._action_dtype)
        for i, agent in enumerate(self.possible_agents):
            action = actions.get(agent)
            if action is not None:
                acts[0, i] = action_array(action, self._action_dtype, self._action_shape)
            elif self._alive[i]:
                raise GameError(f"{agent} is to act this step but got no action")
        batch = self.game.step(acts)
        done = bool(batch.terminated[0] or batch.truncated[0])
        infos: dict[str, dict[str, Any]] = {}
        if done:
            final_obs = batch.obs if batch.final_obs is None else batch.final_obs
            final_state = batch.state if batch.final_state is None else batch.final_state
            mask = None if batch.action_mask is None else np.zeros_like(batch.action_mask)
            obs = self._observations(final_obs[0], mask)
            self._state = None if final_state is None else final_state[0].copy()
            self._alive = np.zeros_like(self._alive)
            self._next = batch
            self.agents = []
            ep = batch.episodes
            for k in np.flatnonzero(ep.env == 0):
                infos[self.possible_agents[int(ep.seat[k])]] = {
                    "alive": False, "outcome": int(ep.outcome[k]),
                    "episode_return": float(ep.ret[k]), "episode_length": int(ep.length[k])}
        else:
            obs = self._observations(batch.obs[0], batch.action_mask)
            self._state = None if batch.state is None else batch.state[0].copy()
            self._alive = batch.alive[0].copy()
        for i, agent in enumerate(self.possible_agents):
            infos.setdefault(agent, {"alive": bool(self._alive[i])})
        rewards = {agent: float(batch.reward[0, i]) for i, agent in enumerate(self.possible_agents)}
        terminations = {agent: bool(batch.terminated[0]) for agent in self.possible_agents}
        truncations = {agent: bool(batch.truncated[0]) for agent in self.possible_agents}
        return obs, rewards, terminations, truncations, infos

    def state(self) -> np.ndarray:
        """Global state ``[A, *state_shape]`` (each seat's view), of the final position once
        the episode is over."""
        if self.state_space is None:
            raise NotImplementedError(f"game {self.game.spec.name!r} has no global state")
        if self._state is None:
            raise GameError("call reset() before state()")
        return self._state.astype(self.state_space.dtype, copy=True)

    def render(self) -> np.ndarray | None:
        """An RGB frame ``uint8 [H, W, 3]``; the final position once the episode is over
        (when the game provides ``render_final``)."""
        if self.render_mode is None:
            gymnasium.logger.warn("render() called with render_mode=None; "
                                  "build the facade with render_mode='rgb_array'")
            return None
        if self._next is not None and isinstance(self.game, SupportsFinalFrame):
            return np.asarray(self.game.render_final(0))
        if not isinstance(self.game, SupportsRender):
            raise GameError(f"{self.game.spec.name} cannot render")
        return np.asarray(self.game.render(0))

    def close(self) -> None:
        self.game.close()

    # ----------------------------------------------------------------------- internals

    def _observations(self, obs: np.ndarray, mask: np.ndarray | None) -> dict[str, Any]:
        """Per-agent observations from ``obs [A, ...]`` and the batch mask ``[1, A, ...]``."""
        out: dict[str, Any] = {}
        for i, agent in enumerate(self.possible_agents):
            agent_obs = np.array(obs[i], self._obs_dtype)  # a copy: games reuse their arrays
            if self._has_mask:
                agent_mask = (np.ones(self._mask_shape, np.int8) if mask is None
                              else mask[0, i].astype(np.int8))
                out[agent] = {"observation": agent_obs, "action_mask": agent_mask}
            else:
                out[agent] = agent_obs
        return out


def make_parallel_env(name: str, seed: int | None = None, render_mode: str | None = "auto",
                      **options: Any) -> ParallelEnvFacade:
    """``make_parallel_env("tictactoe", seed=0)``: a registered game as a PettingZoo env
    (made with the ``render`` option when ``render_mode`` is ``"rgb_array"``)."""
    from games.registry import make_game

    if render_mode == "rgb_array":
        options = {"render": True, **options}
    return ParallelEnvFacade(make_game(name, num_envs=1, seed=seed, options=options),
                             render_mode=render_mode)
