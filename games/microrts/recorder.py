"""Recording scripted-bot games into replay shards (``selfplay record --game microrts``).

The games are planned up front, so a resumed recorder writes exactly the shards still missing:
game ``i`` plays pairing ``i % P`` of the players (every two distinct players, both sides; a
single player plays itself; with ``focus``, only the pairings with a focused player), and
shard ``k`` holds games ``k*G .. k*G+G-1`` on map
``maps[k % len(maps)]``. Shards are recorded in worker processes (spawned, one JVM each) or
Ray tasks on a cluster (``--ray``; only the parent writes files), each
running a :class:`~games.microrts.teacher_game.TeacherGame` of up to ``parallel`` games at once
whose teachers are the planned bots; what they order is logged as the engine issued it. The
parent lists each finished shard in the manifest; shards already listed (or written but not
yet listed, and readable) are kept.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Generator
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from games.core import GameError
from games.files import atomic_write_bytes
from games.microrts import bots as bots_mod
from games.microrts.maps import resolve_maps
from games.microrts.options import MicroRTSOptions
from games.microrts.orderlog import RecordedGame, encode_games
from games.microrts.teacher_game import LiveBots, TeacherGame
from games.pools import DetachedPool, stop_process_pool
from games.replays import (
    MANIFEST,
    PLAN,
    CorruptShard,
    claim_folder,
    list_shard,
    matches_manifest,
    read_manifest,
    read_shard,
    release_folder,
    remove_stale_temps,
    shard_name,
    shard_paths,
    write_shard,
)

if TYPE_CHECKING:
    from games.workers.ray_cluster import RaySession


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
    opening: int = 0
    """each game opens with up to this many cycles of random legal actions (see
    :class:`~games.microrts.teacher_game.TeacherGame`): deterministic bots then differ"""
    focus: tuple[str, ...] = ()
    """only the pairings with one of these players (the teacher a clone will imitate, which
    then plays every game); empty: every pairing"""

    def pairings(self) -> list[tuple[str, str]]:
        names = self.players
        if len(names) == 1:
            return [(names[0], names[0])]
        return [side for i, a in enumerate(names) for b in names[i + 1:]
                if not self.focus or a in self.focus or b in self.focus
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
    twice = sorted({name for name in players if players.count(name) > 1})
    if twice:
        raise GameError(f"--players names {', '.join(twice)} more than once (a third of the "
                        "games would be a bot against itself); name each player once")
    focus = tuple(bots_mod.resolve_bot(name).name for name in plan.focus)
    outside = [name for name in focus if name not in players]
    if outside:
        raise GameError(f"--focus {', '.join(outside)} is not among the players "
                        f"({', '.join(players)})")
    if focus and len(players) < 2:
        raise GameError("--focus needs at least two players (it keeps their pairings with "
                        "the focused ones)")
    infos = resolve_maps(list(plan.maps))
    sizes = {info.shape for info in infos}
    if len(sizes) > 1:
        raise GameError(f"maps of several sizes ({', '.join(f'{h}x{w}' for h, w in sizes)}): "
                        "record one size per replay folder")
    if plan.opening < 0 or plan.opening >= plan.max_steps:
        raise GameError(f"--opening must be in 0..{plan.max_steps - 1} (below --max-steps "
                        f"{plan.max_steps}), got {plan.opening}")
    return RecordPlan(players, tuple(info.name for info in infos), plan.games,
                      plan.shard_games, plan.max_steps, plan.seed, plan.parallel, plan.opening,
                      focus)


def check_resumed_plan(folder: Path, plan: RecordPlan) -> None:
    """The folder's recording plan (``plan.json``, written by the first run) must be
    ``plan``: another plan would record games twice or mix games of two plans. Writes it on
    the first run. ``parallel`` may differ (it changes no game)."""
    wanted = {k: v for k, v in asdict(plan).items()
              if k != "parallel" and not (k == "focus" and not v)}  # older plans: no focus
    wanted = json.loads(json.dumps(wanted))  # tuples as lists, as read back
    path = folder / PLAN
    if path.is_file():
        try:
            found = json.loads(path.read_text())
        except ValueError as exc:
            raise GameError(f"{path} is corrupt ({exc}); delete it only if the folder's "
                            "shards were recorded with this very command") from exc
        diff = sorted(k for k in wanted.keys() | found.keys() if wanted.get(k) != found.get(k))
        if diff:
            shown = ", ".join(f"{k} {found.get(k)!r} -> {wanted.get(k)!r}" for k in diff)
            raise GameError(f"{folder} was recorded with another plan ({shown}); record "
                            "into another folder, or repeat the first command to resume")
        return
    if shard_paths(folder) or (folder / MANIFEST).is_file():
        raise GameError(f"{folder} holds replay shards that `selfplay record` did not start "
                        f"there (no {PLAN}); record into a new folder")
    data = json.dumps(wanted, indent=1).encode()
    atomic_write_bytes(path, lambda handle: handle.write(data))


def play_shard(plan: RecordPlan, k: int) -> tuple[bytes, int, int]:
    """Play shard ``k`` of ``plan``: (the shard's bytes, games, engine steps)."""
    wanted = plan.shard_games_of(k)
    map_name = plan.maps[k % len(plan.maps)]
    parallel = min(plan.parallel, len(wanted))
    queue = list(range(len(wanted)))
    env_game: list[int | None] = [None] * parallel
    games: list[RecordedGame | None] = [None] * len(wanted)
    game: TeacherGame | None = None

    def schedule(e: int, _: int) -> tuple[str, str]:
        g = queue.pop(0) if queue else None  # None: an extra game, not recorded
        env_game[e] = g
        pair = wanted[g if g is not None else 0]
        assert game is not None
        game.name_seats(e, None if g is None else [pair[p] for p in game.players[e]])
        return pair

    def finished(e: int, recorded: RecordedGame) -> None:
        g = env_game[e]
        assert g is not None
        recorded.meta["seed"] = [plan.seed + 7919 * k, e]
        games[g] = recorded

    bots = LiveBots(list(plan.players), seed=plan.seed + 7919 * k, schedule=schedule)
    options = MicroRTSOptions(map=map_name, bots=[], num_selfplay_envs=parallel,
                              max_steps=plan.max_steps)
    steps = 0
    game = TeacherGame(options, parallel, bots, seed=plan.seed + k, opening=plan.opening)
    try:
        game.record_to(finished)
        game.reset()
        while any(g is None for g in games):
            game.step(game.teacher_actions)
            steps += parallel
    finally:
        game.close()
    return encode_games([g for g in games if g is not None]), len(wanted), steps


def _kept_shards(folder: Path, plan: RecordPlan) -> set[int]:
    """Shards already recorded: listed in the manifest with the bytes it lists, or written
    and readable (listed now); one damaged since it was listed, or written but unreadable,
    is removed, to be recorded again."""
    listed = read_manifest(folder)
    kept = set()
    for k in range(plan.num_shards):
        path = folder / shard_name(k)
        if not path.is_file():
            continue
        if path.name in listed:
            if matches_manifest(path, listed[path.name]):
                kept.add(k)
            else:
                print(f"warning: replay shard {path} differs from the manifest (damaged "
                      "since it was written): recording it again", file=sys.stderr)
                path.unlink()
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
           progress: Callable[[int, int], None] | None = None,
           ray_address: str | None = None) -> dict[str, Any]:
    """Record ``plan`` into ``folder`` (resuming: finished shards are kept); a summary.
    ``ray_address``: the shards are played as Ray tasks (:func:`play_on_ray`)."""
    plan = check_plan(plan)
    session = None
    if ray_address is not None:  # joined first: an unreachable cluster leaves no folder
        from games.workers.ray_cluster import connect

        session = connect(ray_address, num_cpus=processes if ray_address == "local" else None)
    try:
        return _record(plan, folder, processes, progress, session)
    finally:
        if session is not None:
            session.close()


def _record(plan: RecordPlan, folder: Path, processes: int,
            progress: Callable[[int, int], None] | None,
            session: RaySession | None) -> dict[str, Any]:
    """:func:`record`'s body, on Ray when ``session`` is given."""
    folder.mkdir(parents=True, exist_ok=True)
    claim = claim_folder(folder)  # a second recorder of the folder is refused
    try:
        return _record_claimed(plan, folder, processes, progress, session)
    finally:
        release_folder(claim)


def _record_claimed(plan: RecordPlan, folder: Path, processes: int,
                    progress: Callable[[int, int], None] | None,
                    session: RaySession | None) -> dict[str, Any]:
    remove_stale_temps(folder)  # a killed recorder's unfinished writes
    check_resumed_plan(folder, plan)
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

    # only this process writes the folder (it holds the writer's lock): workers and Ray tasks
    # return their shards' bytes
    if session is not None:
        played = play_on_ray(plan, todo, session)
    elif processes <= 1 or len(todo) <= 1:
        played = ((k, *play_shard(plan, k)) for k in todo)
    else:
        played = play_in_processes(plan, todo, processes)
    with contextlib.closing(played):  # an error here stops the workers at once too
        for k, data, games, engine_steps in played:
            write_shard(folder, k, data)
            finished(k, games, engine_steps)
    seconds = time.perf_counter() - start
    return {"folder": str(folder), "games": plan.games, "recorded": recorded,
            "kept": plan.games - recorded, "shards": plan.num_shards,
            "players": list(plan.players), "maps": list(plan.maps), "seconds": seconds,
            "games_per_hour": recorded / seconds * 3600 if seconds > 0 and recorded else 0.0,
            "cores": max(1, processes), "backend": "local" if session is None else "ray"}


def play_in_processes(plan: RecordPlan, shards: list[int], processes: int
                      ) -> Generator[tuple[int, bytes, int, int], None, None]:
    """Shards ``shards`` of ``plan`` played by ``processes`` worker processes (a JVM each):
    ``(shard, bytes, games, engine steps)`` as each finishes. The workers leave stop signals
    to this process, which ends them at once on any error, Ctrl-C or SIGTERM, and they end
    with it when it is killed (they kept writing shards into a folder nobody held)."""
    pool = DetachedPool(min(processes, len(shards)))
    try:
        futures = {pool.submit(play_shard, plan, k): k for k in shards}
        for future in as_completed(futures):
            yield (futures[future], *future.result())
    except BaseException:
        stop_process_pool(pool, kill=True)  # they ignore SIGTERM (detached_worker_init)
        raise
    pool.shutdown()


def play_on_ray(plan: RecordPlan, shards: list[int], session: RaySession
                ) -> Generator[tuple[int, bytes, int, int], None, None]:
    """Shards ``shards`` of ``plan`` played as Ray tasks (one CPU and one JVM each, on any
    node of the cluster ``session`` joined): ``(shard, bytes, games, engine steps)`` as each
    finishes. Only this process writes files: a task returns its shard's bytes. A task whose
    worker or node is lost is run again by Ray (up to 3 times)."""
    ray = session.ray
    task = ray.remote(_shard_task).options(num_cpus=1, max_retries=3)
    pending = {task.remote(plan, k): k for k in shards}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        k = pending.pop(done[0])
        try:
            data, games, steps = ray.get(done[0])
        except ray.exceptions.RayError as exc:
            cause = exc.cause if isinstance(exc, ray.exceptions.RayTaskError) else exc
            text = str(cause).strip() or type(cause).__name__
            raise GameError(f"recording shard {k} failed on Ray: "
                            f"{text.splitlines()[0]}") from exc
        yield k, data, games, steps


def _shard_task(plan: RecordPlan, k: int) -> tuple[bytes, int, int]:
    """A Ray task's body (its own engine in the Ray worker process)."""
    return play_shard(plan, k)
