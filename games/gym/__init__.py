"""Single-agent gymnasium games (classic control, MuJoCo, Atari) as ``VecGame`` adapters."""

from games.gym.adapter import GymVecGame, MultiLifeEnv

__all__ = ["GymVecGame", "MultiLifeEnv"]
