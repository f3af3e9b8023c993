"""The board games family (tic-tac-toe): two seats, NumPy bots that act through seat 1."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from games.core import GameError, ScriptedPolicy, VecGame
from games.family import Family, Teachers
from games.matches import MatchSetup


def _bots() -> dict[str, Callable[..., np.ndarray]]:
    from games.boardgames.bots import random_legal, win_or_block

    return {"random": lambda obs, mask, rng: random_legal(mask, rng),
            "win_or_block": win_or_block}


class BoardGamesFamily(Family):
    name = "boardgames"
    summary = "vectorized numpy tic-tac-toe, two seats, zero-sum (fast test game)"
    factory = "games.boardgames:make"
    games = ("tictactoe",)
    two_player = True

    def bot_names(self, game: str) -> list[str]:
        return sorted(_bots())

    def scripted(self, game: str, bot: str, seed: int) -> MatchSetup:
        bots = _bots()
        key = bot.lower()
        if key not in bots:
            raise GameError(f"unknown {game} bot {bot!r}; known: {', '.join(sorted(bots))}")
        return MatchSetup({}, ScriptedPolicy(key, bots[key], seed), key)

    def teacher_game(self, game: str, teachers: Teachers, num_envs: int, seed: int,
                     options: Mapping[str, Any]) -> VecGame:
        from games.boardgames.teachers import teacher_game

        return teacher_game(game, teachers, num_envs, seed, options, _bots())


FAMILIES = (BoardGamesFamily(),)
