"""Gymnasium classic control (CartPole, Acrobot, MountainCar, Pendulum) as a ``GymVecGame``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from games.core import GameError
from games.gym.adapter import GymVecGame, make_registered
from games.options import from_mapping

GAMES = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1",
         "MountainCarContinuous-v0")

# Python-level attributes that make up a classic-control env's dynamic state.
_STATE_ATTRS = ("state", "steps_beyond_terminated", "last_u")


@dataclass
class ClassicOptions:
    """Options of the classic-control games (``game.options`` in a config)."""

    max_episode_steps: int | None = None
    """Truncate episodes after this many steps; None keeps gymnasium's registered limit."""
    render: bool = False
    """Create the envs with ``render_mode="rgb_array"`` (needs pygame) so ``render()`` works."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for ``gymnasium.make`` (e.g. ``sutton_barto_reward``)."""


def _encode(value: Any) -> Any:
    """Plain-data form of an attribute value (arrays, tuples of floats, scalars, None)."""
    if isinstance(value, np.ndarray):
        return {"array": value.copy()}
    if isinstance(value, tuple):
        return {"tuple": np.asarray(value)}
    if isinstance(value, np.generic):
        return {"scalar": np.asarray(value)}
    if value is None or isinstance(value, bool | int | float):
        return value
    raise GameError(f"cannot capture classic-control state value of type {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, Mapping):
        if "array" in value:
            return np.array(value["array"])
        if "tuple" in value:
            return tuple(np.asarray(value["tuple"]))  # numpy scalars, as the env stores them
        return np.asarray(value["scalar"])[()]
    return value


class ClassicCodec:
    """State of a classic-control env: its ``state`` and bookkeeping attributes."""

    def get(self, env: gym.Env[Any, Any]) -> dict[str, Any]:
        core = env.unwrapped
        return {k: _encode(getattr(core, k)) for k in _STATE_ATTRS if hasattr(core, k)}

    def set(self, env: gym.Env[Any, Any], state: Mapping[str, Any]) -> None:
        core = env.unwrapped
        for key, value in state.items():
            if key not in _STATE_ATTRS:
                raise GameError(f"unexpected classic-control state key {key!r}")
            setattr(core, key, _decode(value))


def make(name: str, num_envs: int = 1, seed: int | None = None,
         **options: Any) -> GymVecGame:
    """``num_envs`` copies of a classic-control env, e.g. ``make("CartPole-v1", 8, seed=1)``."""
    canonical = {g.lower(): g for g in GAMES}.get(name.lower())
    if canonical is None:
        raise GameError(f"unknown classic-control game {name!r}; known: {', '.join(GAMES)}")
    opts = from_mapping(ClassicOptions, options, where="game.options.")
    return make_registered(canonical, num_envs, seed, max_episode_steps=opts.max_episode_steps,
                           render=opts.render, env_kwargs=opts.env_kwargs, codec=ClassicCodec())
