"""The board games family (tic-tac-toe): two seats, NumPy bots that act through seat 1."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from games.core import VecGame
from games.family import SeatBotsFamily, Teachers


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

    def teacher_game(self, game: str, teachers: Teachers, num_envs: int, seed: int,
                     options: Mapping[str, Any]) -> VecGame:
        from games.boardgames.teachers import teacher_game

        return teacher_game(game, teachers, num_envs, seed, options, _bots())


FAMILIES = (BoardGamesFamily(),)
