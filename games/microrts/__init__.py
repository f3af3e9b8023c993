"""microRTS through its Java engine (JPype): a batched, per-seat, action-masked VecGame.

Importing this package starts nothing; :func:`make` fetches the engine on first use and starts
the JVM (one per process). ``setup()`` does the same ahead of time (``selfplay setup microrts``).
See :mod:`games.microrts.adapter` for the observation/action/seat conventions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from games.microrts.engine import ensure_engine, find_java, setup, start_jvm

if TYPE_CHECKING:
    from games.microrts.adapter import MicroRTSOptions, MicroRTSVecGame

__all__ = ["MicroRTSOptions", "MicroRTSVecGame", "ensure_engine", "find_java", "make", "setup",
           "start_jvm"]


def make(name: str = "microrts", num_envs: int = 1, seed: int | None = None,
         **options: Any) -> MicroRTSVecGame:
    """The registry factory: ``num_envs`` environments configured by ``options``
    (keys of :class:`~games.microrts.adapter.MicroRTSOptions`; an unknown key is an error)."""
    from games.microrts.adapter import MicroRTSOptions, MicroRTSVecGame
    from games.options import from_mapping

    opts = from_mapping(MicroRTSOptions, options, "game.options.")
    return MicroRTSVecGame(opts, num_envs=num_envs, seed=seed, name=name)


def __getattr__(attr: str) -> Any:
    if attr in ("MicroRTSOptions", "MicroRTSVecGame"):
        from games.microrts import adapter

        return getattr(adapter, attr)
    raise AttributeError(f"module 'games.microrts' has no attribute {attr!r}")
