"""The board games family (tic-tac-toe): two seats, NumPy bots that act through seat 1."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from games.family import SeatBotsFamily
from games.matches import GameFactory


def _bots() -> dict[str, Callable[..., np.ndarray]]:
    from games.boardgames.bots import random_legal, win_or_block

    return {"random": lambda obs, mask, rng: random_legal(mask, rng),
            "win_or_block": win_or_block}


class BoardGamesFamily(SeatBotsFamily):
    name = "boardgames"
    summary = "vectorized numpy tic-tac-toe, two seats, zero-sum (fast test game)"
    factory = "games.boardgames:make"
    options_type = "games.boardgames.tictactoe:TicTacToeOptions"
    games = ("tictactoe",)
    two_player = True

    def seat_bots(self) -> Mapping[str, Callable[..., np.ndarray]]:
        return _bots()

    def match_games(self, game: str, options: Mapping[str, Any],
                    map_name: str | None = None) -> GameFactory:
        """Tournament games: seat 0 opens every one, so the seat a match gives a player (its
        side, which tournaments alternate between the two) is whether it moves first; the
        default alternation by env and game let one player open both games of a pair."""
        return super().match_games(game, {**options, "first_player": "seat0"}, map_name)


FAMILIES = (BoardGamesFamily(),)
