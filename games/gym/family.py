"""The gymnasium families: classic control, MuJoCo and single-agent Atari (one seat each)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from games.family import Family


class ClassicFamily(Family):
    name = "classic"
    summary = "gymnasium classic control"
    factory = "games.gym.classic:make"
    options_type = "games.gym.classic:ClassicOptions"
    games = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1",
             "MountainCarContinuous-v0")
    aliases = {"cartpole": "CartPole-v1", "acrobot": "Acrobot-v1"}
    length_option = "max_episode_steps"


class MujocoFamily(Family):
    name = "mujoco"
    summary = "MuJoCo continuous control"
    factory = "games.gym.mujoco:make"
    options_type = "games.gym.mujoco:MujocoOptions"
    games = ("HalfCheetah-v5", "Hopper-v5", "Walker2d-v5", "Ant-v5", "Humanoid-v5",
             "HumanoidStandup-v5", "Swimmer-v5", "Reacher-v5", "Pusher-v5",
             "InvertedPendulum-v5", "InvertedDoublePendulum-v5")
    aliases = {"halfcheetah": "HalfCheetah-v5", "hopper": "Hopper-v5"}
    length_option = "max_episode_steps"


class AtariFamily(Family):
    name = "atari"
    summary = "single-agent Atari through ale-py, e.g. atari/Pong, atari/Breakout"
    factory = "games.gym.atari:make"
    options_type = "games.gym.atari:AtariOptions"
    prefix = "atari"

    def prefixed_games(self) -> list[str]:
        """The single-player games bundled with the installed ale-py."""
        try:
            from games.ale_roms import single_player_games

            return sorted(single_player_games().values())
        except ImportError:  # not installed, or an install that does not load
            return []

    def observation_settings(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """The preprocessing of the observations (frames per step, frames stacked, their size)
        and the action set."""
        from games.gym.atari import AtariOptions
        from games.options import from_mapping

        opts = from_mapping(AtariOptions, options, "game.options.")
        return {key: getattr(opts, key)
                for key in ("frame_skip", "frame_stack", "screen_size", "full_action_space")}


FAMILIES = (ClassicFamily(), MujocoFamily(), AtariFamily())
