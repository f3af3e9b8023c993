"""Bot-vs-bot microRTS games, many at once: for tournaments of the shipped scripted bots.

Both players are engine bots, so no Python acts per step: one ``tests.JNIGridnetVecClient`` in
bot-vs-bot mode steps ``parallel`` games per Java call (3-4x faster per game cycle than driving
``rts.GameState`` from Python). Its reward function 0 never signals "done" (so Java never resets
a game by itself); game over is read from the win/loss function's flag, the winner and length
from the finished game's state. A slot whose game ended gets the next scheduled game (bots,
map, seed), so long and short games mix without idle slots; ``processes > 1`` splits the games
over spawned worker processes, one JVM each (a script using it needs the usual
``if __name__ == "__main__":`` guard). Measured on the 2-core development machine: the round
robin of the 24 scripted bots on basesWorkers16x16A, both sides (552 games, 0.86 M cycles),
takes 44 s in one process.

>>> from games.microrts.botmatch import BotGame, play_bot_games, play_bots, round_robin
>>> play_bots("WorkerRush", "LightRush", "basesWorkers16x16A", max_steps=5000).outcome
<Outcome.WIN: 1>
>>> results = play_bot_games(round_robin(["WorkerRush", "LightRush", "CoacAI"]))

``bot_a`` plays player 0, who acts first and wins same-cycle conflicts: schedule both sides
(:func:`round_robin` does). A game stopped by ``max_steps`` is a draw (``truncated``), as in
microRTS tournaments. Bots marked :attr:`~games.microrts.bots.BotSpec.deterministic` play the
same game every time, so such a game depends only on its bots, map and sides. ``seed`` seeds
every ``java.util.Random`` instance field of both bots (after the engine's clone-at-reset) and,
as the game starts, the engine's static generators (RandomBiased's shared sampler, ...:
:func:`~games.microrts.bots.seed_engine`). So a game played alone (:func:`play_bots`, or one
slot per worker process) is the same game for the same seed, random bots included; games
stepped together share the static generators, so a batch replays exactly for the same games
and ``parallel``. Randomness elsewhere stays (a fresh clock-seeded ``Random`` in
the Random bot's every move, CoacAI's local generators, the wall-clock budgets of Mayari and the
search bots). Search bots think for about 100 ms per cycle: a 5,000-cycle game
of theirs takes minutes.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass

import numpy as np

from games.core import GameError, Outcome
from games.microrts import bots as bots_mod
from games.microrts import engine, jvm_signals
from games.microrts.maps import MapInfo, resolve_map
from games.pools import DetachedPool, stop_process_pool

DEFAULT_MAP = "basesWorkers16x16A"
_BIG_STEPS = 2**31 - 1  # the Java client's own step limit, never reached: we truncate here
_WIN_LOSS = 1  # index of WinLossRewardFunction in the client's reward functions

Progress = Callable[[int, int], None]  # (games finished, games in all)


@dataclass(frozen=True)
class BotGame:
    """One game to play: ``bot_a`` is player 0, ``bot_b`` player 1."""

    bot_a: str
    bot_b: str
    map: str = DEFAULT_MAP
    max_steps: int = 5000
    seed: int = 0


@dataclass(frozen=True)
class BotGameResult:
    """How a :class:`BotGame` ended (bot names in their canonical spelling)."""

    bot_a: str  # player 0
    bot_b: str  # player 1
    map: str
    seed: int
    winner: int  # 0 (bot_a), 1 (bot_b) or -1 (draw: max_steps, or both sides wiped out at once)
    length: int  # game cycles played
    truncated: bool  # stopped by max_steps

    @property
    def outcome(self) -> Outcome:
        """WIN, LOSS or DRAW for ``bot_a``."""
        if self.winner < 0:
            return Outcome.DRAW
        return Outcome.WIN if self.winner == 0 else Outcome.LOSS


def round_robin(bots: Sequence[str], map: str = DEFAULT_MAP, max_steps: int = 5000,
                games_per_side: int = 1, seed: int = 0) -> list[BotGame]:
    """Every pair of distinct ``bots`` on both sides, ``games_per_side`` times each (seeds
    ``seed, seed + 1, ...``; repeats only differ for seeded random bots)."""
    return [BotGame(a, b, map, max_steps, seed + k)
            for a, b in itertools.permutations(bots, 2) for k in range(games_per_side)]


def play_bots(bot_a: str, bot_b: str, map: str = DEFAULT_MAP, max_steps: int = 5000,
              seed: int = 0) -> BotGameResult:
    """One game of ``bot_a`` (player 0) against ``bot_b`` (player 1)."""
    return play_bot_games([BotGame(bot_a, bot_b, map, max_steps, seed)])[0]


def play_bot_games(games: Sequence[BotGame], parallel: int = 32, processes: int = 1,
                   progress: Progress | None = None) -> list[BotGameResult]:
    """Play ``games`` (results in the same order), ``parallel`` at a time per process, in
    ``processes`` spawned worker processes (1: this process; 0: one per CPU core)."""
    if parallel < 1:
        raise GameError(f"parallel must be >= 1, got {parallel}")
    games = list(games)
    for game in games:  # fail fast, with the engine's lists of names, before any game runs
        bots_mod.resolve_bot(game.bot_a)
        bots_mod.resolve_bot(game.bot_b)
        _map_info(game.map)
        if game.max_steps < 1:
            raise GameError(f"max_steps must be >= 1, got {game.max_steps}")
    if not games:
        return []
    workers = min(processes if processes > 0 else (os.cpu_count() or 1), len(games))
    if workers <= 1:
        return _Arena(min(parallel, len(games))).play(games, progress)
    # a few chunks per worker, interleaved (similar mixes), so that workers finish together
    num_chunks = min(len(games), 4 * workers)
    chunks = [games[c::num_chunks] for c in range(num_chunks)]
    results: list[BotGameResult | None] = [None] * len(games)
    done = 0
    pool = DetachedPool(workers)
    try:
        futures = {pool.submit(_play_chunk, chunk, parallel): c for c, chunk in enumerate(chunks)}
        for future in as_completed(futures):
            c = futures[future]
            for k, result in enumerate(future.result()):
                results[c + k * num_chunks] = result
            done += len(chunks[c])
            if progress is not None:
                progress(done, len(games))
    except BaseException:  # an engine error, Ctrl-C or SIGTERM: stop the workers' games now
        stop_process_pool(pool, kill=True)  # they ignore SIGTERM (detached_worker_init)
        raise
    pool.shutdown()
    assert all(r is not None for r in results)
    return [r for r in results if r is not None]


@functools.lru_cache(maxsize=64)
def _map_info(name: str) -> MapInfo:
    return resolve_map(name)


def _play_chunk(games: list[BotGame], parallel: int) -> list[BotGameResult]:
    """Worker-process entry point."""
    return _Arena(min(parallel, len(games))).play(games, None)


class _Arena:
    """``slots`` bot-vs-bot games stepped together by one Java vector client."""

    def __init__(self, slots: int) -> None:
        engine.start_jvm()
        import jpype

        self._jpype = jpype
        self.slots = slots
        self.utt = jpype.JClass("rts.units.UnitTypeTable")()
        rf = jpype.JClass("ai.rewardfunction.RewardFunctionInterface")
        rfs = jpype.JArray(rf)([jpype.JClass("ai.rewardfunction.ProduceWorkerRewardFunction")(),
                                jpype.JClass("ai.rewardfunction.WinLossRewardFunction")()])
        ai_array = jpype.JArray(jpype.JClass("ai.core.AI"))
        self.passive = jpype.JClass("ai.PassiveAI")(self.utt)
        first = str(_map_info(DEFAULT_MAP).path)
        maps = jpype.JArray(jpype.JString)([first] * slots)
        try:
            self.client = jpype.JClass("tests.JNIGridnetVecClient")(
                _BIG_STEPS, rfs, "", maps, ai_array([self.passive] * slots),
                ai_array([self.passive] * slots), self.utt, False)
        except jpype.JException as exc:
            raise GameError(f"microRTS engine failed to start bot games: "
                            f"{engine.java_error_message(exc)}") from exc
        cls = jpype.JClass("tests.JNIBotClient").class_
        self._gs_field = cls.getDeclaredField("gs")
        self._gs_field.setAccessible(True)
        self._map_field = cls.getDeclaredField("mapPath")
        self._map_field.setAccessible(True)
        self.players = jpype.JArray(jpype.JInt)([0] * slots)

    def _start(self, slot: int, game: BotGame) -> None:
        """Put ``game`` into ``slot``: its bots and map, a fresh game state, seeded bots."""
        jpype = self._jpype
        jvm_signals.restore()
        client = self.client.botClients[slot]
        client.ai1 = bots_mod.make_bot(bots_mod.resolve_bot(game.bot_a), self.utt)
        client.ai2 = bots_mod.make_bot(bots_mod.resolve_bot(game.bot_b), self.utt)
        self._map_field.set(client, jpype.JString(str(_map_info(game.map).path)))
        client.reset(0)  # clones and resets both bots, loads the map
        bots_mod.seed_bot(client.ai1, game.seed)
        bots_mod.seed_bot(client.ai2, game.seed)
        bots_mod.seed_engine(game.seed)  # shared by every slot: see the module docstring

    def _idle(self, slot: int) -> None:
        """No more games for ``slot``: passive bots keep its stepping cheap."""
        client = self.client.botClients[slot]
        client.ai1 = self.passive
        client.ai2 = self.passive

    def play(self, games: list[BotGame], progress: Progress | None) -> list[BotGameResult]:
        jpype = self._jpype
        queue = deque(enumerate(games))
        slot_game: list[int | None] = [None] * self.slots
        limit = np.zeros(self.slots, np.int64)
        steps = np.zeros(self.slots, np.int64)
        active = np.zeros(self.slots, bool)
        results: list[BotGameResult | None] = [None] * len(games)
        finished = 0
        try:
            for slot in range(self.slots):
                self._fill(slot, queue, slot_game, limit, steps, active)
            while active.any():
                jvm_signals.restore()
                response = self.client.gameStep(None, self.players)
                steps += 1
                over = np.asarray(response.done)[:, _WIN_LOSS] & active
                ended = np.flatnonzero(over | (active & (steps >= limit))).tolist()
                for slot in ended:
                    index = slot_game[slot]
                    assert index is not None
                    results[index] = self._result(slot, games[index], bool(over[slot]))
                    finished += 1
                    self._fill(slot, queue, slot_game, limit, steps, active)
                if len(ended) and progress is not None:
                    progress(finished, len(games))
        except jpype.JException as exc:
            raise GameError(f"microRTS engine error in a bot game: "
                            f"{engine.java_error_message(exc)}") from exc
        return [r for r in results if r is not None]

    def _fill(self, slot: int, queue: deque[tuple[int, BotGame]], slot_game: list[int | None],
              limit: np.ndarray, steps: np.ndarray, active: np.ndarray) -> None:
        if queue:
            index, game = queue.popleft()
            self._start(slot, game)
            slot_game[slot] = index
            limit[slot], steps[slot], active[slot] = game.max_steps, 0, True
        else:
            if active[slot]:
                self._idle(slot)
            slot_game[slot] = None
            active[slot] = False

    def _result(self, slot: int, game: BotGame, over: bool) -> BotGameResult:
        gs = self._gs_field.get(self.client.botClients[slot])
        winner = int(gs.winner()) if over else -1
        return BotGameResult(bots_mod.resolve_bot(game.bot_a).name,
                             bots_mod.resolve_bot(game.bot_b).name, _map_info(game.map).name,
                             game.seed, winner, int(gs.getTime()), not over)
