"""Two-player PettingZoo Atari games (``pettingzoo/pong_v3``, ``pettingzoo/boxing_v2``, ...).

See :mod:`games.pettingzoo.adapter` for the observation layout, preprocessing and statistics,
:class:`PettingZooAtariOptions` for the options and :func:`two_player_games` for the names.
"""

from games.pettingzoo.adapter import PettingZooAtari, make
from games.pettingzoo.catalog import two_player_games
from games.pettingzoo.options import PettingZooAtariOptions

__all__ = ["PettingZooAtari", "PettingZooAtariOptions", "make", "two_player_games"]
