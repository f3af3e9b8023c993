"""microRTS through its Java engine (JPype): a batched, per-seat, action-masked VecGame.

Importing this package starts nothing; :func:`make` fetches the engine on first use and starts
the JVM (one per process). ``setup()`` does the same ahead of time (``selfplay setup microrts``).
See :mod:`games.microrts.adapter` for the observation/action/seat conventions and
:mod:`games.microrts.botmatch` for bot-vs-bot games (tournaments of the shipped bots).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from games.microrts.engine import ensure_engine, find_java, setup, start_jvm

if TYPE_CHECKING:
    from games.microrts.adapter import MicroRTSOptions, MicroRTSVecGame, random_legal_actions
    from games.microrts.botmatch import (
        BotGame,
        BotGameResult,
        play_bot_games,
        play_bots,
        round_robin,
    )
    from games.microrts.mixed_sizes import MixedSizeGame
    from games.microrts.workers import MicroRTSWorkers

__all__ = ["BotGame", "BotGameResult", "MicroRTSOptions", "MicroRTSVecGame", "MicroRTSWorkers",
           "MixedSizeGame", "ensure_engine", "find_java", "make", "play_bot_games", "play_bots",
           "random_legal_actions", "round_robin", "setup", "start_jvm"]
_LAZY = {"MicroRTSOptions": "adapter", "MicroRTSVecGame": "adapter",
         "random_legal_actions": "adapter", "BotGame": "botmatch", "BotGameResult": "botmatch",
         "play_bot_games": "botmatch", "play_bots": "botmatch", "round_robin": "botmatch",
         "MicroRTSWorkers": "workers", "MixedSizeGame": "mixed_sizes"}


def make(name: str = "microrts", num_envs: int = 1, seed: int | None = None,
         **options: Any) -> MicroRTSVecGame | MixedSizeGame | MicroRTSWorkers:
    """The registry factory: ``num_envs`` environments configured by ``options``
    (keys of :class:`~games.microrts.options.MicroRTSOptions`; an unknown key is an error)."""
    from games.microrts.adapter import MicroRTSOptions
    from games.microrts.mixed_sizes import vec_game
    from games.options import from_mapping

    opts = from_mapping(MicroRTSOptions, options, "game.options.")
    if opts.workers > 1 and num_envs > 1:
        from games.microrts.workers import MicroRTSWorkers

        return MicroRTSWorkers(opts, num_envs=num_envs, seed=seed, name=name)
    return vec_game(opts, num_envs=num_envs, seed=seed, name=name)


def __getattr__(attr: str) -> Any:
    if attr in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"games.microrts.{_LAZY[attr]}"), attr)
    raise AttributeError(f"module 'games.microrts' has no attribute {attr!r}")
