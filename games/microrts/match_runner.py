"""Match runners for microRTS: engine bots against each other and against network policies.

Engine bots are not seats of a :class:`games.core.VecGame`: they play inside Java. So a
:class:`BotMatchRunner` plays the matches a schedule hands out (a league tournament's) as
bot-vs-bot games of :mod:`games.microrts.botmatch`: ``parallel`` games stepped together by one
Java vector client; whenever a game ends its result is reported at once and its slot takes the
next scheduled match (so adaptive schedules see every result before choosing the next pairing).

:class:`PolicyMatchRunner` plays tournaments that mix network policies and engine bots.
The league reaches both through :meth:`games.microrts.family.MicroRTSFamily.match_runner`
(``selfplay league tournament --game microrts --players coacai workerrush ...``).

Search bots (NaiveMCTS, Rojo, GRojoA3N, Tiamat, ...) think for a fixed wall-clock time per
cycle, so their strength depends on the CPU they get: ``parallel`` games in one process step
one after the other on one core (fair), but beside other busy processes they get less.
``processes=N`` plays one game at a time in each of N spawned worker processes (one JVM each),
a whole core per game as in microRTS competitions when N is at most the number of cores.

Sides: :attr:`games.matches.MatchSpec.side_a` is the engine player (0 or 1) of player
``a``; player 0 acts first and wins same-cycle conflicts, which is why schedules alternate
sides. A game stopped by ``max_steps`` is a draw, as in microRTS tournaments. Each match's
``seed`` seeds the bots' ``java.util.Random`` fields (see :func:`bots.seed_bot`).

**Recording** (``record``, a :class:`games.matches.RecordTo`): a game replays exactly only
through the self-play client, so recorded matches are staged as self-play games
(:class:`~games.microrts.teacher_game.TeacherGame`) whose bots think for their seats from
Python (:class:`~games.microrts.teacher_game.LiveBots`, seeing the whole board), in this
process: slower than bots inside Java, and seeded per env and game rather than by the match's
seed. Policy-vs-bot matches are then self-play envs too, the bot on the policy's other seat.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Any

import numpy as np

from games.core import EngineBot, GameError, Outcome, Policy
from games.matches import MatchResult, MatchSpec, RecordTo
from games.microrts import bots as bots_mod
from games.microrts import jvm_signals
from games.microrts.botmatch import (
    _WIN_LOSS,
    DEFAULT_MAP,
    BotGame,
    BotGameResult,
    _Arena,
    _map_info,
)
from games.pools import DetachedPool, stop_process_pool


class BotMatchRunner:
    """A :class:`games.matches.MatchRunner` whose players are microRTS engine bots.

    ``players`` maps league player ids to bot names (any spelling
    :func:`games.microrts.bots.resolve_bot` accepts). Each game is seeded with its match's
    seed, the one the league database stores, so a stored game can be played again.
    """

    def __init__(self, players: Mapping[int, str], map_name: str | Sequence[str] = DEFAULT_MAP,
                 max_steps: int = 5000, parallel: int = 16, processes: int = 1,
                 record: RecordTo | None = None, writer: Any = None) -> None:
        """``map_name``: a map, or several (a training's ``maps``, weights aside: games
        ``2j`` and ``2j + 1`` of a pair, its two sides, play map ``j`` modulo their number).
        ``record``: record the games (``writer``: a shared
        :class:`~games.microrts.orderlog.ReplayWriter`, closed by its owner)."""
        if parallel < 1:
            raise GameError(f"parallel must be >= 1, got {parallel}")
        if processes < 1:
            raise GameError(f"processes must be >= 1, got {processes}")
        if processes > 1 and parallel > 1:
            raise GameError(f"with processes={processes} each worker process plays one game "
                              f"at a time: parallel must be 1, got {parallel}")
        if max_steps < 1:
            raise GameError(f"max_steps must be >= 1, got {max_steps}")
        if record is not None and processes > 1:
            raise GameError("recorded games are played in this process; drop --processes")
        self.record, self.writer = record, writer
        # fail fast (unknown bot or map) before the JVM starts
        self.players = {int(pid): bots_mod.resolve_bot(name).name
                        for pid, name in players.items()}
        names = [map_name] if isinstance(map_name, str) else list(map_name)
        if not names:
            raise GameError("a bot match runner needs a map")
        self.map_names = [_map_info(name).name for name in names]
        self.map_name = self.map_names[0]
        if record is not None and len(self.map_names) > 1:
            raise GameError(f"recorded bot games are played on one map; got "
                            f"{len(self.map_names)}: name one with --map")
        self.max_steps, self.parallel, self.processes = max_steps, parallel, processes

    def game_for(self, match: MatchSpec) -> BotGame:
        """The bot-vs-bot game of ``match`` (``bot_a`` is engine player 0)."""
        for pid in (match.a, match.b):
            if pid not in self.players:
                raise GameError(f"player id {pid} is not a bot of this runner "
                                  f"(bots: {self.players})")
        first, second = (match.a, match.b) if match.side_a == 0 else (match.b, match.a)
        maps = self.map_names
        return BotGame(self.players[first], self.players[second],
                       maps[(match.index // 2) % len(maps)], self.max_steps,
                       match.seed & 0x7FFFFFFF)

    def run(self, next_match: Callable[[], MatchSpec | None],
            on_result: Callable[[MatchSpec, MatchResult], None]) -> None:
        """Play until ``next_match`` returns ``None`` and every started game has ended.

        As in :class:`games.matches.VecGameRunner`, the first ``None`` ends the pulling:
        the games in flight are finished and reported, no further match is asked for.
        """
        exhausted = False

        def pull() -> MatchSpec | None:
            nonlocal exhausted
            if exhausted:
                return None
            match = next_match()
            exhausted = match is None
            return match

        if self.processes > 1:
            self._run_in_processes(pull, on_result)
            return
        if self.record is not None:
            self._run_recorded(pull, on_result, self.record)
            return
        first: list[MatchSpec] = []
        while len(first) < self.parallel:
            match = pull()
            if match is None:
                break
            first.append(match)
        if not first:
            return
        games = [self.game_for(m) for m in first]  # validates ids before the JVM starts
        arena = _Arena(len(first))
        slots = arena.slots
        current: list[MatchSpec | None] = [None] * slots
        current_game: list[BotGame | None] = [None] * slots
        steps = np.zeros(slots, np.int64)  # [S] cycles played by each slot's game
        active = np.zeros(slots, bool)  # [S]
        started = np.zeros(slots)  # [S] wall-clock start of each slot's game

        def start(slot: int, match: MatchSpec | None, game: BotGame | None = None) -> None:
            if match is None:
                if active[slot]:
                    arena._idle(slot)
                current[slot], current_game[slot], active[slot] = None, None, False
                return
            chosen = game if game is not None else self.game_for(match)
            arena._start(slot, chosen)
            current[slot], current_game[slot] = match, chosen
            steps[slot], active[slot], started[slot] = 0, True, time.perf_counter()

        jpype = arena._jpype
        try:
            for slot, (match, game) in enumerate(zip(first, games, strict=True)):
                start(slot, match, game)
            while active.any():
                jvm_signals.restore()
                response = arena.client.gameStep(None, arena.players)
                steps += 1
                over = np.asarray(response.done)[:, _WIN_LOSS].astype(bool) & active  # [S]
                ended = np.flatnonzero(over | (active & (steps >= self.max_steps))).tolist()
                now = time.perf_counter()
                for slot in ended:
                    done, played = current[slot], current_game[slot]
                    assert done is not None and played is not None
                    res = arena._result(slot, played, bool(over[slot]))
                    on_result(done, MatchResult(_outcome(res, done), res.length,
                                                now - started[slot]))
                    start(slot, pull())
        except jpype.JException as exc:
            from games.microrts import engine

            raise GameError(f"microRTS engine error in a bot game: "
                            f"{engine.java_error_message(exc)}") from exc
        finally:
            try:
                arena.client.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass

    def _run_recorded(self, pull: Callable[[], MatchSpec | None],
                      on_result: Callable[[MatchSpec, MatchResult], None],
                      record: RecordTo) -> None:
        """The matches as recorded self-play games of bots thinking for their seats (see the
        module docstring); an env whose match ends restarts with the next one."""
        from games.microrts.options import MicroRTSOptions
        from games.microrts.orderlog import ReplayWriter
        from games.microrts.teacher_game import LiveBots, TeacherGame

        first: list[MatchSpec] = []
        while len(first) < self.parallel and (match := pull()) is not None:
            first.append(match)
        if not first:
            return
        for match in first:
            self.game_for(match)  # unknown ids fail before the JVM starts
        n = len(first)
        pairs = [("", "")] * n  # [E] bots by engine player; "": none (an idle env)
        current: list[MatchSpec | None] = [None] * n
        started = np.zeros(n)  # [E] wall-clock start of each env's match
        bots = LiveBots(sorted(set(self.players.values())), seed=first[0].seed,
                        schedule=lambda e, _: pairs[e])
        options = MicroRTSOptions(map=self.map_name, bots=[], num_selfplay_envs=n,
                                  max_steps=self.max_steps)
        writer = self.writer or ReplayWriter(record.folder, record.shard_games)
        game = TeacherGame(options, n, bots, seed=first[0].seed)

        def assign(e: int, match: MatchSpec | None) -> None:
            current[e], started[e] = match, time.perf_counter()
            if match is None:
                pairs[e] = ("", "")
                game.name_seats(e, None)
                return
            bot_game = self.game_for(match)
            pairs[e] = (bot_game.bot_a, bot_game.bot_b)
            a_first = match.side_a == 0
            ids = (match.a, match.b) if a_first else (match.b, match.a)  # by engine player
            names = [record.names.get(i, self.players[i]) for i in ids]
            game.name_seats(e, [names[int(p)] for p in game.players[e]])

        try:
            game.record_into(writer)
            for e, match in enumerate(first):
                assign(e, match)
            game.reset()
            while any(m is not None for m in current):
                ep = game.step(game.teacher_actions).episodes
                freed = []
                for i in np.flatnonzero(ep.seat == 0).tolist():
                    e = int(ep.env[i])
                    match = current[e]
                    if match is None:
                        continue
                    p0, outcome = int(game.players[e, 0]), int(ep.outcome[i])
                    winner = (-1 if outcome not in (Outcome.WIN, Outcome.LOSS) else
                              p0 if outcome == Outcome.WIN else 1 - p0)
                    result = 0 if winner < 0 else 1 if winner == match.side_a else -1
                    on_result(match, MatchResult(result, int(ep.length[i]),
                                                 time.perf_counter() - started[e]))
                    freed.append(e)
                for e in freed:
                    assign(e, pull())
                if freed:
                    game.restart(freed)
        finally:
            game.close()
            if self.writer is None:
                writer.close()

    def _run_in_processes(self, pull: Callable[[], MatchSpec | None],
                          on_result: Callable[[MatchSpec, MatchResult], None]) -> None:
        """One game at a time in each of ``processes`` spawned workers; results are reported
        (in this process) as games end, and each freed worker takes the next match."""
        pool = DetachedPool(self.processes)
        inflight: dict[Future[tuple[BotGameResult, float]], MatchSpec] = {}
        try:
            while True:
                while len(inflight) < self.processes and (match := pull()) is not None:
                    inflight[pool.submit(_play_in_worker, self.game_for(match))] = match
                if not inflight:
                    break
                finished, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for future in finished:
                    match = inflight.pop(future)
                    res, seconds = future.result()  # a worker's GameError surfaces here
                    on_result(match, MatchResult(_outcome(res, match), res.length, seconds))
        except BaseException:  # an engine error, Ctrl-C or SIGTERM: end the games in flight
            stop_process_pool(pool, kill=True)
            raise
        pool.shutdown()


def _outcome(result: BotGameResult, match: MatchSpec) -> int:
    """The game's result for the match's player a: 1 win, 0 draw, -1 loss."""
    if result.winner < 0:
        return 0
    return 1 if result.winner == match.side_a else -1


_worker_arena: _Arena | None = None


def _play_in_worker(game: BotGame) -> tuple[BotGameResult, float]:
    """Worker-process entry point: ``game`` in this process's one-slot arena (made once, its
    JVM start not timed), and the seconds the game took."""
    global _worker_arena
    if _worker_arena is None:
        _worker_arena = _Arena(1)
    start = time.perf_counter()
    result = _worker_arena.play([game], None)[0]
    return result, time.perf_counter() - start


class PolicyMatchRunner:
    """A :class:`games.matches.MatchRunner` for tournaments with network policies
    (checkpoints, snapshots) and engine bots mixed.

    One microRTS game holds ``2 * num_envs`` envs: ``num_envs`` self-play envs for policy vs
    policy, and ``num_envs`` bot envs for policy vs engine bot, whose bot is swapped
    (:meth:`~games.microrts.adapter.MicroRTSVecGame.set_bot`) for each match. An env taking a
    match restarts its game, so every match starts at cycle 0; a match goes to an env whose
    engine player matches its sides (bot envs alternate sides). Bot-vs-bot matches are set
    aside and played by a :class:`BotMatchRunner` (bots act inside Java there) once
    ``num_envs`` of them are waiting or the schedule ends: the games in flight finish, the bot
    games are played, and pulling resumes, so an adaptive schedule sees their results soon.
    With ``record`` the bot envs are self-play envs whose bot thinks for seat 1 (see the
    module docstring), and every game goes to one replay folder.
    """

    def __init__(self, policies: Mapping[int, Policy], options: Mapping[str, object],
                 num_envs: int = 8, seed: int = 0, record: RecordTo | None = None) -> None:
        self.bots = {pid: p.name for pid, p in policies.items() if isinstance(p, EngineBot)}
        self.policies = {pid: p for pid, p in policies.items() if pid not in self.bots}
        self.options = dict(options)
        maps = list(self.options.get("maps") or [])  # type: ignore[call-overload]
        if record is not None and len(self.bots) > 1 and len(maps) > 1:
            raise GameError("recorded bot-vs-bot games are played on one map; these options "
                            f"list {len(maps)}: name one with --map")
        # both sides in the bot envs; every map of a maps list from both sides (fewer envs
        # left the last maps unrated)
        self.num_envs = max(2, num_envs + num_envs % 2, 2 * len(maps))
        self.seed = seed
        self.record = record
        self._writer: Any = None  # the ReplayWriter of a recorded run

    def match_options(self) -> Any:
        """The :class:`MicroRTSOptions` of the matches' games: ``num_envs`` self-play envs and
        as many bot envs, both sides, every map of a maps list alike (a training's
        ``map_weights`` left maps unplayed)."""
        from games.microrts.adapter import MicroRTSOptions
        from games.options import from_mapping

        return from_mapping(MicroRTSOptions, {
            **self.options, "num_selfplay_envs": self.num_envs, "bots": ["Passive"],
            "alternate_sides": True, "workers": 1, "map_weights": []}, "game.options.")

    def _policy_side(self, match: MatchSpec) -> int:
        """The engine player of the match's network policy (matches with one bot)."""
        return match.side_a if match.a in self.policies else 1 - match.side_a

    def run(self, next_match: Callable[[], MatchSpec | None],
            on_result: Callable[[MatchSpec, MatchResult], None]) -> None:
        """Play until ``next_match`` returns ``None`` and every started match has ended."""
        from collections import deque

        opts = self.match_options()
        pending: deque[MatchSpec] = deque()  # pulled, waiting for an env that fits
        exhausted = [False]
        if self.record is not None:
            from games.microrts.orderlog import ReplayWriter

            self._writer = ReplayWriter(self.record.folder, self.record.shard_games)
        try:
            for phase in itertools.count():
                seed = self.seed + 7919 * phase  # each phase's random bots draw anew
                bot_games = self._policy_phase(opts, next_match, on_result, pending,
                                               exhausted, seed)
                if bot_games:
                    queue = deque(bot_games)
                    BotMatchRunner(self.bots, map_name=list(opts.maps) or opts.map,
                                   max_steps=opts.max_steps,
                                   parallel=self.num_envs, record=self.record,
                                   writer=self._writer).run(
                        functools.partial(_pop_or_none, queue), on_result)
                if exhausted[0] and not pending:
                    return
        finally:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def _make_game(self, opts: Any, seed: int) -> tuple[Any, Callable[[int, str], object]]:
        """The phase's game and how a bot env gets its bot: engine bot envs, or (recording)
        self-play envs whose seat 1 a :class:`LiveBots` bot plays."""
        from dataclasses import replace

        from games.microrts.mixed_sizes import vec_game
        from games.microrts.teacher_game import LiveBots, TeacherGame, seat_pair

        e_num = 2 * self.num_envs
        if self._writer is None:  # maps of several sizes (a training's rating games) padded
            plain = vec_game(opts, num_envs=e_num, seed=seed)
            return plain, plain.set_bot
        pairs = [("", "")] * e_num  # [E] bots by engine player
        bots = LiveBots(sorted(set(self.bots.values())), seed=seed,
                        schedule=lambda e, _: pairs[e], full_view=True)
        game = TeacherGame(replace(opts, num_selfplay_envs=e_num, bots=[]), e_num, bots,
                           seed=seed)
        game.record_into(self._writer)

        def set_bot(e: int, bot: str) -> object:
            pairs[e] = seat_pair(game.players, e, bot)
            return bot

        return game, set_bot

    def _policy_phase(self, opts: Any, next_match: Callable[[], MatchSpec | None],
                      on_result: Callable[[MatchSpec, MatchResult], None],
                      pending: Any, exhausted_flag: list[bool], seed: int
                      ) -> list[MatchSpec]:
        """Matches with a network policy until the schedule ends or ``num_envs`` bot-vs-bot
        matches wait; returns those (``pending`` carries pulled matches to the next phase)."""
        n = self.num_envs
        game, set_bot = self._make_game(opts, seed)
        players = game.players  # [E, 2] engine player of each seat, -1: the bot's seat
        e_num = 2 * n
        current: list[MatchSpec | None] = [None] * e_num
        owner = np.full((e_num, 2), -1, np.int64)  # [E, A] policy id per seat
        started = np.zeros(e_num)
        bot_games: list[MatchSpec] = []
        exhausted = exhausted_flag[0]

        def fits(match: MatchSpec, e: int) -> bool:
            if match.a in self.bots or match.b in self.bots:
                return e >= n and int(players[e, 0]) == self._policy_side(match)
            return e < n

        def take(e: int) -> MatchSpec | None:
            nonlocal exhausted
            for i, match in enumerate(pending):
                if fits(match, e):
                    del pending[i]
                    return match
            while not exhausted and len(pending) < 4 * e_num and len(bot_games) < n:
                pulled = next_match()
                if pulled is None:
                    exhausted = exhausted_flag[0] = True
                elif pulled.a in self.bots and pulled.b in self.bots:
                    bot_games.append(pulled)
                elif fits(pulled, e):
                    return pulled
                else:
                    pending.append(pulled)
            return None

        def assign(envs: list[int]) -> list[int]:
            """Give free ``envs`` their next matches; the envs whose game must restart."""
            restart = []
            for e in envs:
                match = take(e)
                current[e] = match
                owner[e] = -1
                if match is None:
                    if self.record is not None:
                        game.name_seats(e, None)
                    continue
                if e < n:  # self-play env: seat s plays engine player players[e, s]
                    seat_a = 0 if int(players[e, 0]) == match.side_a else 1
                    owner[e, seat_a], owner[e, 1 - seat_a] = match.a, match.b
                    seat_ids = [int(owner[e, 0]), int(owner[e, 1])]
                else:
                    bot, policy = ((match.b, match.a) if match.a in self.policies
                                   else (match.a, match.b))
                    set_bot(e, self.bots[bot])
                    owner[e, 0] = policy
                    seat_ids = [policy, bot]
                if self.record is not None:
                    game.name_seats(e, self.record.seat_names(seat_ids))
                started[e] = time.perf_counter()
                restart.append(e)
            return restart

        try:
            batch = game.reset(seed=seed)
            first = assign(list(range(e_num)))
            if first:
                batch = game.restart(first)
            while any(m is not None for m in current):
                actions = np.zeros((e_num, 2, *game.spec.action_space.action_shape),
                                   np.int64)  # idle seats: no-op
                mask = batch.action_mask
                assert mask is not None
                for pid in np.unique(owner[owner >= 0]).tolist():
                    sel = (owner == pid) & batch.alive
                    if sel.any():
                        actions[sel] = self.policies[pid].act(
                            batch.obs[sel], mask[sel],
                            batch.state[sel] if batch.state is not None else None)
                batch = game.step(actions)
                stats = batch.episodes
                free = [e for e in range(e_num) if current[e] is None]
                if len(stats.env):
                    outcome = np.full((e_num, 2), int(Outcome.NONE), np.int64)
                    outcome[stats.env, stats.seat] = stats.outcome
                    length = np.zeros(e_num, np.int64)
                    length[stats.env] = stats.length
                    now = time.perf_counter()
                    for e in np.unique(stats.env).tolist():
                        match = current[e]
                        if match is None:
                            continue
                        seat = (0 if e >= n or int(players[e, 0]) == match.side_a else 1)
                        result = int(outcome[e, seat])
                        result = 0 if result == int(Outcome.NONE) else result  # no winner
                        if e >= n and match.a not in self.policies:  # seat 0 played b
                            result = -result
                        current[e] = None
                        if self.record is not None:
                            game.name_seats(e, None)  # its next game is no match's
                        on_result(match, MatchResult(result, int(length[e]), now - started[e]))
                        free.append(e)
                if free and (pending or not exhausted) and len(bot_games) < n:
                    restart = assign(sorted(set(free)))
                    if restart:
                        batch = game.restart(restart)
        finally:
            game.close()
        return bot_games


def _pop_or_none(queue: Any) -> MatchSpec | None:
    return queue.popleft() if queue else None
