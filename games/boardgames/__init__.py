"""Small board games implemented directly in numpy (registry family ``boardgames``).

``tictactoe`` is the project's fast two-seat zero-sum test game; :mod:`games.boardgames.bots`
holds scripted opponents for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from games.boardgames.tictactoe import TicTacToe, TicTacToeOptions
from games.boardgames.tictactoe import make as make_tictactoe
from games.core import GameError, VecGame

GAMES: dict[str, Callable[..., VecGame]] = {"tictactoe": make_tictactoe}

__all__ = ["GAMES", "TicTacToe", "TicTacToeOptions", "make"]


def make(name: str, num_envs: int = 1, seed: int | None = None, **options: Any) -> VecGame:
    """Registry factory for every board game: ``make("tictactoe", num_envs=..., seed=...)``."""
    key = name.lower().removeprefix("boardgames/")
    if key not in GAMES:
        raise GameError(f"unknown board game {name!r}; known: {', '.join(sorted(GAMES))}")
    return GAMES[key](key, num_envs=num_envs, seed=seed, **options)
