"""Tic-tac-toe played by its scripted bots: the teacher game of live behaviour cloning.

Every seat of every env is played by one of the named bots (all ordered pairs of them spread
over the envs, so each bot plays both sides and every opponent); after each ``reset`` and
``step`` the bots' moves at the returned observations are ``teacher_actions`` and the seats
whose moves are labels are ``imitate`` (the seat to move, when its bot is imitated).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from games.boardgames.tictactoe import TicTacToe, decode_rng, encode_rng, make
from games.core import Batch, GameError, GameSpec
from games.family import Teachers

BotFn = Callable[[np.ndarray, np.ndarray, np.random.Generator], np.ndarray]


class TeacherTicTacToe:
    """``E`` tic-tac-toe boards whose seats scripted bots play: a
    :class:`games.core.SupportsTeachers` and :class:`games.core.SupportsState` game."""

    def __init__(self, game: TicTacToe, bots: list[BotFn], learned: list[bool],
                 seed: int) -> None:
        self.game = game
        self.spec: GameSpec = game.spec
        num_envs, num_bots = self.spec.num_envs, len(bots)
        self.bots = bots
        pairs = np.array([(i, j) for i in range(num_bots) for j in range(num_bots)], np.int64)
        self.bot_of = pairs[np.arange(num_envs) % len(pairs)]  # [E, A] the bot of each seat
        self._learned = np.asarray(learned, bool)[self.bot_of]  # [E, A]
        self._rng = _bot_rng(seed)
        self.teacher_actions = np.zeros((num_envs, 2), np.int64)  # [E, A]
        self.imitate = np.zeros((num_envs, 2), bool)  # [E, A]

    def reset(self, seed: int | None = None) -> Batch:
        if seed is not None:
            self._rng = _bot_rng(seed)
        batch = self.game.reset(seed)
        self._choose(batch)
        return batch

    def step(self, actions: np.ndarray) -> Batch:
        """Play the bots' moves (``actions`` is ignored: every seat is a teacher's)."""
        batch = self.game.step(self.teacher_actions)
        self._choose(batch)
        return batch

    def close(self) -> None:
        self.game.close()

    def _choose(self, batch: Batch) -> None:
        """The bots' moves at ``batch``'s observations, one call per bot over its seats."""
        assert batch.action_mask is not None
        actions = np.zeros_like(self.teacher_actions)
        for index, bot in enumerate(self.bots):
            seats = (self.bot_of == index) & batch.alive  # [E, A]
            if seats.any():
                actions[seats] = bot(batch.obs[seats], batch.action_mask[seats], self._rng)
        self.teacher_actions = actions
        self.imitate = self._learned & batch.alive

    def get_state(self) -> dict[str, object]:
        return {"game": self.game.get_state(), "rng": encode_rng(self._rng),
                "teacher_actions": self.teacher_actions.copy(), "imitate": self.imitate.copy()}

    def set_state(self, state: dict[str, object]) -> None:
        game = state["game"]
        if not isinstance(game, dict):
            raise GameError("tictactoe teacher state lacks its game state")
        self.game.set_state(game)
        self._rng = decode_rng(np.asarray(state["rng"]))
        self.teacher_actions = np.asarray(state["teacher_actions"], np.int64).copy()
        self.imitate = np.asarray(state["imitate"], bool).copy()


def _bot_rng(seed: int | None) -> np.random.Generator:
    """The bots' generator: a stream of its own beside the game's (same seed)."""
    return np.random.default_rng(None if seed is None else (seed, 0x7EAC))


def teacher_game(name: str, teachers: Teachers, num_envs: int, seed: int,
                 options: Mapping[str, Any], known: Mapping[str, BotFn]) -> TeacherTicTacToe:
    """``num_envs`` games of ``name`` played by ``teachers.bots`` (among ``known``)."""
    names = ", ".join(sorted(known))
    if teachers.replays is not None:
        raise GameError(f"{name} has no replays; clone its live bots instead ({names})")
    if teachers.winners_only:
        raise GameError(f"winners_only needs replays: live {name} games have no winner yet "
                        "when their moves are learned; imitate named bots instead")
    if not teachers.bots:
        raise GameError(f"name the teachers of {name}: one or more of {names}")
    bots = [bot.lower() for bot in teachers.bots]
    for bot in bots:
        if bot not in known:
            raise GameError(f"unknown {name} bot {bot!r}; known: {names}")
    imitate = [bot.lower() for bot in teachers.imitate]
    for bot in imitate:
        if bot not in bots:
            raise GameError(f"imitate names {bot!r}, who does not play these games; "
                            f"teachers: {', '.join(bots)}")
    learned = [not imitate or bot in imitate for bot in bots]
    return TeacherTicTacToe(make(name, num_envs=num_envs, seed=seed, **options),
                            [known[bot] for bot in bots], learned, seed)
