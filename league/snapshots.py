"""The snapshot store: a learner's weights frozen as a file and registered as a league player.

A snapshot file is a selfplay checkpoint (written atomically, loaded without executing code)
holding ``agent`` (the network's ``state_dict``), ``config`` (the training config mapping) and
``meta`` (:class:`SnapshotInfo`), so :func:`selfplay.evaluate.load_agent` and
``selfplay eval --checkpoint`` read it as they read a training checkpoint. A snapshot whose file
is missing or corrupt is reported on stderr, flagged in the database and skipped.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from games.files import CheckpointError, load_checkpoint, save_checkpoint
from league.db import LeagueDB
from league.records import Player

SNAPSHOT_FORMAT = "league-snapshot"


@dataclass(frozen=True)
class SnapshotInfo:
    """What a snapshot records about where it came from (also the player's metadata)."""

    game: str
    env_steps: int
    parent: str | None  # the snapshot (or run) it was trained from
    config_hash: str
    created: float
    update: int = 0
    role: str = "main"


@dataclass(frozen=True)
class Snapshot:
    weights: dict[str, Any]  # the network's state_dict
    config: dict[str, Any]  # the training config mapping
    info: SnapshotInfo
    path: Path


def config_hash(config: Mapping[str, Any]) -> str:
    """A short stable hash of a config mapping (sorted-key JSON, SHA-256, 16 hex digits)."""
    text = json.dumps(config, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def snapshot_name(run: str, update: int) -> str:
    """The conventional player name of a run's snapshot: ``<run>@<update>``."""
    return f"{run}@{update:07d}"


def snapshot_run(name: str) -> str:
    """The run of a player named by :func:`snapshot_name` (the whole name otherwise)."""
    run, sep, update = name.rpartition("@")
    return run if sep and update.isdigit() else name


def save_snapshot(db: LeagueDB, directory: str | Path, name: str, weights: Mapping[str, Any],
                  config: Mapping[str, Any], env_steps: int, parent: str | None = None,
                  update: int = 0, role: str = "main") -> int:
    """Write ``<directory>/<name>.pt`` atomically and register it; returns the player id."""
    info = SnapshotInfo(game=db.game, env_steps=int(env_steps), parent=parent,
                        config_hash=config_hash(config), created=time.time(),
                        update=int(update), role=role)
    path = Path(directory) / f"{_file_stem(name)}.pt"
    save_checkpoint(path, {"kind": SNAPSHOT_FORMAT, "game": db.game, "agent": dict(weights),
                           "config": dict(config), "meta": asdict(info)})
    return db.add_player(name, "snapshot", path=path.resolve(), metadata=asdict(info))


def load_snapshot(path: str | Path, game: str | None = None) -> Snapshot:
    """Read a snapshot file; :class:`CheckpointError` if missing, corrupt or of another game."""
    path = Path(path)
    state = load_checkpoint(path)
    if state.get("kind") != SNAPSHOT_FORMAT:
        raise CheckpointError(f"{path} is a checkpoint but not a league snapshot")
    try:
        info = SnapshotInfo(**state["meta"])
        weights, config = state["agent"], state["config"]
    except (KeyError, TypeError) as exc:
        raise CheckpointError(f"{path} lacks snapshot metadata, weights or config") from exc
    if game is not None and info.game != game:
        raise CheckpointError(f"{path} is a snapshot of game {info.game!r}, not {game!r}")
    return Snapshot(weights, config, info, path)


def load_player_snapshot(db: LeagueDB, ref: int | str) -> Snapshot | None:
    """A snapshot player's file, or ``None`` (with a warning and a flag in the database)."""
    player = db.player(ref)
    try:
        if player.path is None:
            raise CheckpointError(f"player {player.name!r} has no file")
        snapshot = load_snapshot(player.path, db.game)
    except CheckpointError as exc:
        report_broken(db, player, str(exc))
        return None
    if player.broken is not None:
        db.mark_broken(player.id, None)  # the file is back
    return snapshot


def check_players(db: LeagueDB) -> list[tuple[Player, str]]:
    """Try every snapshot's file; flag and return the ones that cannot be loaded."""
    broken = []
    for player in db.players():
        if player.kind == "snapshot" and load_player_snapshot(db, player.id) is None:
            flagged = db.player(player.id)
            broken.append((flagged, flagged.broken or ""))
    return broken


def report_broken(db: LeagueDB, player: Player, reason: str) -> None:
    """Warn on stderr that ``player`` is skipped, and flag it in the database."""
    print(f"warning: skipping player {player.name!r}: {reason}", file=sys.stderr)
    db.mark_broken(player.id, reason)


def _file_stem(name: str) -> str:
    """A player name made safe as a file name (``/`` and other separators become ``_``)."""
    return "".join(c if c.isalnum() or c in "-_.@" else "_" for c in name)
