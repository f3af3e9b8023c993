"""Games played by their scripted seat bots: the teacher games of live behaviour cloning.

Any family whose bots act through seats (:class:`~games.family.SeatBotsFamily`: NumPy bots
``fn(obs, mask, rng)``) gets live teachers from here. Every seat of every env is played by one
of the named bots (all ordered pairs of them spread over the envs, so each bot plays both sides
and every opponent; only the pairs with an imitated bot when some bots are not imitated);
after each ``reset`` and ``step`` the bots' actions at the returned observations are
``teacher_actions``, and the live seats whose bot is imitated are ``imitate``. The bots choose
once per bot per step over all their seats (arrays in, arrays out), with a generator of their
own beside the game's, saved with the game's state.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import numpy as np

from games.core import (
    Batch,
    GameError,
    GameSpec,
    SupportsGameProgress,
    SupportsStaggering,
    SupportsState,
    VecGame,
)
from games.rng_state import decode_rng, encode_rng

BotFn = Callable[[np.ndarray, np.ndarray, np.random.Generator], np.ndarray]


class SeatTeacherGame:
    """``E`` games whose seats scripted bots play: a :class:`games.core.SupportsTeachers`,
    :class:`games.core.SupportsState` and :class:`games.core.HasSeatPlayers` game over any
    two-seat :class:`VecGame` with masks and a state."""

    def __init__(self, game: VecGame, bots: list[BotFn], learned: list[bool],
                 seed: int, names: list[str] | None = None) -> None:
        if not isinstance(game, SupportsState):
            raise GameError(f"{game.spec.name} cannot save its state; it cannot host teachers")
        self.game = game
        self.spec: GameSpec = game.spec
        num_envs, seats = self.spec.num_envs, self.spec.num_seats
        self.bots = bots
        # every assignment of bots to seats (seat 0 the most significant digit), spread over
        # the envs; only those with a learned bot when some are not (a game of bots nobody
        # imitates teaches nothing)
        learned_arr = np.asarray(learned, bool)
        combos = np.array(list(itertools.product(range(len(bots)), repeat=seats)))
        if learned_arr.any() and not learned_arr.all():
            combos = combos[learned_arr[combos].any(1)]
        self.bot_of = combos[np.arange(num_envs) % len(combos)]  # [E, A]
        self._learned = learned_arr[self.bot_of]  # [E, A]
        if names is None:
            names = [f"bot{k}" for k in range(len(bots))]
        if len(names) != len(bots):
            raise GameError(f"{len(bots)} bots need as many names, got {len(names)}")
        self.seat_players = np.asarray(names, dtype=object)[self.bot_of]
        """``str [E, A]`` the bot on each seat (:class:`games.core.HasSeatPlayers`)"""
        self._rng = _bot_rng(seed)
        shape = (num_envs, seats, *self.spec.action_space.action_shape)
        self.teacher_actions = np.zeros(shape, np.int64)
        self.imitate = np.zeros((num_envs, seats), bool)
        self.student_seats = np.zeros((num_envs, seats), bool)
        """``bool [E, A]`` seats the caller plays where imitated (:meth:`let_students_play`)"""

    def reset(self, seed: int | None = None) -> Batch:
        if seed is not None:
            self._rng = _bot_rng(seed)
        batch = self.game.reset(seed)
        self._choose(batch)
        return batch

    def let_students_play(self, seats: np.ndarray) -> None:
        """The caller plays the imitated seats of ``seats`` (see
        :class:`games.core.SupportsStudents`)."""
        self.student_seats[:] = np.asarray(seats, bool).reshape(self.student_seats.shape)

    def step(self, actions: np.ndarray) -> Batch:
        """Play the bots' actions, and ``actions`` on the student seats whose labels are
        imitated (elsewhere ``actions`` is ignored)."""
        played = self.teacher_actions
        students = self.student_seats & self.imitate
        if students.any():
            lead = students.reshape(students.shape + (1,) * (played.ndim - 2))
            played = np.where(lead, actions, played)
        batch = self.game.step(played)
        self._choose(batch)
        return batch

    def close(self) -> None:
        self.game.close()

    def stagger(self) -> bool:
        """The game's :meth:`games.core.SupportsStaggering.stagger` where it has one (the
        bots' actions at the current observations stay valid: nothing is stepped)."""
        return isinstance(self.game, SupportsStaggering) and self.game.stagger()

    def game_progress(self) -> np.ndarray | None:
        """The game's :meth:`games.core.SupportsGameProgress.game_progress` where it has one
        (None where not)."""
        return self.game.game_progress() if isinstance(self.game, SupportsGameProgress) else None

    def _choose(self, batch: Batch) -> None:
        """The bots' actions at ``batch``'s observations, one call per bot over its seats."""
        if batch.action_mask is None:
            raise GameError(f"{self.spec.name} has no action masks; its bots need them")
        actions = np.zeros_like(self.teacher_actions)
        for index, bot in enumerate(self.bots):
            seats = (self.bot_of == index) & batch.alive  # [E, A]
            if seats.any():
                actions[seats] = bot(batch.obs[seats], batch.action_mask[seats], self._rng)
        self.teacher_actions = actions
        self.imitate = self._learned & batch.alive

    def get_state(self) -> dict[str, object]:
        assert isinstance(self.game, SupportsState)
        return {"game": self.game.get_state(), "rng": encode_rng(self._rng),
                "teacher_actions": self.teacher_actions.copy(), "imitate": self.imitate.copy()}

    def set_state(self, state: dict[str, object]) -> None:
        game = state.get("game")
        if not isinstance(game, dict):
            raise GameError(f"{self.spec.name} teacher state lacks its game state")
        assert isinstance(self.game, SupportsState)
        self.game.set_state(game)
        self._rng = decode_rng(np.asarray(state["rng"]))
        self.teacher_actions = np.asarray(state["teacher_actions"], np.int64).copy()
        self.imitate = np.asarray(state["imitate"], bool).copy()


def _bot_rng(seed: int | None) -> np.random.Generator:
    """The bots' generator: a stream of its own beside the game's (same seed)."""
    return np.random.default_rng(None if seed is None else (seed, 0x7EAC))
