"""Recording scripted-bot games into replay shards (``selfplay record --game microrts``).

The games are planned up front, so a resumed recorder writes exactly the shards still missing:
game ``i`` plays pairing ``i % P`` of the players (every two distinct players, both sides; a
single player plays itself), and shard ``k`` holds games ``k*G .. k*G+G-1`` on map
``maps[k % len(maps)]``. Shards are recorded in worker processes (spawned, one JVM each), each
running a :class:`~games.microrts.teacher_game.TeacherGame` of up to ``parallel`` games at once
whose teachers are the planned bots; what they order is logged as the engine issued it. The
parent lists each finished shard in the manifest; shards already listed (or written but not
yet listed, and readable) are kept.
"""

from __future__ import annotations

import multiprocessing
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from games.core import GameError, Outcome
from games.microrts import bots as bots_mod
from games.microrts.maps import resolve_maps
from games.microrts.options import MicroRTSOptions
from games.microrts.replays import ENGINE, board_hash, map_sha1, step_orders
from games.microrts.teacher_game import LiveBots, TeacherGame
from games.replays import (
    CorruptShard,
    encode_shard,
    list_shard,
    read_manifest,
    read_shard,
    shard_name,
    write_shard,
)


@dataclass(frozen=True)
class RecordPlan:
    """What ``selfplay record`` records."""

    players: tuple[str, ...]
    maps: tuple[str, ...]
    games: int
    shard_games: int = 100
    max_steps: int = 2000
    seed: int = 0
    parallel: int = 16
    """games played at once in each worker"""

    def pairings(self) -> list[tuple[str, str]]:
        names = self.players
        if len(names) == 1:
            return [(names[0], names[0])]
        return [side for i, a in enumerate(names) for b in names[i + 1:]
                for side in ((a, b), (b, a))]

    @property
    def num_shards(self) -> int:
        return -(-self.games // self.shard_games)

    def shard_games_of(self, k: int) -> list[tuple[str, str]]:
        pairs = self.pairings()
        first = k * self.shard_games
        return [pairs[i % len(pairs)] for i in range(first, min(self.games,
                                                                first + self.shard_games))]


def check_plan(plan: RecordPlan) -> RecordPlan:
    """The plan with canonical bot names and checked maps; :class:`GameError` otherwise."""
    if plan.games < 1 or plan.shard_games < 1 or plan.parallel < 1 or plan.max_steps < 1:
        raise GameError("games, shard size, parallel games and max steps must be >= 1")
    if not plan.players:
        raise GameError("name the players to record (--players)")
    players = tuple(bots_mod.resolve_bot(name).name for name in plan.players)
    infos = resolve_maps(list(plan.maps))
    sizes = {info.shape for info in infos}
    if len(sizes) > 1:
        raise GameError(f"maps of several sizes ({', '.join(f'{h}x{w}' for h, w in sizes)}): "
                        "record one size per replay folder")
    return RecordPlan(players, tuple(info.name for info in infos), plan.games,
                      plan.shard_games, plan.max_steps, plan.seed, plan.parallel)


def record_shard(plan: RecordPlan, k: int, folder: Path) -> tuple[int, int, int]:
    """Play and write shard ``k`` of ``plan``; (shard, games, engine steps)."""
    wanted = plan.shard_games_of(k)
    map_name = plan.maps[k % len(plan.maps)]
    info = resolve_maps([map_name])[0]
    parallel = min(plan.parallel, len(wanted))
    queue = list(range(len(wanted)))
    env_game: list[int | None] = [None] * parallel

    def schedule(e: int, _: int) -> tuple[str, str]:
        g = queue.pop(0) if queue else None  # None: an extra game, not recorded
        env_game[e] = g
        return wanted[g if g is not None else 0]

    bots = LiveBots(list(plan.players), seed=plan.seed + 7919 * k, schedule=schedule)
    options = MicroRTSOptions(map=map_name, bots=[], num_selfplay_envs=parallel,
                              max_steps=plan.max_steps)
    logs: list[list[np.ndarray]] = [[] for _ in range(parallel)]
    games: list[dict[str, Any] | None] = [None] * len(wanted)
    orders: list[np.ndarray | None] = [None] * len(wanted)
    steps = 0
    sha = map_sha1(Path(info.path))
    game = TeacherGame(options, parallel, bots, seed=plan.seed + k)
    try:
        unrotated = np.zeros(game.players.shape, bool)  # recorded as the engine sees it
        game.reset()
        while any(g is None for g in games):
            playing = list(env_game)
            env, rows = step_orders(game.teacher_actions, game.players, unrotated,
                                    game.game_step)
            if len(rows):
                bounds = np.searchsorted(env, np.arange(parallel + 1))
                for e in range(parallel):
                    if bounds[e + 1] > bounds[e] and playing[e] is not None:
                        logs[e].append(rows[bounds[e]:bounds[e + 1]])
            batch = game.step(game.teacher_actions)
            steps += parallel
            ep = batch.episodes
            for i in np.flatnonzero(ep.seat == 0).tolist():
                e = int(ep.env[i])
                g = playing[e]
                if g is None:
                    continue
                p0 = int(game.players[e, 0])
                outcome = int(ep.outcome[i])
                winner = (-1 if outcome not in (Outcome.WIN, Outcome.LOSS) else
                          p0 if outcome == Outcome.WIN else 1 - p0)
                board = game.final_board(e)
                games[g] = {"map": map_name, "map_sha1": sha, "height": info.shape[0],
                            "width": info.shape[1], "players": list(wanted[g]),
                            "seed": [plan.seed + 7919 * k, e], "max_steps": plan.max_steps,
                            "length": int(ep.length[i]), "winner": winner,
                            "truncated": bool(batch.truncated[e]),
                            "final": board_hash(board, p0) if board is not None else ""}
                orders[g] = (np.concatenate(logs[e]) if logs[e]
                             else np.zeros((0, 6), np.int32))
                logs[e] = []
    finally:
        game.close()
    counts = [len(o) for o in orders if o is not None]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    data = encode_shard("microrts", ENGINE, [g for g in games if g is not None],
                        {"orders": np.concatenate([o for o in orders if o is not None]),
                         "offsets": offsets})
    write_shard(folder, k, data)
    return k, len(wanted), steps


def _kept_shards(folder: Path, plan: RecordPlan) -> set[int]:
    """Shards already recorded: listed in the manifest, or written and readable (listed
    now); a written but unreadable one is removed, to be recorded again."""
    listed = read_manifest(folder)
    kept = set()
    for k in range(plan.num_shards):
        path = folder / shard_name(k)
        if not path.is_file():
            continue
        if path.name in listed:
            kept.add(k)
            continue
        try:
            shard = read_shard(path, arrays=False)
        except CorruptShard:  # another format version is an error, not something to delete
            path.unlink()
            continue
        list_shard(folder, path, len(shard.games))
        kept.add(k)
    return kept


def record(plan: RecordPlan, folder: Path, processes: int = 1,
           progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Record ``plan`` into ``folder`` (resuming: finished shards are kept); a summary."""
    plan = check_plan(plan)
    folder.mkdir(parents=True, exist_ok=True)
    kept = _kept_shards(folder, plan)
    todo = [k for k in range(plan.num_shards) if k not in kept]
    start = time.perf_counter()
    recorded = steps = 0
    done_games = sum(len(plan.shard_games_of(k)) for k in kept)
    if progress is not None:
        progress(done_games, plan.games)

    def finished(k: int, games: int, engine_steps: int) -> None:
        nonlocal recorded, steps, done_games
        list_shard(folder, folder / shard_name(k), games)
        recorded += games
        steps += engine_steps
        done_games += games
        if progress is not None:
            progress(done_games, plan.games)

    if processes <= 1 or len(todo) <= 1:
        for k in todo:
            finished(*record_shard(plan, k, folder))
    else:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(processes, len(todo)), mp_context=context) as pool:
            futures = [pool.submit(record_shard, plan, k, folder) for k in todo]
            for future in as_completed(futures):
                finished(*future.result())
    seconds = time.perf_counter() - start
    return {"folder": str(folder), "games": plan.games, "recorded": recorded,
            "kept": plan.games - recorded, "shards": plan.num_shards,
            "players": list(plan.players), "maps": list(plan.maps), "seconds": seconds,
            "games_per_hour": recorded / seconds * 3600 if seconds > 0 and recorded else 0.0,
            "cores": max(1, processes)}


def print_progress(done: int, total: int) -> None:
    print(f"\r{done}/{total} games", end="" if done < total else "\n", file=sys.stderr,
          flush=True)
