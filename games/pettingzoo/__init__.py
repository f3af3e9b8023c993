"""Two-player PettingZoo Atari games (``pettingzoo/pong_v3``, ``pettingzoo/boxing_v2``, ...).

See :mod:`games.pettingzoo.adapter` for the observation layout, preprocessing and statistics,
:class:`PettingZooAtariOptions` for the options, :func:`two_player_games` for the names and
:func:`builtin_opponent_games` for the games whose console can play seat 1 itself.
"""

from games.pettingzoo.adapter import PettingZooAtari, make
from games.pettingzoo.catalog import builtin_opponent_games, two_player_games
from games.pettingzoo.options import PettingZooAtariOptions

__all__ = ["PettingZooAtari", "PettingZooAtariOptions", "builtin_opponent_games", "make",
           "two_player_games"]
