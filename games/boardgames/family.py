"""The board games family (tic-tac-toe): two seats, NumPy bots that act through seat 1."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from games.family import SeatBotsFamily


def _bots() -> dict[str, Callable[..., np.ndarray]]:
    from games.boardgames.bots import random_legal, win_or_block

    return {"random": lambda obs, mask, rng: random_legal(mask, rng),
            "win_or_block": win_or_block}


class BoardGamesFamily(SeatBotsFamily):
    name = "boardgames"
    summary = "vectorized numpy tic-tac-toe, two seats, zero-sum (fast test game)"
    factory = "games.boardgames:make"
    games = ("tictactoe",)
    two_player = True

    def seat_bots(self) -> Mapping[str, Callable[..., np.ndarray]]:
        return _bots()


FAMILIES = (BoardGamesFamily(),)
