"""microRTS replays: order logs that the engine replays into observations, masks and labels.

**What a shard stores** (see :mod:`games.replays` for the container). Each game's orders as
they were issued through the adapter, one row per non-no-op unit order: ``orders`` ``int32
[N, 6]`` columns :data:`ORDER_COLUMNS` (game step, engine player, cell, action type, the
parameter of that type: a direction or the attack offset, produced unit type), sorted by step
and player; ``offsets`` ``int64 [G+1]`` where each game's rows start. Per game (JSON): map name
and SHA-1 of its file, height, width, ``players`` (the names of engine players 0 and 1),
``seed``, ``max_steps``, ``length``, ``winner`` (0, 1, or -1 for a draw), ``truncated``, and
``final`` (a hash of the final board seen from player 0). The shard's ``engine`` names the
engine files' hash and the client: replays need the same engine.

**Why an order log.** The engine is deterministic given the orders, so replaying the log through
the same self-play client rebuilds every observation and mask exactly, for any observation
setting of the run that reads it (fog of war, rotation); a 16x16 game takes about 2-3 KB.
Decoded arrays would take about 0.5 MB per game. Replaying costs an engine step, measured in
``tools/bench_replays.py`` against the cloning update that consumes it.

:class:`ReplayLogs` feeds a :class:`~games.microrts.teacher_game.TeacherGame` from a replay
folder: shards read one at a time in a seeded order per epoch, each env playing the next game
of its map; a game whose replay ends otherwise than its record is reported.
"""

from __future__ import annotations

import hashlib
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from games.core import Batch, Outcome
from games.microrts.engine import SDIST_SHA256
from games.microrts.maps import resolve_maps
from games.microrts.options import OBS_PLANES, MicroRTSOptions
from games.microrts.orders import _PARAM_COMPONENT
from games.microrts.teacher_game import TeacherGame
from games.replays import ReplayError, Shard, iter_shards, read_manifest, scan

ORDER_COLUMNS = ("t", "player", "cell", "type", "param", "unit_type")
ENGINE = {"microrts_sdist_sha256": SDIST_SHA256, "client": "JNIGridnetSharedMemClientSelfPlay",
          "unit_type_table": "original"}
_OWN, _ENEMY = OBS_PLANES.index("owner_own"), OBS_PLANES.index("owner_enemy")


def map_sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def board_hash(board: np.ndarray, seat0_player: int) -> str:
    """A hash of a final board ``[H, W, 29]`` seen by seat 0, as player 0 sees it."""
    planes = np.array(board, np.uint8)
    if seat0_player == 1:
        planes[..., [_OWN, _ENEMY]] = planes[..., [_ENEMY, _OWN]]
    return hashlib.sha1(planes.tobytes()).hexdigest()[:16]


def step_orders(actions: np.ndarray, players: np.ndarray, rotated: np.ndarray,
                steps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The orders in seat-frame ``actions`` ``[E, A, HW, 7]`` (seats play ``players`` ``[E,
    A]``, ``rotated`` ``bool [E, A]``; envs at game step ``steps`` ``[E]``) as log rows: the
    env of each row ``[K]`` and the rows ``int32 [K, 6]``, sorted by env, player and cell."""
    e, s, c = np.nonzero(actions[..., 0])
    rows = actions[e, s, c]  # [K, 7]
    kind = rows[:, 0]
    param = rows[np.arange(len(rows)), _PARAM_COMPONENT[kind]]
    turn = rotated[e, s]
    cells = np.where(turn, actions.shape[2] - 1 - c, c)
    moving = turn & (kind >= 1) & (kind <= 4)
    param = np.where(moving, (param + 2) % 4, param)
    param = np.where(turn & (kind == 5), 48 - param, param)
    out = np.stack([steps[e], players[e, s], cells, kind, param, rows[:, 5]], 1).astype(np.int32)
    order = np.lexsort((out[:, 2], out[:, 1], e))
    return e[order], out[order]


def log_to_rows(log: np.ndarray) -> np.ndarray:
    """Log rows ``[K, 6]`` -> engine-frame orders ``[K, 8]`` (``[cell, *action]``)."""
    out = np.zeros((len(log), 8), np.int32)
    out[:, 0] = log[:, 2]
    out[:, 1] = log[:, 3]
    k = np.arange(len(log))
    out[k, 1 + _PARAM_COMPONENT[log[:, 3]]] = log[:, 4]
    out[k, 1] = log[:, 3]  # type 0 rows (none stored) would have overwritten it
    produce = log[:, 3] == 4
    out[produce, 6] = log[produce, 5]
    return out


@dataclass
class ReplayGameRef:
    """One recorded game: where it is and what it was."""

    shard: Path
    index: int
    meta: dict[str, Any]


class ReplayLogs:
    """Recorded games as a :class:`~games.microrts.teacher_game.TeacherSource`.

    ``games`` (refs of the selected games, by map) are streamed shard by shard in a seeded
    order per epoch; env ``e`` plays the next game of its map. ``imitate`` (names as
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
        self.epoch = 0
        self._order: list[Path] = []
        self._cursor = 0
        self._queues: dict[str, deque[tuple[ReplayGameRef, np.ndarray]]] = {}
        self._game: TeacherGame | None = None
        self.current: list[tuple[ReplayGameRef, np.ndarray] | None] = []
        self._steps: np.ndarray = np.zeros(0, np.int64)
        self._step_rows: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}
        self.diverged = 0
        self.games_played = 0
        self._restore: dict[int, tuple[ReplayGameRef, np.ndarray]] = {}
        self._skip_until = np.zeros(0, np.int64)

    # ---------------------------------------------------------------- the stream

    def _next_shard(self) -> None:
        if self._cursor >= len(self._order):
            rng = np.random.default_rng((self.seed, self.epoch))
            paths = sorted(self._by_shard)
            self._order = [paths[i] for i in rng.permutation(len(paths))]
            self._cursor = 0
            self.epoch += 1
        path = self._order[self._cursor]
        self._cursor += 1
        wanted = self._by_shard[path]
        for shard in iter_shards([path], self.manifest):
            for ref in wanted:
                self._queues.setdefault(ref.meta["map"], deque()).append(
                    (ref, _game_orders(shard, ref.index)))
            return
        self._by_shard.pop(path)  # unreadable now: the warning said so; never again
        if not self._by_shard:
            raise ReplayError("every replay shard became unreadable")

    def _next_game(self, map_name: str) -> tuple[ReplayGameRef, np.ndarray]:
        for _ in range(2 * len(self._by_shard) + 2):
            queue = self._queues.get(map_name)
            if queue:
                return queue.popleft()
            self._next_shard()
        raise ReplayError(f"no replayed game on map {map_name}")

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
        """The stream's place: epoch, shard order and cursor, queued games, each env's game
        and how many of its steps were played (``steps`` ``[E]``)."""
        def ref(entry: tuple[ReplayGameRef, np.ndarray] | None) -> list[object] | None:
            return None if entry is None else [entry[0].shard.name, entry[0].index]

        return {"epoch": self.epoch, "order": [p.name for p in self._order],
                "cursor": self._cursor,
                "queues": {m: [ref(x) for x in q] for m, q in self._queues.items()},
                "current": [ref(x) for x in self.current], "steps": steps.tolist()}

    def restore(self, position: dict[str, Any]) -> None:
        """Continue from :meth:`position` (at the next ``begin`` of every env)."""
        by_name = {p.name: p for p in self._by_shard}
        refs = {(r.shard.name, r.index): r for rs in self._by_shard.values() for r in rs}
        wanted = [tuple(x) for q in position["queues"].values() for x in q]
        wanted += [tuple(x) for x in position["current"] if x is not None]
        loaded: dict[tuple[str, int], tuple[ReplayGameRef, np.ndarray]] = {}
        for name in sorted({w[0] for w in wanted}):
            for shard in iter_shards([by_name[name]], self.manifest) if name in by_name else []:
                for key in wanted:
                    if key[0] == name and key in refs:
                        loaded[key] = (refs[key], _game_orders(shard, int(key[1])))
        self.epoch, self._cursor = int(position["epoch"]), int(position["cursor"])
        self._order = [by_name[n] for n in position["order"] if n in by_name]
        self._queues = {m: deque(loaded[tuple(x)] for x in q if tuple(x) in loaded)
                        for m, q in position["queues"].items()}
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

    def imitated(self, e: int, player: int) -> bool:
        entry = self.current[e]
        if entry is None or (self._game is not None
                             and self._game.game_step[e] < self._skip_until[e]):
            return False
        meta = entry[0].meta
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
    shards = scan(folder)
    refs: list[ReplayGameRef] = []
    names: set[str] = set()
    steps: set[int] = set()
    for shard in shards:
        engine = shard.meta.get("engine", {})
        if engine.get("microrts_sdist_sha256") != SDIST_SHA256:
            raise ReplayError(f"{shard.path} was recorded with microRTS engine files "
                              f"{str(engine.get('microrts_sdist_sha256'))[:12]}; this selfplay "
                              f"runs {SDIST_SHA256[:12]}: record the games again")
        if shard.meta.get("game") != "microrts":
            raise ReplayError(f"{shard.path} holds games of {shard.meta.get('game')!r}, not "
                              "microrts")
        for i, meta in enumerate(shard.games):
            shape = (int(meta["height"]), int(meta["width"]))
            if size is not None and shape != size:
                raise ReplayError(f"{shard.path} holds {shape[0]}x{shape[1]} games (map "
                                  f"{meta['map']}); this run plays {size[0]}x{size[1]}")
            names.update(str(p).lower() for p in meta["players"])
            steps.add(int(meta["max_steps"]))
            key = hashlib.sha1(f"{shard.path.name}:{i}".encode()).digest()
            if (int.from_bytes(key[:4], "big") / 2**32 < share) == held_out:
                refs.append(ReplayGameRef(shard.path, i, meta))
    missing = sorted({n.lower() for n in imitate} - names)
    if missing:
        raise ReplayError(f"--imitate {', '.join(missing)}: no such player in {folder} "
                          f"(its players: {', '.join(sorted(names))})")
    if len(steps) > 1:
        raise ReplayError(f"{folder} mixes games of max_steps {sorted(steps)}; keep one "
                          "length per replay folder")
    if not refs:
        part = "held-out" if held_out else "training"
        raise ReplayError(f"{folder} has no game in its {part} share")
    _check_maps(refs)
    return refs


def _check_maps(refs: list[ReplayGameRef]) -> None:
    """Every recorded map still exists here, unchanged."""
    seen: dict[str, str] = {}
    for ref in refs:
        seen.setdefault(ref.meta["map"], ref.meta["map_sha1"])
    for name, digest in seen.items():
        info = resolve_maps([name])[0]
        if map_sha1(Path(info.path)) != digest:
            raise ReplayError(f"map {name} differs from the one the replays were recorded on")


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

    def replay_position(self) -> dict[str, object]:
        return self.logs.position(self.game_step)

    def resume_at(self, position: dict[str, object]) -> Batch:
        self.logs.restore(position)
        return self.reset()
