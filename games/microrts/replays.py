"""microRTS replays: order logs that the engine replays into observations, masks and labels.

**What a shard stores** (see :mod:`games.replays` for the container; the log's code is in
:mod:`games.microrts.orderlog`). Each game's orders as they were issued through the adapter,
one row per non-no-op unit order: ``orders`` ``int32 [N, 6]`` columns :data:`ORDER_COLUMNS`
(game step, engine player, cell, action type, the parameter of that type: a direction or the
attack offset, produced unit type), sorted by step and player; ``offsets`` ``int64 [G+1]``
where each game's rows start. Per game (JSON): map name
and SHA-1 of its file, height, width, ``players`` (the names of engine players 0 and 1),
``seed``, ``max_steps``, ``length``, ``winner`` (0, 1, or -1 for a draw), ``truncated``, and
``final`` (a hash of the final board seen from player 0). The shard's ``engine`` names the
engine files' hash and the client: replays need the same engine.

**Why an order log.** The engine is deterministic given the orders, so replaying the log through
the same self-play client rebuilds every observation and mask exactly, for any observation
setting of the run that reads it (fog of war, rotation); a 16x16 game takes 0.4-2.2 KB.
Decoded arrays would take about 55 MB per 950-step game (observations, masks and actions of
both seats, uncompressed). Replaying costs an engine step, measured in
``tools/bench_replays.py`` against the cloning update that consumes it.

:class:`ReplayLogs` feeds a :class:`~games.microrts.teacher_game.TeacherGame` from a replay
folder: shards read one at a time in a seeded order per epoch, each env playing the next game
of its map; a game whose replay ends otherwise than its record is reported.
"""

from __future__ import annotations

import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from games.core import Batch, GameError, Outcome
from games.microrts.maps import resolve_maps
from games.microrts.options import MicroRTSOptions
from games.microrts.orderlog import (  # noqa: F401 - the format's pieces, named here too
    ENGINE,
    ORDER_COLUMNS,
    SHARD_ARRAYS,
    board_hash,
    check_shard,
    game_facts,
    log_to_rows,
    map_sha1,
    order_log_problem,
    step_orders,
)
from games.microrts.teacher_game import TeacherGame
from games.replays import (
    ReplayError,
    Shard,
    held_out_split,
    iter_shards,
    read_manifest,
    scan,
)


@dataclass
class ReplayGameRef:
    """One recorded game: where it is and what it was."""

    shard: Path
    index: int
    meta: dict[str, Any]


@dataclass
class MapStream:
    """The games of one map: its shards in a seeded order per epoch, and the games read from
    the current one that no env has taken yet."""

    map: str
    index: int
    shards: list[Path]
    order: list[Path] = field(default_factory=list)
    cursor: int = 0
    epoch: int = 0
    queue: deque[tuple[ReplayGameRef, np.ndarray]] = field(default_factory=deque)


class ReplayLogs:
    """Recorded games as a :class:`~games.microrts.teacher_game.TeacherSource`.

    ``games`` (refs of the selected games) are streamed map by map: each map's shards in a
    seeded order per epoch, one shard read at a time and only its games of that map queued;
    env ``e`` plays the next game of its map. ``imitate`` (names as
    recorded, matched without case) or ``winners_only`` pick the labelled seats.
    """

    def __init__(self, games: list[ReplayGameRef], imitate: list[str], winners_only: bool,
                 seed: int, manifest: dict[str, dict[str, Any]]) -> None:
        self.imitate = {name.lower() for name in imitate}
        self.winners_only = winners_only
        self.seed = seed
        self.manifest = manifest
        self._by_shard: dict[Path, list[ReplayGameRef]] = {}
        for ref in games:
            self._by_shard.setdefault(ref.shard, []).append(ref)
        maps = sorted({ref.meta["map"] for ref in games})
        self._streams = {m: MapStream(m, i, sorted({r.shard for r in games
                                                    if r.meta["map"] == m}))
                         for i, m in enumerate(maps)}
        self._game: TeacherGame | None = None
        self.current: list[tuple[ReplayGameRef, np.ndarray] | None] = []
        self._steps: np.ndarray = np.zeros(0, np.int64)
        self._step_rows: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}
        self.diverged = 0
        self.games_played = 0
        self._restore: dict[int, tuple[ReplayGameRef, np.ndarray]] = {}
        self._skip_until = np.zeros(0, np.int64)

    # ---------------------------------------------------------------- the stream

    def _next_shard(self, stream: MapStream) -> None:
        """Queue the games of ``stream``'s map in its next shard (a new seeded order at
        each epoch); a shard that became unreadable is dropped for good."""
        if stream.cursor >= len(stream.order):
            rng = np.random.default_rng((self.seed, stream.index, stream.epoch))
            stream.order = [stream.shards[i] for i in rng.permutation(len(stream.shards))]
            stream.cursor = 0
            stream.epoch += 1
        path = stream.order[stream.cursor]
        stream.cursor += 1
        wanted = [ref for ref in self._by_shard[path] if ref.meta["map"] == stream.map]
        for shard in iter_shards([path], self.manifest, SHARD_ARRAYS):
            problem = order_log_problem(shard)
            if problem is None:
                stream.queue.extend((ref, _game_orders(shard, ref.index)) for ref in wanted)
                return
            games = self.manifest.get(path.name, {}).get("games", len(shard.games))
            print(f"warning: skipping corrupt replay shard {path}: {problem} "
                  f"({games} games lost)", file=sys.stderr, flush=True)
        for other in self._streams.values():
            if path in other.shards:
                other.shards.remove(path)
                other.order = [p for p in other.order if p != path]
                other.cursor = min(other.cursor, len(other.order))
        if not stream.shards:
            raise ReplayError(f"no replay shard of map {stream.map} is readable (the warnings "
                              "above name each one and its problem)")

    def _next_game(self, map_name: str) -> tuple[ReplayGameRef, np.ndarray]:
        stream = self._streams.get(map_name)
        if stream is None:
            raise ReplayError(f"no replayed game on map {map_name}")
        while not stream.queue:
            self._next_shard(stream)
        return stream.queue.popleft()

    # ---------------------------------------------------------------- TeacherSource

    def begin(self, game: TeacherGame, envs: np.ndarray) -> None:
        if self._game is not game:
            self._game = game
            self.current = [None] * game.num_envs
            if len(self._skip_until) != game.num_envs:  # (restore() sets it)
                self._skip_until = np.zeros(game.num_envs, np.int64)
        for e in envs.tolist():
            restored = self._restore.pop(e, None)
            if restored is None:
                self._skip_until[e] = 0
            self.current[e] = restored or self._next_game(game.env_map[e].name)
            self._step_rows.pop(e, None)

    def position(self, steps: np.ndarray) -> dict[str, object]:
        """The stream's place: per map its epoch, shard order, cursor and queued games; each
        env's game and how many of its steps were played (``steps`` ``[E]``)."""
        def ref(entry: tuple[ReplayGameRef, np.ndarray] | None) -> list[object] | None:
            return None if entry is None else [entry[0].shard.name, entry[0].index]

        return {"maps": {m: {"epoch": st.epoch, "order": [p.name for p in st.order],
                             "cursor": st.cursor, "queue": [ref(x) for x in st.queue]}
                         for m, st in self._streams.items()},
                "current": [ref(x) for x in self.current], "steps": steps.tolist()}

    def restore(self, position: dict[str, Any]) -> None:
        """Continue from :meth:`position` (at the next ``begin`` of every env)."""
        by_name = {p.name: p for p in self._by_shard}
        refs = {(r.shard.name, r.index): r for rs in self._by_shard.values() for r in rs}
        saved = position["maps"]
        wanted = [tuple(x) for st in saved.values() for x in st["queue"]]
        wanted += [tuple(x) for x in position["current"] if x is not None]
        loaded: dict[tuple[str, int], tuple[ReplayGameRef, np.ndarray]] = {}
        for name in sorted({w[0] for w in wanted} & by_name.keys()):
            for shard in iter_shards([by_name[name]], self.manifest, SHARD_ARRAYS):
                problem = order_log_problem(shard)
                if problem is not None:  # damaged since the checkpoint: its games are lost
                    print(f"warning: skipping corrupt replay shard {shard.path}: {problem}",
                          file=sys.stderr, flush=True)
                    continue
                for key in wanted:
                    if key[0] == name and key in refs:
                        loaded[key] = (refs[key], _game_orders(shard, int(key[1])))
        for m, stream in self._streams.items():
            if m not in saved:
                continue
            st = saved[m]
            order = [by_name[n] for n in st["order"] if n in by_name]
            stream.epoch, stream.order = int(st["epoch"]), order
            # the cursor counts the surviving shards read already: a shard read before the
            # checkpoint and unreadable since must not move it past one never read
            stream.cursor = sum(n in by_name for n in st["order"][:int(st["cursor"])])
            stream.queue = deque(loaded[tuple(x)] for x in st["queue"] if tuple(x) in loaded)
        self._restore = {e: loaded[tuple(x)] for e, x in enumerate(position["current"])
                         if x is not None and tuple(x) in loaded}
        self._skip_until = np.array(position["steps"], np.int64)
        self._game = None  # begin() re-binds and keeps the restored envs

    def ended(self, game: TeacherGame, batch: Batch, envs: np.ndarray) -> None:
        ep = batch.episodes
        first = {int(e): i for i, e in reversed(list(enumerate(ep.env.tolist())))}
        for e in envs.tolist():
            entry = self.current[e]
            if entry is None or e not in first:
                continue
            ref, _ = entry
            self.games_played += 1
            i = first[e]
            seat, player0 = int(ep.seat[i]), int(game.players[e, 0])
            outcome = int(ep.outcome[i])
            player = int(game.players[e, seat])
            winner = (-1 if outcome not in (Outcome.WIN, Outcome.LOSS) else
                      player if outcome == Outcome.WIN else 1 - player)
            board = game.final_board(e)
            final = board_hash(board, player0) if board is not None else ""
            meta = ref.meta
            if (int(ep.length[i]) != meta["length"] or winner != meta["winner"]
                    or final != meta["final"]):
                self.diverged += 1
                if self.diverged == 1:
                    print(f"warning: the replay of game {ref.index} of {ref.shard} ended "
                          f"otherwise than recorded (length {int(ep.length[i])} vs "
                          f"{meta['length']}, winner {winner} vs {meta['winner']}); was it "
                          "recorded with another engine?", file=sys.stderr)

    def orders(self, e: int, player: int, t: int) -> np.ndarray:
        entry = self.current[e]
        if entry is None:
            return np.zeros((0, 8), np.int32)
        cached = self._step_rows.get(e)
        if cached is None or cached[0] != t:  # both seats of an env ask about one step
            log = entry[1]
            lo, hi = np.searchsorted(log[:, 0], [t, t + 1])
            cached = (t, log_to_rows(log[lo:hi]), log[lo:hi, 1])
            self._step_rows[e] = cached
        _, rows, players = cached
        return rows[players == player]

    def plays(self, e: int, player: int) -> bool:
        return True  # both sides of a recorded game

    def imitated(self, e: int, player: int) -> bool:
        entry = self.current[e]
        if entry is None or (self._game is not None
                             and self._game.game_step[e] < self._skip_until[e]):
            return False
        meta = entry[0].meta
        if self._game is not None and self._game.game_step[e] < meta.get("opening", 0):
            return False  # the random opening: recorded, never learned
        if self.winners_only and meta["winner"] != player:
            return False
        return not self.imitate or meta["players"][player].lower() in self.imitate


def _game_orders(shard: Shard, index: int) -> np.ndarray:
    offsets = shard.arrays["offsets"]
    return shard.arrays["orders"][int(offsets[index]):int(offsets[index + 1])]


def select_games(folder: Path, imitate: list[str], winners_only: bool, held_out: bool,
                 share: float, size: tuple[int, int] | None) -> list[ReplayGameRef]:
    """The games of ``folder`` in the training share (or the ``held_out`` one), checked
    against this engine, the run's board ``size`` and the players named in ``imitate``."""
    shards = scan(folder, warn=not held_out)  # the training share warned already
    every: list[ReplayGameRef] = []
    names: set[str] = set()
    steps: set[int] = set()
    for shard in shards:
        check_shard(shard)
        for i, meta in enumerate(shard.games):
            facts = game_facts(shard.path, i, meta)
            shape = facts.size
            if size is not None and shape != size:
                raise ReplayError(f"{shard.path} holds {shape[0]}x{shape[1]} games (map "
                                  f"{facts.map}); this run plays {size[0]}x{size[1]} (--set "
                                  f"game.options.map={facts.map} clones on the replays' map)")
            names.update(facts.players)
            steps.add(facts.max_steps)
            every.append(ReplayGameRef(shard.path, i, meta))
    held = held_out_split([f"{ref.shard.name}:{ref.index}" for ref in every], share)
    refs = [ref for ref, h in zip(every, held.tolist(), strict=True) if h == held_out]
    missing = sorted({n.lower() for n in imitate} - names)
    if missing:
        raise ReplayError(f"--imitate {', '.join(missing)}: no such player in {folder} "
                          f"(its players: {', '.join(sorted(names))})")
    if len(steps) > 1:
        raise ReplayError(f"{folder} mixes games of max_steps {sorted(steps)}; keep one "
                          "length per replay folder")
    part = "held-out" if held_out else "training"
    if not refs:
        fix = ("record more games, or set bc.validate_every=0 (no validation)" if held_out
               else "record more games")
        raise ReplayError(f"{folder} has no game in its {part} share: {fix}")
    in_share = {name.lower() for ref in refs for name in ref.meta["players"]}
    absent = sorted({n.lower() for n in imitate} - in_share)
    if absent:  # in the folder, not in this share: nothing to learn from, or to validate on
        fix = ("nothing to validate on: record more games, or set bc.validate_every=0"
               if held_out else "nothing to learn from: record more games of them")
        raise ReplayError(f"--imitate {', '.join(absent)}: no game of {folder}'s {part} share "
                          f"({len(refs)} games) has them, so there is {fix}")
    if winners_only and not any(ref.meta["winner"] in (0, 1) for ref in refs):
        fix = ("nothing to imitate" if not held_out else "nothing to validate on: record "
               "more games, or set bc.validate_every=0")
        raise ReplayError(f"--winners-only: no game of {folder}'s {part} share has a winner "
                          f"(every game was drawn), so there is {fix}")
    _check_maps(folder, refs)
    return refs


def _check_maps(folder: Path, refs: list[ReplayGameRef]) -> None:
    """Every game's map still exists here, unchanged (each game's hash is checked: a
    folder may hold games recorded before and after a map file was edited)."""
    by_map: dict[str, dict[str, Path]] = {}  # map -> its recorded hashes -> a shard of each
    for ref in refs:
        by_map.setdefault(ref.meta["map"], {}).setdefault(ref.meta["map_sha1"], ref.shard)
    for name, digests in by_map.items():
        try:
            here = map_sha1(Path(resolve_maps([name])[0].path))
        except GameError as exc:
            raise ReplayError(f"{folder} was recorded on map {name}, which is not here "
                              f"({str(exc).split(';')[0]}): put the map file back, or record "
                              "the games again") from exc
        for digest, shard in digests.items():
            if digest != here:
                raise ReplayError(f"{shard} holds games of map {name} as it was before an edit "
                                  f"(sha1 {digest[:12]}, the file here is {here[:12]}): restore "
                                  "the map file, or move those shards out of the folder")


def replay_logs(folder: Path, imitate: list[str], winners_only: bool, held_out: bool,
                share: float, seed: int, size: tuple[int, int] | None
                ) -> tuple[ReplayLogs, list[str], int]:
    """The source for a replay folder, the maps it plays and its games' ``max_steps``."""
    refs = select_games(folder, imitate, winners_only, held_out, share, size)
    maps = sorted({ref.meta["map"] for ref in refs})
    return (ReplayLogs(refs, imitate, winners_only, seed, read_manifest(folder)), maps,
            int(refs[0].meta["max_steps"]))


class ReplayGame(TeacherGame):
    """A :class:`TeacherGame` replaying a folder's games (:class:`ReplayLogs`), with a place
    in the stream to save and resume (:class:`~games.core.SupportsReplayPosition`)."""

    def __init__(self, options: MicroRTSOptions, num_envs: int, source: ReplayLogs,
                 seed: int | None = None, name: str = "microrts") -> None:
        super().__init__(options, num_envs, source, seed=seed, name=name)
        self.logs = source

    def let_students_play(self, seats: np.ndarray) -> None:
        """Refused: a replay's games must follow their record."""
        if np.asarray(seats, bool).any():
            raise GameError("microrts: replayed games follow their record; only live "
                            "teachers let the learner play their seats")

    def replay_position(self) -> dict[str, object]:
        return self.logs.position(self.game_step)

    def resume_at(self, position: dict[str, object]) -> Batch:
        self.logs.restore(position)
        return self.reset()
