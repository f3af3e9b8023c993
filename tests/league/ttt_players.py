"""Tic-tac-toe players for the league tests (importable from a subprocess)."""

from __future__ import annotations

import numpy as np

from games.boardgames import make
from games.boardgames.bots import random_legal, win_or_block
from games.core import VecGame


class BotPolicy:
    """A scripted tic-tac-toe bot as a league policy."""

    def __init__(self, name: str, seed: int = 0) -> None:
        self.name = name
        self.rng = np.random.default_rng(seed)

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        assert mask is not None
        if self.name == "random_legal":
            return random_legal(mask, self.rng)
        if self.name == "first_legal":
            return np.asarray(mask, bool).argmax(axis=-1).astype(np.int64)
        return win_or_block(obs, mask, self.rng)


BOTS = ("random_legal", "win_or_block", "first_legal")


def policy_factory(name: str) -> BotPolicy:
    if name not in BOTS:
        raise FileNotFoundError(f"no such bot {name!r}")
    return BotPolicy(name, seed=BOTS.index(name))


def game_factory(num_envs: int, seed: int) -> VecGame:
    return make("tictactoe", num_envs=num_envs, seed=seed)
