"""The league database: one SQLite file (WAL mode) shared by every process of a league.

Tables: ``meta`` (schema version, game, rating parameters), ``players``, ``matches`` (with a
unique idempotency ``key``), ``ratings`` (current TrueSkill μ/σ, Elo and game counts per player)
and ``rating_history`` (one row per player per match). Every write is one ``BEGIN IMMEDIATE``
transaction, so several processes can record results at once and a killed process never leaves
half a result: :meth:`LeagueDB.record_match` stores the match and both rating updates together,
or nothing. :meth:`LeagueDB.replay_ratings` recomputes every rating from the stored match list.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

import numpy as np

from league.ratings import PlayerRating, RatingConfig, rate_match, score_of
from league.records import Match, MatchRecord, Player, Standing

SCHEMA_VERSION = 1
PlayerKind = Literal["snapshot", "bot", "checkpoint"]
KINDS: tuple[str, ...] = ("snapshot", "bot", "checkpoint")

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE players (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('snapshot', 'bot', 'checkpoint')),
    path TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    frozen INTEGER NOT NULL DEFAULT 0,
    broken TEXT,
    mu0 REAL NOT NULL, sigma0 REAL NOT NULL, elo0 REAL NOT NULL,
    created REAL NOT NULL);
CREATE TABLE matches (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    player_a INTEGER NOT NULL REFERENCES players(id),
    player_b INTEGER NOT NULL REFERENCES players(id),
    side_a INTEGER NOT NULL,
    map TEXT NOT NULL DEFAULT '',
    seed INTEGER,
    outcome INTEGER NOT NULL CHECK (outcome IN (-1, 0, 1)),
    length INTEGER NOT NULL,
    duration REAL NOT NULL,
    created REAL NOT NULL);
CREATE INDEX matches_pair ON matches (player_a, player_b);
CREATE INDEX matches_b ON matches (player_b);
CREATE TABLE ratings (
    player_id INTEGER PRIMARY KEY REFERENCES players(id),
    mu REAL NOT NULL, sigma REAL NOT NULL, elo REAL NOT NULL,
    games INTEGER NOT NULL DEFAULT 0, wins INTEGER NOT NULL DEFAULT 0,
    draws INTEGER NOT NULL DEFAULT 0, losses INTEGER NOT NULL DEFAULT 0,
    updated REAL NOT NULL);
CREATE INDEX ratings_conservative ON ratings ((mu - 3.0 * sigma) DESC);
CREATE TABLE rating_history (
    player_id INTEGER NOT NULL REFERENCES players(id),
    match_id INTEGER NOT NULL REFERENCES matches(id),
    mu REAL NOT NULL, sigma REAL NOT NULL, elo REAL NOT NULL,
    PRIMARY KEY (player_id, match_id)) WITHOUT ROWID;
"""


LEAGUE_DIR = Path("runs") / "league"  # the games' default databases, relative to the cwd
# how the errors about a database file say to use another
ANOTHER_DB = "pick another file (--db; league.db when training)"


def database_file(name: str) -> Path:
    """The league database file ``name`` means (``--db``, ``league.db``): a folder (one that
    exists, or a name ending in ``/``) means its ``league.db``, so one name opens one file
    in every command."""
    path = Path(name)
    folder = path.is_dir() or name.endswith(("/", os.sep))
    return path / "league.db" if folder else path


def default_path(game: str) -> Path:
    """Where a game's league database lives unless ``--db`` says otherwise."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in game)
    return LEAGUE_DIR / f"{safe}.db"


def _not_writable(path: Path) -> str:
    """`` (its folder ... is not writable)`` when that is why SQLite could not open ``path``
    for writing (the database's journal files live beside it), else ``""``."""
    folder = path.parent
    if folder.is_dir() and not os.access(folder, os.W_OK):
        return f" (its folder {folder} is not writable: SQLite writes its journal beside it)"
    if path.is_file() and not os.access(path, os.W_OK):
        return " (the file is not writable)"
    return ""


class LeagueError(Exception):
    """A user-facing league problem: wrong database, unknown player, bad argument."""


def _check_same_player(name: str, row: tuple[Any, ...], kind: str, path: str | None,
                       frozen: bool, db_path: Path) -> None:
    """Raise if ``name`` is registered with another kind, path or frozen flag."""
    _, old_kind, old_path, old_frozen = row
    differ = []
    if old_kind != kind:
        differ.append(f"kind {old_kind!r}, not {kind!r}")
    if path is not None and old_path != path:  # no path given: any path matches
        differ.append(f"path {old_path!r}, not {path!r}")
    if bool(old_frozen) != frozen:
        differ.append("a frozen rating" if old_frozen else "a rating that is not frozen")
    if differ:
        raise LeagueError(f"player {name!r} is already in {db_path} with {'; '.join(differ)}; "
                          f"give this one another name, or {ANOTHER_DB}")


class LeagueDB:
    """A league database file; create it with a game name, reopen it with or without one.

    ``config`` sets the rating parameters of a new database; an existing one keeps its own
    (passing a different ``config`` is an error).
    """

    def __init__(self, path: str | Path, game: str | None = None,
                 config: RatingConfig | None = None, create: bool = True,
                 timeout: float = 60.0, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        if not self.path.exists():
            if not create or read_only:
                raise LeagueError(f"no league database at {self.path}")
            if game is None:
                raise LeagueError(f"{self.path} does not exist; creating a league database "
                                  f"needs a game name")
            above = next((p for p in self.path.parents if p.exists()), None)
            if above is not None and not above.is_dir():
                raise LeagueError(f"{self.path}: {above} is a file, not a folder")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise LeagueError(f"cannot create the folder of league database {self.path}: "
                                  f"{exc.strerror or exc}") from exc
        elif self.path.is_dir():
            raise LeagueError(f"{self.path} is a folder, not a league database file")
        elif ((not create or read_only) and self.path.is_file()
              and self.path.stat().st_size == 0):
            raise LeagueError(f"{self.path} is an empty file, not a league database")
        try:
            self._conn = (self._connect_read_only(timeout) if read_only else
                          sqlite3.connect(self.path, timeout=timeout, isolation_level=None))
        except sqlite3.Error as exc:  # a folder it cannot create the file in, say
            raise LeagueError(f"cannot open league database {self.path}: {exc}"
                              f"{_not_writable(self.path)}") from exc
        try:
            self._conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            self._conn.execute("PRAGMA foreign_keys = ON")
            # the schema first: another program's SQLite file is refused as it was found
            self.game, self.config = self._init_schema(game, config)
            if not read_only:
                self._set_wal(timeout)
                self._conn.execute("PRAGMA synchronous = NORMAL")  # WAL: crash-durable
        except sqlite3.OperationalError as exc:
            self._conn.close()
            raise LeagueError(f"cannot open league database {self.path}: {exc}"
                              f"{'' if read_only else _not_writable(self.path)}") from exc
        except sqlite3.DatabaseError as exc:
            self._conn.close()
            raise LeagueError(f"{self.path} is not a league database ({exc})") from exc
        except BaseException:
            self._conn.close()
            raise

    # ----------------------------------------------------------------- lifecycle

    def _connect_read_only(self, timeout: float) -> sqlite3.Connection:
        """A connection that never writes (``leaderboard``, ``report``): SQLite's read-only
        mode, or, on storage it cannot open so (a read-only mount; no WAL file beside the
        database), the file read as immutable (never with a WAL, whose matches it would miss)."""
        uri = self.path.resolve().as_uri()
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=timeout,
                               isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise  # a writer holds it: read as immutable, its unfinished changes showed
            wal = Path(f"{self.path}-wal")
            if wal.exists() and wal.stat().st_size > 0:
                raise  # its latest matches are in the WAL, which only a writer may fold in
            journal = Path(f"{self.path}-journal")
            if journal.exists() and journal.stat().st_size > 0:
                # a writer stopped midway: only a writer may roll its changes back
                raise LeagueError(
                    f"league database {self.path}: a write stopped midway ({journal.name} "
                    "beside it), which a reading command cannot roll back: open it once with "
                    f"sqlite3 (`sqlite3 {self.path} 'PRAGMA quick_check'`) first") from exc
            conn.close()  # read-only storage, no WAL: the file is the whole database
            return sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=timeout,
                                   isolation_level=None)

    def _init_schema(self, game: str | None,
                     config: RatingConfig | None) -> tuple[str, RatingConfig]:
        if not self._has_table("meta") and self.read_only:
            raise LeagueError(f"{self.path} is an SQLite file but not a league database (no "
                              f"league tables); {ANOTHER_DB}")
        if not self._has_table("meta"):
            with self._write() as conn:
                if not self._has_table("meta"):  # another process may have just created it
                    others = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
                    if others:
                        raise LeagueError(f"{self.path} is an SQLite file but not a league "
                                          f"database; {ANOTHER_DB}")
                    if game is None:
                        raise LeagueError(f"{self.path} is empty; creating a league "
                                          f"database needs a game name")
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            conn.execute(statement)
                    meta = {"schema_version": str(SCHEMA_VERSION), "game": game,
                            "rating_config": json.dumps(asdict(config or RatingConfig())),
                            "created": repr(time.time())}
                    conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)",
                                     meta.items())
        try:
            meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.OperationalError as exc:  # a "meta" table of another program
            raise LeagueError(f"{self.path} is an SQLite file but not a league database "
                              f"({exc}); {ANOTHER_DB}") from exc
        version = meta.get("schema_version")
        if version is None:
            raise LeagueError(f"{self.path} is an SQLite file but not a league database (no "
                              f"schema version); {ANOTHER_DB}")
        if version != str(SCHEMA_VERSION):
            raise LeagueError(f"league database {self.path} has schema version {version}; "
                              f"this selfplay reads version {SCHEMA_VERSION} (use a new --db "
                              f"file)")
        stored_game = meta.get("game", "")
        if game is not None and stored_game != game:
            raise LeagueError(f"league database {self.path} is for game {stored_game!r}, "
                              f"not {game!r}; {ANOTHER_DB}")
        if "rating_config" not in meta:
            raise LeagueError(f"league database {self.path} lacks its rating parameters; "
                              f"{ANOTHER_DB}")
        try:
            stored = RatingConfig(**json.loads(meta["rating_config"]))
        except (ValueError, TypeError) as exc:  # e.g. an Elo K of inf, accepted before
            raise LeagueError(f"league database {self.path} holds rating parameters this "
                              f"version refuses ({exc}); {ANOTHER_DB}") from exc
        if config is not None and config != stored:
            want, have = asdict(config), asdict(stored)
            differ = ", ".join(f"{key} {have[key]:g} (this run asks for {want[key]:g})"
                               for key in have if have[key] != want[key])
            raise LeagueError(f"league database {self.path} was created with {differ}; rating "
                              f"parameters are fixed when a database is created: use its "
                              f"values or another database")
        return stored_game, stored

    def _set_wal(self, timeout: float) -> None:
        """Switch to WAL mode, retrying while another process holds the lock (it may be
        creating the same file: this pragma does not wait on the busy timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)
        if str(mode).lower() != "wal":
            raise LeagueError(f"{self.path} cannot use SQLite's WAL mode (journal mode "
                              f"{mode!r}); put the league database on a local disk")

    def _has_table(self, name: str) -> bool:
        row = self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND "
                                 "name = ?", (name,)).fetchone()
        return row is not None

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: takes the database's write lock at once (waits if busy)."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def reading(self) -> Iterator[LeagueDB]:
        """One read transaction: every query inside sees the same state of the database,
        whatever other processes record meanwhile (a report's ladder, curves and payoff
        matrix agree)."""
        self._conn.execute("BEGIN")
        try:
            yield self
        finally:
            self._conn.execute("COMMIT")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> LeagueDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- players

    def add_player(self, name: str, kind: PlayerKind, path: str | Path | None = None,
                   metadata: Mapping[str, Any] | None = None, frozen: bool = False,
                   rating: PlayerRating | None = None) -> int:
        """Register a player; idempotent by name: registering an existing player again returns
        its id, and :class:`LeagueError` if the kind, the path (when given) or the frozen flag
        differ (another file under a taken name would inherit its results and stored matches).

        ``frozen`` players (anchors) keep ``rating`` (default: the prior) forever.
        """
        if kind not in KINDS:
            raise LeagueError(f"unknown player kind {kind!r}; known: {', '.join(KINDS)}")
        cfg = self.config
        start = rating or PlayerRating(cfg.mu, cfg.sigma, cfg.elo_initial)
        now = time.time()
        with self._write() as conn:
            row = conn.execute("SELECT id, kind, path, frozen FROM players WHERE name = ?",
                               (name,)).fetchone()
            if row is not None:
                _check_same_player(name, row, kind, None if path is None else str(path),
                                   frozen, self.path)
                return int(row[0])
            cur = conn.execute(
                "INSERT INTO players (name, kind, path, metadata, frozen, mu0, sigma0, elo0, "
                "created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (name, kind, None if path is None else str(path),
                 json.dumps(dict(metadata or {}), sort_keys=True), int(frozen), start.mu,
                 start.sigma, start.elo, now))
            pid = int(cur.lastrowid or 0)
            conn.execute("INSERT INTO ratings (player_id, mu, sigma, elo, updated) "
                         "VALUES (?, ?, ?, ?, ?)", (pid, start.mu, start.sigma, start.elo, now))
        return pid

    def remove_unplayed(self, ids: Iterable[int]) -> list[int]:
        """Remove the players ``ids`` that have played no match (a command that registered
        them and then failed on its input leaves the league as it found it); the ids
        removed."""
        removed = []
        with self._write() as conn:
            for pid in ids:
                played = conn.execute("SELECT 1 FROM matches WHERE player_a = ? OR "
                                      "player_b = ? LIMIT 1", (pid, pid)).fetchone()
                if played is None:
                    conn.execute("DELETE FROM ratings WHERE player_id = ?", (pid,))
                    conn.execute("DELETE FROM players WHERE id = ?", (pid,))
                    removed.append(pid)
        return removed

    def player(self, ref: int | str) -> Player:
        """A player by id or name; :class:`LeagueError` naming the known ones if absent."""
        column = "id" if isinstance(ref, int) else "name"
        row = self._conn.execute(f"SELECT {_PLAYER_COLS} FROM players WHERE {column} = ?",
                                 (ref,)).fetchone()
        if row is None:
            names = [p.name for p in self.players()]
            shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            raise LeagueError(f"unknown player {ref!r}; known: {shown or '(none)'}")
        return _player(row)

    def players(self) -> list[Player]:
        rows = self._conn.execute(f"SELECT {_PLAYER_COLS} FROM players ORDER BY id").fetchall()
        return [_player(r) for r in rows]

    def mark_broken(self, ref: int | str, reason: str | None) -> None:
        """Flag a player whose file is missing or corrupt (``None`` clears the flag)."""
        pid = self.player(ref).id
        with self._write() as conn:
            conn.execute("UPDATE players SET broken = ? WHERE id = ?", (reason, pid))

    def move_file(self, ref: int | str, path: str | Path) -> None:
        """Point player ``ref`` at its file's new place (a run folder that was moved); the
        broken flag of the old place is cleared."""
        pid = self.player(ref).id
        with self._write() as conn:
            conn.execute("UPDATE players SET path = ?, broken = NULL WHERE id = ?",
                         (str(path), pid))

    # ----------------------------------------------------------------- matches

    def record_match(self, a: int, b: int, outcome: int, *, key: str, side_a: int = 0,
                     map: str = "", seed: int | None = None, length: int = 0,
                     duration: float = 0.0) -> int | None:
        """Store one finished game and apply its rating updates, atomically.

        ``outcome`` is for player ``a`` (1 win, 0 draw, −1 loss). Returns the new match id, or
        ``None`` when a match with this ``key`` is already stored (then nothing changes).
        """
        with self._write() as conn:
            return self._record(conn, MatchRecord(a, b, outcome, key, side_a, map, seed,
                                                  length, duration))

    def record_matches(self, records: Iterable[MatchRecord]) -> list[int | None]:
        """Several results in one transaction (all or none), in order; see record_match."""
        with self._write() as conn:
            return [self._record(conn, r) for r in records]

    def _record(self, conn: sqlite3.Connection, r: MatchRecord) -> int | None:
        a, b, outcome = r.a, r.b, r.outcome
        if a == b:
            raise LeagueError(f"a player cannot be rated against itself (player {a})")
        score = score_of(outcome)
        now = time.time()
        rows = {int(x[0]): x for x in conn.execute(
            "SELECT r.player_id, r.mu, r.sigma, r.elo, p.frozen FROM ratings r "
            "JOIN players p ON p.id = r.player_id WHERE r.player_id IN (?, ?)", (a, b))}
        if len(rows) != 2:
            missing = [p for p in (a, b) if p not in rows]
            raise LeagueError(f"unknown player id {missing[0]}; add_player() first")
        cur = conn.execute(
            "INSERT INTO matches (key, player_a, player_b, side_a, map, seed, outcome, "
            "length, duration, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (key) DO NOTHING",
            (r.key, a, b, r.side_a, r.map, r.seed, outcome, r.length, r.duration, now))
        if cur.rowcount == 0:
            return None
        match_id = int(cur.lastrowid or 0)
        ra, rb = rows[a], rows[b]
        new_a, new_b = rate_match(PlayerRating(ra[1], ra[2], ra[3]),
                                  PlayerRating(rb[1], rb[2], rb[3]), score, self.config,
                                  bool(ra[4]), bool(rb[4]))
        for pid, new, res in ((a, new_a, outcome), (b, new_b, -outcome)):
            conn.execute(
                "UPDATE ratings SET mu = ?, sigma = ?, elo = ?, games = games + 1, "
                "wins = wins + ?, draws = draws + ?, losses = losses + ?, updated = ? "
                "WHERE player_id = ?",
                (new.mu, new.sigma, new.elo, int(res == 1), int(res == 0), int(res == -1),
                 now, pid))
            conn.execute("INSERT INTO rating_history (player_id, match_id, mu, sigma, elo) "
                         "VALUES (?, ?, ?, ?, ?)", (pid, match_id, new.mu, new.sigma, new.elo))
        return match_id

    def match_count(self) -> int:
        return int(self._conn.execute("SELECT count(*) FROM matches").fetchone()[0])

    def matches(self, prefix: str = "") -> list[Match]:
        """The stored matches whose key starts with ``prefix`` (all by default; one
        tournament's with ``"<tournament id>/"``), in the order they were recorded."""
        rows = self._conn.execute(f"SELECT {_MATCH_COLS} FROM matches WHERE key >= ? AND "
                                  "key < ? ORDER BY id",
                                  (prefix, prefix + "\U0010ffff")).fetchall()
        return [Match(*r) for r in rows]

    def results_vs_bots(self, ref: int | str, matches: Iterable[Match]
                        ) -> dict[str, tuple[int, int, int]]:
        """``(wins, draws, games)`` of player ``ref`` against each bot, from its side of
        ``matches`` (one tournament's, say: ``matches("<tournament id>/")``)."""
        me = self.player(ref).id
        bots = {p.id: p.name for p in self.players() if p.kind == "bot"}
        out: dict[str, tuple[int, int, int]] = {}
        for m in matches:
            bot, outcome = ((bots.get(m.player_b), m.outcome) if m.player_a == me else
                            (bots.get(m.player_a), -m.outcome) if m.player_b == me else
                            (None, 0))
            if bot is not None:
                wins, draws, games = out.get(bot, (0, 0, 0))
                out[bot] = (wins + (outcome == 1), draws + (outcome == 0), games + 1)
        return out

    def match_arrays(self) -> dict[str, np.ndarray]:
        """Stored matches as arrays ``[M]`` (player_a, player_b, outcome), in recorded order."""
        rows = self._conn.execute("SELECT player_a, player_b, outcome FROM matches "
                                  "ORDER BY id").fetchall()
        arr = np.asarray(rows, np.int64).reshape(-1, 3)
        return {"player_a": arr[:, 0], "player_b": arr[:, 1], "outcome": arr[:, 2]}

    def match_keys(self, prefix: str = "") -> set[str]:
        """Keys of the stored matches that start with ``prefix`` (index range scan)."""
        rows = self._conn.execute("SELECT key FROM matches WHERE key >= ? AND key < ?",
                                  (prefix, prefix + "\U0010ffff")).fetchall()
        return {r[0] for r in rows}

    # ----------------------------------------------------------------- ratings

    def rating(self, ref: int | str) -> PlayerRating:
        pid = ref if isinstance(ref, int) else self.player(ref).id
        row = self._conn.execute("SELECT mu, sigma, elo FROM ratings WHERE player_id = ?",
                                 (pid,)).fetchone()
        if row is None:
            raise LeagueError(f"unknown player id {pid}")
        return PlayerRating(*row)

    def ratings(self) -> dict[int, PlayerRating]:
        """Current ratings of every player, by id."""
        rows = self._conn.execute("SELECT player_id, mu, sigma, elo FROM ratings").fetchall()
        return {int(r[0]): PlayerRating(r[1], r[2], r[3]) for r in rows}

    def leaderboard(self, limit: int | None = None) -> list[Standing]:
        """Players by conservative rating μ − 3σ, best first (reads the rating index; ties
        by μ, then name), an equal μ − 3σ sharing its rank."""
        rows = self._conn.execute(
            "SELECT p.id, p.name, p.kind, r.mu, r.sigma, r.mu - 3.0 * r.sigma, r.elo, r.games, "
            "r.wins, r.draws, r.losses, p.frozen, p.broken FROM ratings r "
            "JOIN players p ON p.id = r.player_id "
            "ORDER BY r.mu - 3.0 * r.sigma DESC, r.mu DESC, p.name LIMIT ?",
            (-1 if limit is None else limit,)).fetchall()
        board: list[Standing] = []
        for place, r in enumerate(rows, start=1):
            tied = board and abs(board[-1].conservative - r[5]) < 1e-9
            games = int(r[7])
            board.append(Standing(
                board[-1].rank if tied else place, r[0], r[1], r[2], r[3], r[4], r[5], r[6],
                games, r[8], r[9], r[10], r[8] / games if games else None, bool(r[11]), r[12],
                (r[8] + 0.5 * r[9]) / games if games else None))
        return board

    def rating_history(self, player_ids: list[int] | None = None
                       ) -> dict[int, np.ndarray]:
        """Per player ``float64 [K, 4]`` rows (match id, μ, σ, Elo), oldest first."""
        if player_ids is None:
            player_ids = [p.id for p in self.players()]
        out: dict[int, np.ndarray] = {}
        for pid in player_ids:
            rows = self._conn.execute("SELECT match_id, mu, sigma, elo FROM rating_history "
                                      "WHERE player_id = ? ORDER BY match_id", (pid,)).fetchall()
            out[pid] = np.asarray(rows, np.float64).reshape(-1, 4)
        return out

    def payoff(self) -> tuple[list[int], np.ndarray, np.ndarray]:
        """Player ids ``[N]``, row player's mean score ``[N, N]`` (NaN if unplayed) and games."""
        ids = [p.id for p in self.players()]
        index = {pid: i for i, pid in enumerate(ids)}
        n = len(ids)
        score = np.zeros((n, n))
        games = np.zeros((n, n), np.int64)
        rows = self._conn.execute("SELECT player_a, player_b, count(*), sum(outcome) "
                                  "FROM matches GROUP BY player_a, player_b").fetchall()
        for a, b, count, total in rows:
            i, j = index[a], index[b]
            points = (count + total) / 2.0  # wins + draws / 2
            games[i, j] += count
            games[j, i] += count
            score[i, j] += points
            score[j, i] += count - points
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(games > 0, score / np.maximum(games, 1), np.nan)
        return ids, mean, games

    def replay_ratings(self) -> dict[int, PlayerRating]:
        """Every player's rating recomputed from the prior by replaying the stored matches."""
        players = self._conn.execute("SELECT id, mu0, sigma0, elo0, frozen FROM players"
                                     ).fetchall()
        current = {int(r[0]): PlayerRating(r[1], r[2], r[3]) for r in players}
        frozen = {int(r[0]): bool(r[4]) for r in players}
        for a, b, outcome in self._conn.execute("SELECT player_a, player_b, outcome FROM "
                                                "matches ORDER BY id"):
            current[a], current[b] = rate_match(current[a], current[b], score_of(outcome),
                                                self.config, frozen[a], frozen[b])
        return current


_PLAYER_COLS = "id, name, kind, path, metadata, frozen, broken, created"
_MATCH_COLS = ("id, key, player_a, player_b, side_a, map, seed, outcome, length, duration, "
               "created")


def _player(row: tuple[Any, ...]) -> Player:
    return Player(int(row[0]), row[1], row[2], row[3], json.loads(row[4]), bool(row[5]),
                  row[6], float(row[7]))
