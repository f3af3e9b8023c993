"""microRTS games that record what is played in them as replays
(:class:`~games.core.SupportsRecording`: ``selfplay play --record``, league tournaments).

A replay is exact only through the client it was played in: the self-play client, where every
seat's orders pass through the adapter's action buffer (against a bot env's bot they never do,
and same-cycle conflicts resolve otherwise). So a :class:`RecordingGame` has self-play envs
only; a scripted opponent is staged as a teacher seat
(:class:`~games.microrts.teacher_game.TeacherGame`, a subclass) thinking for that side.

Before each step the orders of the actions given, at the cells where the seat has a unit that
can act (mask column 0 of the observation they answer; the engine ignores the rest), are
appended to the env's log (:func:`~games.microrts.orderlog.step_orders`). When a game ends its
log and metadata go to the sink: a :class:`~games.microrts.orderlog.ReplayWriter` appending
shards to a folder, or the caller's function (``selfplay record``). Only games of envs whose
seats are named are recorded (:meth:`RecordingGame.name_seats`); a game abandoned by
``restart`` or ``reset`` is dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from games.core import Batch, GameError, Outcome
from games.microrts.adapter import MicroRTSVecGame
from games.microrts.options import MicroRTSOptions
from games.microrts.orderlog import RecordedGame, ReplayWriter, board_hash, map_sha1, step_orders

Sink = Callable[[int, RecordedGame], None]  # (env, its finished game)


class RecordingGame(MicroRTSVecGame):
    """A :class:`MicroRTSVecGame` that can record its games (see the module docstring);
    ``game_step`` ``[E]`` counts the steps played of each env's current game."""

    def __init__(self, options: MicroRTSOptions, num_envs: int, seed: int | None = None,
                 name: str = "microrts") -> None:
        super().__init__(options, num_envs, seed=seed, name=name)
        self.game_step = np.zeros(self.num_envs, np.int64)
        """``[E]`` steps played of each env's current game"""
        self._sink: Sink | None = None
        self._writer: ReplayWriter | None = None  # owned: made by start_recording
        self._names: list[tuple[str, ...] | None] = [None] * self.num_envs
        self._logs: list[list[np.ndarray]] = [[] for _ in range(self.num_envs)]
        self._mask: np.ndarray | None = None  # bool [E, A, HW, 78] of the last batch
        self._map_sha1: dict[str, str] = {}

    # ------------------------------------------------------------------ SupportsRecording

    def start_recording(self, folder: Path, names: Sequence[str] | None,
                        shard_games: int = 100) -> None:
        """Record every finished game into ``folder`` from now on, appending shards of
        ``shard_games`` after its last; ``names[s]`` plays seat ``s`` in every env (``None``:
        no env is recorded until :meth:`name_seats` names its seats)."""
        writer = ReplayWriter(folder, shard_games)
        self.record_into(writer)
        self._writer = writer
        for e in range(self.num_envs):
            self.name_seats(e, names)

    def name_seats(self, env: int, names: Sequence[str] | None) -> None:
        """Who plays each seat of env ``env``'s game in progress and its next ones (the names
        recorded); ``None``: they are not recorded."""
        if names is not None and len(names) != self.num_seats:
            raise GameError(f"microrts: name each of the {self.num_seats} seats, got {names}")
        self._names[env] = None if names is None else tuple(str(n) for n in names)
        if names is None:
            self._logs[env] = []

    def finish_recording(self) -> Mapping[str, Any]:
        """Stop recording; with a folder of :meth:`start_recording`, write its last, partial
        shard. What was written: ``folder``, ``games``, ``shards``."""
        writer, self._writer = self._writer, None
        self._sink = None
        self._logs = [[] for _ in range(self.num_envs)]
        if writer is None:
            return {"folder": None, "games": 0, "shards": 0}
        return writer.close()

    # ------------------------------------------------------------------ sinks

    def record_into(self, writer: ReplayWriter) -> None:
        """Finished games go to ``writer`` (shared by several games: its owner closes it)."""
        writer.check((self.height, self.width), self.options.max_steps)
        self.record_to(lambda _, game: writer.add(game))

    def record_to(self, sink: Sink | None) -> None:
        """Finished games of named envs go to ``sink(env, game)``; ``None`` stops."""
        if sink is not None and self._num_sp < self.num_envs:
            raise GameError("microrts: only self-play envs can be recorded (a bot env's game "
                            "does not replay exactly); stage the bot as a teacher seat")
        self._sink = sink
        self._logs = [[] for _ in range(self.num_envs)]

    # ------------------------------------------------------------------ VecGame

    def final_board(self, e: int) -> np.ndarray | None:
        """The last position of env ``e``'s latest finished game (``[H, W, 30]``, seen by
        seat 0, unrotated), or None."""
        return self._episodes.final_board(e)

    def reset(self, seed: int | None = None) -> Batch:
        batch = super().reset(seed)
        self.game_step[:] = 0
        self._logs = [[] for _ in range(self.num_envs)]
        self._mask = batch.action_mask
        return batch

    def restart(self, envs: np.ndarray | list[int]) -> Batch:
        batch = super().restart(envs)
        for e in np.unique(np.asarray(envs, np.int64)).tolist():
            self._logs[e] = []
            self.game_step[e] = 0
        self._mask = batch.action_mask
        return batch

    def step(self, actions: np.ndarray) -> Batch:
        if self._sink is not None:
            self._log(actions)
        batch = super().step(actions)
        self.game_step += 1
        ep = batch.episodes
        if len(ep.env):
            if self._sink is not None:
                self._finish_games(batch)
            self.game_step[ep.env] = 0
        self._mask = batch.action_mask
        return batch

    def close(self) -> None:
        if self._writer is not None and not self._closed:
            self.finish_recording()  # the finished games waiting for their shard
        super().close()

    # ------------------------------------------------------------------ the logs

    def _log(self, actions: np.ndarray) -> None:
        """Append the orders of ``actions`` ``[E, A, HW, 7]`` to the named envs' logs."""
        named = np.array([n is not None for n in self._names])  # [E]
        if self._mask is None or not named.any():
            return
        acting = self._mask[..., 0] & named[:, None, None]  # [E, A, HW]
        env, rows = step_orders(actions, self.players, self._rotated, self.game_step, acting)
        if not len(rows):
            return
        bounds = np.searchsorted(env, np.arange(self.num_envs + 1))
        for e in np.flatnonzero(bounds[1:] > bounds[:-1]).tolist():
            self._logs[e].append(rows[bounds[e]:bounds[e + 1]])

    def _game_meta(self, e: int) -> dict[str, Any]:
        """More metadata of env ``e``'s game that just ended (subclasses)."""
        return {}

    def _finish_games(self, batch: Batch) -> None:
        """Hand the games that ended on the step that returned ``batch`` to the sink."""
        assert self._sink is not None
        ep = batch.episodes
        for i in np.flatnonzero(ep.seat == 0).tolist():
            e = int(ep.env[i])
            logs, self._logs[e] = self._logs[e], []
            names = self._names[e]
            if names is None:
                continue
            p0 = int(self.players[e, 0])
            outcome = int(ep.outcome[i])
            winner = (-1 if outcome not in (Outcome.WIN, Outcome.LOSS) else
                      p0 if outcome == Outcome.WIN else 1 - p0)
            by_player = [""] * 2
            for s, name in enumerate(names):
                by_player[int(self.players[e, s])] = name
            info = self.env_map[e]
            if info.name not in self._map_sha1:
                self._map_sha1[info.name] = map_sha1(Path(info.path))
            board = self.final_board(e)
            meta = {"map": info.name, "map_sha1": self._map_sha1[info.name],
                    "height": info.shape[0], "width": info.shape[1], "players": by_player,
                    "seed": [self.seed, e], "max_steps": self.options.max_steps,
                    "length": int(ep.length[i]), "winner": winner,
                    "truncated": bool(batch.truncated[e]),
                    "final": board_hash(board, p0) if board is not None else "",
                    **self._game_meta(e)}
            orders = np.concatenate(logs) if logs else np.zeros((0, 6), np.int32)
            self._sink(e, RecordedGame(meta, orders))
