"""The microRTS order log: how a game's orders are stored in replay shards, and how recorded
games are appended to a replay folder.

The format is described in :mod:`games.microrts.replays`: one row per non-no-op unit order,
columns :data:`ORDER_COLUMNS`, engine frame (unrotated), sorted by step and player; per game
its metadata (:class:`RecordedGame`). :class:`ReplayWriter` appends games to a folder in shards
(:class:`games.replays.ShardAppender`), refusing a folder whose games another engine, board
size or game length played (a cloning run reads one of each per folder).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from games.microrts.engine import SDIST_SHA256
from games.microrts.options import ACTION_NVEC, OBS_PLANES
from games.microrts.orders import _PARAM_COMPONENT
from games.replays import ReplayError, Shard, ShardAppender, encode_shard

ORDER_COLUMNS = ("t", "player", "cell", "type", "param", "unit_type")
ENGINE = {"microrts_sdist_sha256": SDIST_SHA256, "client": "JNIGridnetSharedMemClientSelfPlay",
          "unit_type_table": "original"}
_OWN, _ENEMY = OBS_PLANES.index("owner_own"), OBS_PLANES.index("owner_enemy")


def map_sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


_HASHED_PLANES = OBS_PLANES.index("off_map")  # the planes of format v1's hashes


def board_hash(board: np.ndarray, seat0_player: int) -> str:
    """A hash of a final board ``[H, W, planes]`` seen by seat 0, as player 0 sees it (the
    planes up to ``visible``: replays recorded before the off-map plane keep their hashes)."""
    planes = np.array(board[..., :_HASHED_PLANES], np.uint8)
    if seat0_player == 1:
        planes[..., [_OWN, _ENEMY]] = planes[..., [_ENEMY, _OWN]]
    return hashlib.sha1(planes.tobytes()).hexdigest()[:16]


def step_orders(actions: np.ndarray, players: np.ndarray, rotated: np.ndarray,
                steps: np.ndarray, acting: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """The orders in seat-frame ``actions`` ``[E, A, HW, 7]`` (seats play ``players`` ``[E,
    A]``, ``rotated`` ``bool [E, A]``; envs at game step ``steps`` ``[E]``) as log rows: the
    env of each row ``[K]`` and the rows ``int32 [K, 6]``, sorted by env, player and cell.
    With ``acting`` ``bool [E, A, HW]`` only the cells where it is set (a unit that can act:
    the engine ignores orders elsewhere)."""
    ordered = actions[..., 0] != 0
    if acting is not None:
        ordered &= acting
    e, s, c = np.nonzero(ordered)
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


SHARD_ARRAYS = ("orders", "offsets")
"""the arrays of a microRTS shard (see :func:`encode_games`)"""
GAME_KEYS = ("map", "map_sha1", "height", "width", "players", "max_steps", "length", "winner",
             "final")
"""what each recorded game's metadata must hold to be replayed and checked"""


@dataclass(frozen=True)
class GameFacts:
    """What a recorded game's metadata says about the games it may sit with."""

    size: tuple[int, int]
    max_steps: int
    players: tuple[str, ...]
    """lower-case names of engine players 0 and 1"""
    map: str


def check_shard(shard: Shard) -> None:
    """:class:`ReplayError` unless ``shard`` holds microRTS games of this engine."""
    if shard.meta.get("game") != "microrts":
        raise ReplayError(f"{shard.path} holds games of {shard.meta.get('game')!r}, not "
                          "microrts")
    engine = shard.meta.get("engine")
    sha = engine.get("microrts_sdist_sha256") if isinstance(engine, dict) else None
    if sha != SDIST_SHA256:
        raise ReplayError(f"{shard.path} was recorded with microRTS engine files "
                          f"{str(sha)[:12]}; this selfplay runs {SDIST_SHA256[:12]}: record "
                          "the games again")
    assert isinstance(engine, dict)
    for key, ours in ENGINE.items():  # the same files, played otherwise
        if engine.get(key) != ours:
            raise ReplayError(f"{shard.path} was recorded with the engine's {key} "
                              f"{engine.get(key)!r}; this selfplay plays {ours!r}: record the "
                              "games again")


def game_facts(path: Path, index: int, meta: Any) -> GameFacts:
    """Game ``index`` of shard ``path``'s metadata, checked (:data:`GAME_KEYS`); a one-line
    :class:`ReplayError` naming the shard if it is malformed."""
    try:
        missing = [key for key in GAME_KEYS if key not in meta]
        if missing:
            raise KeyError(", ".join(missing))
        players = meta["players"]
        if not isinstance(players, list) or len(players) != 2 or not all(
                isinstance(p, str) for p in players):
            raise ValueError(f"players must be two names, got {players!r}")
        for key in ("map", "map_sha1"):
            if not isinstance(meta[key], str) or not meta[key]:
                raise ValueError(f"{key} must be a name, got {meta[key]!r}")
        for key in ("height", "width", "max_steps", "length", "winner"):
            if not isinstance(meta[key], int) or isinstance(meta[key], bool):
                raise ValueError(f"{key} must be an integer, got {meta[key]!r}")
        if meta["winner"] not in (-1, 0, 1) or min(meta["height"], meta["width"],
                                                   meta["max_steps"]) < 1:
            raise ValueError("winner must be -1, 0 or 1 and the sizes >= 1")
        opening = meta.get("opening", 0)
        if not isinstance(opening, int) or isinstance(opening, bool) or opening < 0:
            raise ValueError(f"opening must be a step >= 0, got {opening!r}")
        return GameFacts((meta["height"], meta["width"]), meta["max_steps"],
                         tuple(p.lower() for p in players), meta["map"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ReplayError(f"{path}: game {index}'s metadata is malformed "
                          f"({type(exc).__name__}: {exc}); not a shard of `selfplay record`"
                          ) from exc


def order_log_problem(shard: Shard) -> str | None:
    """What is wrong with ``shard``'s order arrays (None: nothing): integer ``orders [N, 6]``
    split by increasing ``offsets`` ``[G + 1]`` from 0 to N, each game's rows within its
    board and the action space (:data:`ACTION_NVEC`). A shard that fails is corrupt: read as
    it is, it would index outside the board or the action arrays mid-run."""
    orders, offsets = shard.arrays["orders"], shard.arrays["offsets"]
    if orders.dtype.kind not in "iu" or orders.ndim != 2 or orders.shape[1] != len(ORDER_COLUMNS):
        return (f"its orders must be integers [N, {len(ORDER_COLUMNS)}], not {orders.dtype} "
                f"{list(orders.shape)}")
    if (offsets.dtype.kind not in "iu" or len(offsets) == 0 or offsets[0] != 0
            or offsets[-1] != len(orders) or (np.diff(offsets) < 0).any()):
        return f"its game offsets do not split its {len(orders)} orders"
    types = orders[:, 3]
    if ((orders[:, 0] < 0).any() or ((orders[:, 1] != 0) & (orders[:, 1] != 1)).any()
            or (types < 0).any() or (types >= ACTION_NVEC[0]).any()):
        return "its orders hold steps, players or action types out of range"
    limit = np.asarray(ACTION_NVEC)[_PARAM_COMPONENT[types]]
    if ((orders[:, 4] < 0) | (orders[:, 4] >= limit)).any() or (
            (orders[:, 5] < 0) | (orders[:, 5] >= ACTION_NVEC[5])).any():
        return "its orders hold parameters out of range"
    for index, meta in enumerate(shard.games):
        cells = int(meta["height"]) * int(meta["width"])
        rows = orders[int(offsets[index]):int(offsets[index + 1]), 2]
        if ((rows < 0) | (rows >= cells)).any():
            return f"game {index} orders units outside its {meta['height']}x{meta['width']} board"
    return None


@dataclass
class RecordedGame:
    """One finished game: its metadata (keys as in :mod:`games.microrts.replays`) and its
    order log ``int32 [N, 6]``."""

    meta: dict[str, Any]
    orders: np.ndarray


def encode_games(games: list[RecordedGame]) -> bytes:
    """The bytes of a shard holding ``games``."""
    counts = [len(g.orders) for g in games]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    orders = (np.concatenate([g.orders for g in games]) if games
              else np.zeros((0, len(ORDER_COLUMNS)), np.int32))
    return encode_shard("microrts", ENGINE, [g.meta for g in games],
                        {"orders": orders.astype(np.int32), "offsets": offsets})


class ReplayWriter(ShardAppender[RecordedGame]):
    """microRTS games appended to ``folder`` in shards of ``shard_games`` (see
    :class:`games.replays.ShardAppender`); :meth:`check` refuses games that do not fit the
    folder's."""

    def __init__(self, folder: Path, shard_games: int = 100) -> None:
        self.kinds: set[tuple[int, int, int]] = set()
        """``(height, width, max_steps)`` of the games in the folder"""
        super().__init__(folder, shard_games, encode_games)

    def check_folder(self, shards: list[Shard]) -> None:
        """The folder's shards must hold microRTS games of this engine (their board sizes
        and lengths are kept for :meth:`check`)."""
        for shard in shards:
            try:
                check_shard(shard)
            except ReplayError as exc:
                raise ReplayError(f"{exc}; record into another folder") from exc
            for i, meta in enumerate(shard.games):
                facts = game_facts(shard.path, i, meta)
                self.kinds.add((*facts.size, facts.max_steps))

    def check(self, size: tuple[int, int], max_steps: int) -> None:
        """Games of this board ``size`` and length limit may join the folder (one of each
        per folder: a cloning run replays one board size and game length)."""
        kind = (size[0], size[1], max_steps)
        if self.kinds and kind not in self.kinds:
            h, w, steps = sorted(self.kinds)[0]
            raise ReplayError(f"{self.folder} holds {h}x{w} games of max_steps {steps}; these "
                              f"are {size[0]}x{size[1]} games of max_steps {max_steps}: record "
                              "into another folder")
        self.kinds.add(kind)
