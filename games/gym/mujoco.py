"""Gymnasium MuJoCo locomotion and manipulation envs (``HalfCheetah-v5``, ...) as a ``GymVecGame``.

Observations are float32 and unnormalized; rewards are raw (normalization is the learner's job).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from games.core import GameError
from games.gym.adapter import GymVecGame, make_registered
from games.options import from_mapping

GAMES = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5",
         "HumanoidStandup-v5", "Swimmer-v5", "Reacher-v5", "Pusher-v5",
         "InvertedPendulum-v5", "InvertedDoublePendulum-v5")

# Quantities that mj_step derives from the state and that env code may read *before* the next
# mj_step (e.g. Ant's x position before the step comes from ``xpos``, Humanoid's centre of
# mass from ``xipos``, Reacher's and Pusher's rewards from ``xpos``). After mj_step they still
# describe the state before the last substep, so they are saved rather than recomputed.
_DERIVED = ("xpos", "xquat", "xmat", "xipos", "ximat", "xanchor", "xaxis", "geom_xpos",
            "geom_xmat", "site_xpos", "site_xmat", "subtree_com", "cinert", "cvel", "cdof",
            "cacc", "cfrc_int", "cfrc_ext", "qfrc_actuator", "actuator_force",
            "actuator_length", "actuator_velocity", "sensordata")


@dataclass
class MujocoOptions:
    """Options of the MuJoCo games (``game.options`` in a config)."""

    max_episode_steps: int | None = None
    """Truncate episodes after this many steps; None keeps gymnasium's limit (1000 mostly)."""
    render: bool = False
    """Create the envs with ``render_mode="rgb_array"``; uses EGL when no display is set."""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra keyword arguments for ``gymnasium.make`` (e.g. ``ctrl_cost_weight``)."""


class MujocoCodec:
    """State of a MuJoCo env: the full integration state (``mj_getState``) plus derived arrays.

    ``mjSTATE_INTEGRATION`` covers time, qpos, qvel, act, warm-start accelerations, controls,
    applied forces and mocap poses: everything ``mj_step`` reads.
    """

    def get(self, env: gym.Env[Any, Any]) -> dict[str, Any]:
        import mujoco

        core = env.unwrapped
        model, data = core.model, core.data  # type: ignore[attr-defined]
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        full = np.empty(mujoco.mj_stateSize(model, spec), np.float64)
        mujoco.mj_getState(model, data, full, spec)
        derived = {k: np.array(getattr(data, k)) for k in _DERIVED if getattr(data, k).size}
        return {"integration": full, "derived": derived}

    def set(self, env: gym.Env[Any, Any], state: Mapping[str, Any]) -> None:
        import mujoco

        core = env.unwrapped
        model, data = core.model, core.data  # type: ignore[attr-defined]
        full = np.asarray(state["integration"], np.float64)
        spec = mujoco.mjtState.mjSTATE_INTEGRATION
        if full.shape != (mujoco.mj_stateSize(model, spec),):
            raise GameError(f"MuJoCo state of size {full.shape} does not fit this model")
        mujoco.mj_setState(model, data, full, spec)
        for key, value in state["derived"].items():
            if key not in _DERIVED:
                raise GameError(f"unexpected MuJoCo state key {key!r}")
            getattr(data, key)[...] = value


_WARNED: set[str] = set()


def _warn_once(message: str) -> None:
    """MuJoCo's warnings on stderr, each kind once per process (numbers aside: an
    instability warning names the time and the degree of freedom)."""
    text = message.strip()
    kind = re.sub(r"[-+]?\d[\d.eE+-]*", "#", text)
    if kind not in _WARNED:
        _WARNED.add(kind)
        print(f"warning: MuJoCo: {text}", file=sys.stderr, flush=True)


def warnings_to_stderr() -> None:
    """Send MuJoCo's warnings to stderr (once each) unless a handler is set: MuJoCo appends
    them to a MUJOCO_LOG.TXT file in the working folder (HalfCheetah's model, every env)."""
    import mujoco

    if mujoco.get_mju_user_warning() is None:
        mujoco.set_mju_user_warning(_warn_once)


def make(name: str, num_envs: int = 1, seed: int | None = None,
         **options: Any) -> GymVecGame:
    """``num_envs`` copies of a MuJoCo env, e.g. ``make("HalfCheetah-v5", 1, seed=0)``."""
    canonical = {g.lower(): g for g in GAMES}.get(name.lower())
    if canonical is None:
        raise GameError(f"unknown MuJoCo game {name!r}; known: {', '.join(GAMES)}")
    warnings_to_stderr()
    opts = from_mapping(MujocoOptions, options, where="game.options.")
    if opts.render and "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
        os.environ["MUJOCO_GL"] = "egl"  # headless: the default GLFW backend needs a display
    return make_registered(canonical, num_envs, seed, max_episode_steps=opts.max_episode_steps,
                           render=opts.render, env_kwargs=opts.env_kwargs, codec=MujocoCodec())
