"""Replay folders: recorded games of any family, in shards.

A replay folder holds shards ``shard-NNNNNN.npz`` and a ``manifest.jsonl``. A shard is a
NumPy ``.npz`` archive (zip, deflated; read with ``allow_pickle=False``, so loading runs no
code) of:

- ``meta``: UTF-8 JSON bytes (``uint8``): ``format`` (``"selfplay-replays"``), ``version``,
  ``game`` (the registry name), ``engine`` (what the family needs to replay exactly, e.g. the
  engine files' hash), ``created``, and ``games``: one object per game with the family's
  per-game metadata (for microRTS: map and its hash, size, players, seed, length, winner...).
- the family's arrays (for microRTS: the order log and each game's offset into it).

Shards are written atomically (a temp file renamed into place) and then listed in
``manifest.jsonl`` (``{"shard", "games", "sha256", "bytes"}`` a line, rewritten atomically),
so a killed recorder keeps every finished shard; a shard file missing from the manifest (a
kill between the two writes) is checked and listed, or rewritten, when recording resumes.
Readers skip a truncated or corrupt shard with a warning naming it and the games lost. A
second family stores its own arrays and per-game keys under the same format version.

Games recorded as they are played (``selfplay play --record``, league tournaments) are appended
by a :class:`ShardAppender`: a shard of ``shard_games`` games is written (and listed) as soon as
it is full, numbered after the folder's last one, so a rerun into the same folder adds shards and
a killed process loses at most the games of its unfinished shard.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import re
import sys
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from games.core import GameError
from games.files import atomic_write_bytes, remove_stale_temp_files

FORMAT = "selfplay-replays"
VERSION = 1
MANIFEST = "manifest.jsonl"
PLAN = "plan.json"
"""a planned recording's plan (`selfplay record`): the folder is that recording's"""


class ReplayError(GameError):
    """A replay folder or shard that cannot be used (one line)."""


class CorruptShard(ReplayError):
    """A truncated or damaged shard: readers skip it (and say so); other replay errors stop
    the run."""


@dataclass(frozen=True)
class Shard:
    """One shard: its metadata, its games' metadata and the family's arrays."""

    path: Path
    meta: dict[str, Any]
    games: list[dict[str, Any]]
    arrays: dict[str, np.ndarray]


def shard_name(index: int) -> str:
    return f"shard-{index:06d}.npz"


SHARD_NAME = re.compile(r"shard-(\d+)\.npz")


def shard_index(path: Path) -> int:
    match = SHARD_NAME.fullmatch(path.name)
    if match is None:
        raise ReplayError(f"{path.name} is not a replay shard's name (shard-NNNNNN.npz)")
    return int(match.group(1))


def shard_paths(folder: Path) -> list[Path]:
    """The files of ``folder`` named like shards (``shard-<index>.npz``), in index order;
    other files (a stray ``shard-old.npz`` too) are not the folder's games."""
    return sorted((p for p in folder.glob("shard-*.npz") if SHARD_NAME.fullmatch(p.name)),
                  key=shard_index)


def encode_shard(game: str, engine: Mapping[str, Any], games: list[dict[str, Any]],
                 arrays: Mapping[str, np.ndarray]) -> bytes:
    """The bytes of a shard (see the module docstring)."""
    meta = {"format": FORMAT, "version": VERSION, "game": game, "engine": dict(engine),
            "created": time.time(), "games": games}
    payload: dict[str, Any] = {"meta": np.frombuffer(json.dumps(meta).encode(), np.uint8),
                               **arrays}
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **payload)
    return buffer.getvalue()


def write_shard(folder: Path, index: int, data: bytes) -> Path:
    """Write shard ``index`` atomically (it is listed by :func:`list_shard`)."""
    path = folder / shard_name(index)
    atomic_write_bytes(path, lambda handle: handle.write(data))
    return path


def read_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """The manifest's entries by shard file name (a torn last line is ignored)."""
    path = folder / MANIFEST
    entries: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return entries
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
            entries[str(entry["shard"])] = entry
        except (ValueError, KeyError, TypeError):
            continue
    return entries


def matches_manifest(path: Path, entry: dict[str, Any]) -> bool:
    """Whether shard ``path`` holds the bytes its manifest ``entry`` lists (size, SHA-256)."""
    try:
        if path.stat().st_size != entry.get("bytes"):
            return False
        return hashlib.sha256(path.read_bytes()).hexdigest() == entry.get("sha256")
    except OSError:
        return False


def list_shard(folder: Path, path: Path, games: int) -> None:
    """Add the finished shard ``path`` (``games`` games) to the folder's manifest."""
    entries = read_manifest(folder)
    data = path.read_bytes()
    entries[path.name] = {"shard": path.name, "games": games,
                          "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    text = "".join(json.dumps(entries[name]) + "\n" for name in sorted(entries))
    atomic_write_bytes(folder / MANIFEST, lambda handle: handle.write(text.encode()))


def read_shard(path: Path, arrays: bool = True, required: tuple[str, ...] = ()) -> Shard:
    """Load a shard (only its metadata with ``arrays=False``); :class:`CorruptShard` if it
    is truncated or corrupt or lacks one of the ``required`` arrays, :class:`ReplayError` if
    it is not a replay shard of this format version."""
    try:
        with path.open("rb") as handle:  # numpy reads other bytes as a pickle it refuses
            head = handle.read(4)
        if head != b"PK\x03\x04":
            raise zipfile.BadZipFile("an empty file" if not head else
                                     "not an .npz (zip) archive")
        with np.load(path, allow_pickle=False) as archive:
            meta = json.loads(archive["meta"].tobytes().decode())
            loaded = ({key: archive[key] for key in archive.files if key != "meta"}
                      if arrays else {})
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, zlib.error,
            NotImplementedError, RuntimeError) as exc:  # the last two: a mangled zip header
        raise CorruptShard(f"corrupt or truncated replay shard {path}: "
                          f"{str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__}"
                          ) from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise ReplayError(f"{path} is not a selfplay replay shard")
    if meta.get("version") != VERSION:
        raise ReplayError(f"{path} has replay format version {meta.get('version')}; this "
                          f"selfplay reads version {VERSION}")
    games = meta.get("games")
    if not isinstance(games, list):
        raise ReplayError(f"{path} lacks its games' metadata")
    missing = [key for key in required if key not in loaded] if arrays else []
    offsets = loaded.get("offsets")
    if not missing and "offsets" in required and offsets is not None and (
            offsets.ndim != 1 or len(offsets) != len(games) + 1):
        missing = ["offsets of its games"]
    if missing:
        raise CorruptShard(f"replay shard {path} lacks its arrays ({', '.join(missing)})")
    return Shard(path, meta, games, loaded)


def shard_files(folder: Path) -> list[Path]:
    """The folder's shard files, in index order; :class:`ReplayError` for a missing folder or
    one without shards."""
    if not folder.is_dir():
        raise ReplayError(f"no such replay folder: {folder}")
    paths = shard_paths(folder)
    if not paths:
        raise ReplayError(f"replay folder {folder} holds no shards (shard-*.npz); record "
                          "some with `selfplay record` or convert some with `selfplay "
                          "import-replays`")
    return paths


def scan(folder: Path, warn: bool = True) -> list[Shard]:
    """Every readable shard's metadata (no arrays), skipping corrupt ones with a warning that
    names the file and the games lost (as the manifest counts them)."""
    manifest = read_manifest(folder)
    found = []
    first_of: dict[str, Path] = {}  # the games' metadata -> the shard that holds them
    for path in shard_files(folder):
        try:
            shard = read_shard(path, arrays=False)
        except CorruptShard as exc:
            if warn:
                warn_skipped(exc, manifest.get(path.name))
            continue
        games = hashlib.sha1(json.dumps(shard.games, sort_keys=True).encode()).hexdigest()
        if games in first_of:  # a copy under another shard name: its games count once
            if warn:
                print(f"warning: {path} holds the games of {first_of[games].name} (a copy?): "
                      "they are read once", file=sys.stderr)
            continue
        first_of[games] = path
        found.append(shard)
    if not found:
        raise ReplayError(f"replay folder {folder} holds no readable shard")
    return found


def warn_skipped(exc: CorruptShard, entry: Mapping[str, Any] | None) -> None:
    """Say on stderr that a shard is skipped, and how many games that loses."""
    lost = f"{entry['games']} games" if entry and "games" in entry else "its games"
    print(f"warning: {exc}; skipped ({lost} lost)", file=sys.stderr)


def iter_shards(paths: list[Path], manifest: Mapping[str, Mapping[str, Any]],
                required: tuple[str, ...] = ()) -> Iterator[Shard]:
    """Load ``paths`` one at a time (arrays included), skipping unreadable ones and those
    without the ``required`` arrays with a warning."""
    for path in paths:
        try:
            yield read_shard(path, required=required)
        except CorruptShard as exc:
            warn_skipped(exc, manifest.get(path.name))


def held_out_split(keys: list[str], share: float) -> np.ndarray:
    """``bool [N]``: which of the games named ``keys`` (``"<shard file>:<index>"``) form the
    held-out (validation) share, by each key's hash, so the split never changes as shards are
    added; at least one game of two or more when ``share > 0``, so validation has a game."""
    fractions = np.array([int.from_bytes(hashlib.sha1(key.encode()).digest()[:4], "big")
                          / 2**32 for key in keys])
    held = fractions < share
    if len(keys) > 1 and share > 0:
        held[int(np.argmin(fractions))] = True
    return held


def folder_totals(folder: Path) -> tuple[int, int]:
    """``(games, shards)`` the folder's manifest lists (zeros for a folder without one)."""
    entries = read_manifest(folder)
    return sum(int(entry.get("games", 0)) for entry in entries.values()), len(entries)


def remove_stale_temps(folder: Path) -> None:
    """Remove the temp files of atomic writes a killed writer left in ``folder`` (``.NAME.*.tmp``
    of a shard, the manifest or the plan: never renamed into place, so never part of the
    folder; other files are not ours). Call before writing to it."""
    remove_stale_temp_files(folder, (".shard-*.tmp", f".{MANIFEST}.*.tmp", f".{PLAN}.*.tmp"))


def next_shard_index(folder: Path) -> int:
    """The index of the next shard appended to ``folder`` (after its last one). A shard
    written but not listed (a kill between the two writes) is listed now if it reads, and
    removed if not: it never counted. Without a manifest the folder is not one a writer of
    ours started, and an unreadable shard in it is an error, never removed."""
    listed = read_manifest(folder)
    ours = (folder / MANIFEST).is_file()  # before this loop lists any shard
    last = -1
    for path in shard_paths(folder):
        if path.name not in listed:
            try:
                shard = read_shard(path, arrays=False)
            except CorruptShard as exc:
                if not ours:
                    raise ReplayError(f"{exc}; {folder} has no {MANIFEST}: not a replay "
                                      "folder to add to") from exc
                path.unlink()
                continue
            list_shard(folder, path, len(shard.games))
        last = max(last, shard_index(path))
    return last + 1


WRITER_LOCK = ".writer.lock"


@dataclass
class _Claim:
    descriptor: int
    holders: int
    next_index: int | None = None  # the next shard index of this process's appenders


_CLAIMS: dict[str, _Claim] = {}  # folder (real path) -> this process's claim
_CLAIMS_LOCK = threading.RLock()  # re-entrant: an appender collected by the GC inside


def claim_folder(folder: Path) -> str:
    """Claim ``folder`` for this process's writers (an ``flock`` on its :data:`WRITER_LOCK`,
    shared by the appenders of this process, released with the last one or when the process
    ends, even by SIGKILL): two processes appending at once picked the same shard index and
    one replaced the other's shard. :class:`ReplayError` while another process holds it, or
    where the folder cannot be locked; the key for :func:`release_folder`."""
    key = os.path.realpath(folder)
    with _CLAIMS_LOCK:
        claim = _CLAIMS.get(key)
        if claim is not None:
            claim.holders += 1
            return key
        try:
            fd = os.open(os.path.join(key, WRITER_LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ReplayError(f"cannot write into {folder}: {exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise ReplayError(f"{folder} is being written by another process; wait for it to "
                              "finish, or write into another folder") from None
        except OSError as exc:  # a file system without locks (some network or FUSE mounts)
            os.close(fd)
            raise ReplayError(f"cannot lock {folder} for writing ({exc.strerror or exc}); "
                              "write replays to a local disk") from exc
        _CLAIMS[key] = _Claim(fd, 1)
        return key


def take_shard_index(key: str, folder: Path, take: bool = True) -> int:
    """The next shard index for an appender of the claimed ``folder`` (``key``), shared by
    this process's appenders so that two of them never write the same shard; the first call
    lists the folder's shards (:func:`next_shard_index`). ``take=False`` only looks."""
    with _CLAIMS_LOCK:
        claim = _CLAIMS[key]
        if claim.next_index is None:
            claim.next_index = next_shard_index(folder)
        index = claim.next_index
        claim.next_index += int(take)
        return index


def release_folder(key: str) -> None:
    """Undo one :func:`claim_folder`."""
    with _CLAIMS_LOCK:
        claim = _CLAIMS.get(key)
        if claim is None:
            return
        claim.holders -= 1
        if claim.holders == 0:
            del _CLAIMS[key]
            os.close(claim.descriptor)  # closing the descriptor releases the flock


G = TypeVar("G")


class ShardAppender(Generic[G]):
    """Games appended to a replay folder in shards of ``shard_games`` (see the module
    docstring); ``encode(games)`` makes a shard's bytes (:func:`encode_shard`)."""

    def __init__(self, folder: Path, shard_games: int,
                 encode: Callable[[list[G]], bytes]) -> None:
        self._claim: str | None = None
        if shard_games < 1:
            raise ReplayError(f"games per shard must be >= 1, got {shard_games}")
        if folder.exists() and not folder.is_dir():
            raise ReplayError(f"{folder} is a file; name a folder for the replays")
        self._check(folder)  # before anything there is changed (the lock file included)
        folder.mkdir(parents=True, exist_ok=True)
        self._claim = claim_folder(folder)  # written by this process alone from now on
        try:
            self._check(folder)  # again: another writer may have finished meanwhile
            if _CLAIMS[self._claim].holders == 1:  # no appender of ours is writing here
                remove_stale_temps(folder)
            self.folder, self.shard_games, self.encode = folder, shard_games, encode
            take_shard_index(self._claim, folder, take=False)  # its shards listed now
        except BaseException:
            release_folder(self._claim)
            self._claim = None
            raise
        self.pending: list[G] = []
        self.games = 0
        """games written by this appender"""
        self.shards: list[str] = []
        """the shards it wrote"""

    def _check(self, folder: Path) -> None:
        if (folder / PLAN).is_file():
            raise ReplayError(f"{folder} holds a recording of `selfplay record` ({PLAN}), "
                              "which would count these games as its own; write into another "
                              "folder")
        if folder.is_dir() and shard_paths(folder):
            self.check_folder(scan(folder, warn=False))

    def check_folder(self, shards: list[Shard]) -> None:
        """Refuse (:class:`ReplayError`) a folder whose readable ``shards`` these games may not
        join; called before the appender changes anything there. Any, by default."""

    def add(self, game: G) -> None:
        """One finished game; the shard is written once it holds ``shard_games``."""
        self.pending.append(game)
        if len(self.pending) >= self.shard_games:
            self.flush()

    def flush(self) -> None:
        """Write the games waiting as a shard (a partial one when called before it is full)."""
        if not self.pending:
            return
        assert self._claim is not None, "a closed appender"
        index = take_shard_index(self._claim, self.folder)
        path = write_shard(self.folder, index, self.encode(self.pending))
        list_shard(self.folder, path, len(self.pending))
        self.games += len(self.pending)
        self.shards.append(path.name)
        self.pending = []

    def close(self) -> dict[str, Any]:
        """Write the last, partial shard; what was written: ``folder``, ``games``, ``shards``."""
        try:
            self.flush()
        finally:
            if self._claim is not None:
                release_folder(self._claim)
                self._claim = None
        return {"folder": str(self.folder), "games": self.games, "shards": len(self.shards)}

    def __del__(self) -> None:
        if self._claim is not None:
            release_folder(self._claim)
