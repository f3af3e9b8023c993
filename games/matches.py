"""Playing matches between players (the league schedules them and stores their results).

A *match* is one game between two players (league player ids ``a`` and ``b``); a
:class:`MatchRunner` plays the matches a schedule hands out, many at once, and reports each
result as its game ends. :class:`VecGameRunner` plays them in the envs of any two-seat
:class:`~games.core.VecGame`; a game family whose bots play inside its engine brings its own
runner (:meth:`games.family.Family.match_runner`). With :class:`RecordTo` a runner also
records the games as replays (games that are :class:`~games.core.SupportsRecording`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from games.batches import random_actions
from games.core import (
    Box,
    GameError,
    HasSides,
    Outcome,
    Policy,
    ScriptedPolicy,
    SupportsRecording,
    VecGame,
)

GameFactory = Callable[[int, int], VecGame]  # (num_envs, seed) -> a two-seat game


@dataclass(frozen=True)
class MatchSpec:
    key: str
    a: int  # player ids
    b: int
    side_a: int  # the side player a plays: the game's own side where it maps seats to sides
    # (microRTS: the engine player, see VecGameRunner), else the seat
    seed: int
    index: int = 0  # the game's number within its pair (sides alternate with it)


@dataclass(frozen=True)
class MatchResult:
    outcome: int  # for player a: 1 win, 0 draw, -1 loss
    length: int
    duration: float


@dataclass(frozen=True)
class RecordTo:
    """Record a tournament's games as replays (``--record``)."""

    folder: Path
    names: Mapping[int, str]
    """the name recorded for each league player id"""
    shard_games: int = 100
    """games per shard"""

    def seat_names(self, owners: Any) -> list[str] | None:
        """The names of the players owning a game's seats (ids, ``-1`` for none); ``None``
        when a seat has no player (an idle env: not recorded)."""
        ids = [int(i) for i in owners]
        return None if min(ids) < 0 else [self.names.get(i, str(i)) for i in ids]



class MatchRunner(Protocol):
    """Plays matches as the schedule hands them out, reporting each result as it ends."""

    def run(self, next_match: Callable[[], MatchSpec | None],
            on_result: Callable[[MatchSpec, MatchResult], None]) -> None: ...


RunnerFactory = Callable[[Mapping[int, Policy]], MatchRunner]  # policies by player id


class VecGameRunner:
    """Plays scheduled matches in the environments of one two-seat :class:`VecGame`.

    A game with a ``players`` array ``[E, 2]`` names the side each seat plays (microRTS: seat 0
    of env ``e`` is engine player ``e % 2``); player a then takes the seat that plays side
    ``side_a``, so both sides really are played. Other games: seat ``side_a``.
    """

    def __init__(self, game_factory: GameFactory, policies: Mapping[int, Policy],
                 num_envs: int, seed: int, record: RecordTo | None = None) -> None:
        self.game_factory, self.policies = game_factory, policies
        self.num_envs, self.seed = num_envs, seed
        self.record = record

    def run(self, next_match: Callable[[], MatchSpec | None],
            on_result: Callable[[MatchSpec, MatchResult], None]) -> None:
        """Play until ``next_match`` returns ``None`` and every started game has ended."""
        game = self.game_factory(self.num_envs, self.seed)
        try:
            if self.record is not None:
                if not isinstance(game, SupportsRecording):
                    raise GameError(f"{game.spec.name} cannot record its games as replays; "
                                    "drop --record")
                game.start_recording(self.record.folder, None, self.record.shard_games)
            self._run(game, next_match, on_result)
            if isinstance(game, SupportsRecording) and self.record is not None:
                game.finish_recording()
        finally:
            game.close()

    def _run(self, game: VecGame, next_match: Callable[[], MatchSpec | None],
             on_result: Callable[[MatchSpec, MatchResult], None]) -> None:
        spec = game.spec
        e_num = spec.num_envs
        if spec.num_seats != 2:
            raise GameError(f"matches need a two-seat game; {spec.name} has "
                              f"{spec.num_seats} seats")
        rng = np.random.default_rng(self.seed)
        action_shape = spec.action_space.action_shape
        dtype = np.float32 if isinstance(spec.action_space, Box) else np.int64
        owner = np.full((e_num, 2), -1, np.int64)  # [E, A] player id per seat, -1 = idle
        # [E, A] the game's side each seat plays, where the game says (microRTS alternates the
        # engine player of seat 0 across envs); otherwise seat s is side s
        sides = (game.players if isinstance(game, HasSides)
                 else np.tile(np.arange(2), (e_num, 1)))
        seat_a = np.zeros(e_num, np.int64)  # [E] the seat player a of each env's match holds
        current: list[MatchSpec | None] = [None] * e_num
        started = np.zeros(e_num)  # [E] wall-clock start of each env's match
        exhausted = False

        def assign(envs: np.ndarray) -> None:
            nonlocal exhausted
            for e in envs.tolist():
                match = None if exhausted else next_match()
                exhausted = match is None
                current[e] = match
                if match is None:
                    owner[e] = -1
                else:
                    seat_a[e] = 0 if int(sides[e, 0]) == match.side_a else 1
                    owner[e, seat_a[e]], owner[e, 1 - seat_a[e]] = match.a, match.b
                    started[e] = time.perf_counter()
                if self.record is not None and isinstance(game, SupportsRecording):
                    game.name_seats(e, self.record.seat_names(owner[e]))

        batch = game.reset(seed=self.seed)
        assign(np.arange(e_num))
        while any(m is not None for m in current):
            actions = np.zeros((e_num, 2, *action_shape), dtype)  # [E, A, ...]
            alive = batch.alive  # [E, A]
            for pid in np.unique(owner[owner >= 0]).tolist():
                sel = (owner == pid) & alive
                if sel.any():
                    mask = batch.action_mask[sel] if batch.action_mask is not None else None
                    state = batch.state[sel] if batch.state is not None else None
                    actions[sel] = self.policies[pid].act(batch.obs[sel], mask, state)
            idle = (owner < 0) & alive
            if idle.any():
                mask = batch.action_mask[idle] if batch.action_mask is not None else None
                actions[idle] = random_actions(spec.action_space, mask, rng,
                                               (int(idle.sum()),))
            batch = game.step(actions)
            ended = np.flatnonzero(batch.terminated | batch.truncated)
            if not len(ended):
                continue
            stats = batch.episodes
            outcome = np.full((e_num, 2), int(Outcome.NONE), np.int64)  # [E, A]
            outcome[stats.env, stats.seat] = stats.outcome
            length = np.zeros(e_num, np.int64)  # [E]
            length[stats.env] = stats.length
            now = time.perf_counter()
            for e in ended.tolist():
                match = current[e]
                if match is None:
                    continue
                result = int(outcome[e, seat_a[e]])
                result = 0 if result == int(Outcome.NONE) else result  # truncated: a draw
                on_result(match, MatchResult(result, int(length[e]), now - started[e]))
            assign(ended)



@dataclass
class MatchSetup:
    """How a family stages games against one opponent: game options, and the bot acting for
    seat 1 when it is not inside the engine."""

    options: dict[str, Any] = field(default_factory=dict)
    scripted: ScriptedPolicy | None = None
    opponent_name: str = ""
