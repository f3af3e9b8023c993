"""The board games family (tic-tac-toe): two seats, NumPy bots that act through seat 1."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from games.family import SeatBotsFamily
from games.matches import MatchSetup


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

    def match_setup(self, game: str, bot: str | None, num_envs: int, seed: int,
                    map_name: str | None = None) -> MatchSetup:
        """Seat 0 opens every match game, so the seat a player takes decides whether it moves
        first: `play` and tournaments alternate seats, and so first moves (the default drew
        the opener of each env's first game at random: a checkpoint opened 11 of 16)."""
        setup = super().match_setup(game, bot, num_envs, seed, map_name)
        return replace(setup, options={**setup.options, "first_player": "seat0"})


FAMILIES = (BoardGamesFamily(),)
