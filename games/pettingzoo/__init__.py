"""Two-player PettingZoo Atari games (``pettingzoo/pong_v3``, ``pettingzoo/boxing_v2``, ...).

See :mod:`games.pettingzoo.adapter` for the observation layout, preprocessing and statistics,
:class:`PettingZooAtariOptions` for the options, :func:`two_player_games` for the names and
:func:`builtin_opponent_games` for the games whose console can play seat 1 itself. Importing
this package imports neither PettingZoo nor ale-py (the registry reads the family without them).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from games.pettingzoo.adapter import PettingZooAtari, make
    from games.pettingzoo.catalog import builtin_opponent_games, two_player_games
    from games.pettingzoo.options import PettingZooAtariOptions

__all__ = ["PettingZooAtari", "PettingZooAtariOptions", "builtin_opponent_games", "make",
           "two_player_games"]
_LAZY = {"PettingZooAtari": "adapter", "make": "adapter", "builtin_opponent_games": "catalog",
         "two_player_games": "catalog", "PettingZooAtariOptions": "options"}


def __getattr__(attr: str) -> Any:
    if attr in _LAZY:
        return getattr(importlib.import_module(f"games.pettingzoo.{_LAZY[attr]}"), attr)
    raise AttributeError(f"module 'games.pettingzoo' has no attribute {attr!r}")
