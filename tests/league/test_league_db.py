"""The league database: atomic results, idempotency, replay, concurrency, clear refusals."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from league.db import SCHEMA_VERSION, LeagueDB, LeagueError, default_path
from league.ratings import PlayerRating, RatingConfig, rate_match
from league.records import MatchRecord

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path: Path) -> Iterator[LeagueDB]:
    league = LeagueDB(tmp_path / "league.db", game="tictactoe")
    yield league
    league.close()


def test_record_match_updates_both_ratings_like_the_pure_function(db: LeagueDB) -> None:
    a = db.add_player("alice", "snapshot", path="/x/a.pt", metadata={"env_steps": 10})
    b = db.add_player("bob", "bot")
    assert db.add_player("alice", "snapshot") == a  # idempotent by name
    match_id = db.record_match(a, b, 1, key="k0", side_a=1, map="m", seed=7, length=9,
                               duration=0.5)
    assert match_id is not None
    prior = PlayerRating(25.0, 25.0 / 3.0, 1200.0)
    want_a, want_b = rate_match(prior, prior, 1.0, RatingConfig())
    assert db.rating(a) == want_a and db.rating("bob") == want_b
    (match,) = db.matches()
    assert (match.key, match.player_a, match.player_b, match.side_a, match.map, match.seed,
            match.outcome, match.length) == ("k0", a, b, 1, "m", 7, 1, 9)
    assert db.player("alice").metadata == {"env_steps": 10}
    assert db.player(a).path == "/x/a.pt"


def test_same_key_is_stored_once(db: LeagueDB) -> None:
    a, b = db.add_player("a", "bot"), db.add_player("b", "bot")
    assert db.record_match(a, b, 1, key="same") is not None
    before = db.ratings()
    assert db.record_match(a, b, -1, key="same") is None
    assert db.match_count() == 1 and db.ratings() == before
    assert db.match_keys("sa") == {"same"} and db.match_keys("x") == set()


def test_replayed_ratings_equal_stored_ones(db: LeagueDB) -> None:
    ids = [db.add_player(f"p{i}", "bot") for i in range(5)]
    anchor = db.add_player("anchor", "bot", frozen=True, rating=PlayerRating(30.0, 1.0, 1500))
    ids.append(anchor)
    records = [MatchRecord(ids[i % 6], ids[(i * 7 + 1) % 6], (i % 3) - 1, f"m{i}")
               for i in range(300) if i % 6 != (i * 7 + 1) % 6]
    db.record_matches(records[:100])
    for r in records[100:]:
        db.record_match(r.a, r.b, r.outcome, key=r.key)
    assert db.replay_ratings() == db.ratings()
    assert db.rating(anchor) == PlayerRating(30.0, 1.0, 1500)  # an anchor never moves
    assert next(s for s in db.leaderboard() if s.name == "anchor").games > 50


def test_failed_transaction_stores_nothing(db: LeagueDB) -> None:
    a, b = db.add_player("a", "bot"), db.add_player("b", "bot")
    with pytest.raises(LeagueError, match="unknown player id 99"):
        db.record_matches([MatchRecord(a, b, 1, "ok"), MatchRecord(a, 99, 1, "bad")])
    assert db.match_count() == 0 and db.rating(a) == PlayerRating(25.0, 25.0 / 3.0, 1200.0)
    with pytest.raises(LeagueError, match="against itself"):
        db.record_match(a, a, 1, key="self")


def test_leaderboard_fields_and_order(db: LeagueDB) -> None:
    strong, weak = db.add_player("strong", "checkpoint"), db.add_player("weak", "bot")
    for i in range(10):
        db.record_match(strong, weak, 1 if i < 8 else 0, key=f"g{i}")
    board = db.leaderboard()
    assert [s.name for s in board] == ["strong", "weak"]
    top = board[0].to_json()
    for field in ("rank", "name", "mu", "sigma", "conservative", "elo", "games", "win_rate"):
        assert field in top
    assert top["rank"] == 1 and top["games"] == 10 and top["wins"] == 8 and top["draws"] == 2
    assert top["win_rate"] == pytest.approx(0.8)
    assert top["conservative"] == pytest.approx(top["mu"] - 3 * top["sigma"])
    assert board[1].losses == 8 and board[1].win_rate == 0.0
    json.dumps([s.to_json() for s in board])
    plan = db._conn.execute("EXPLAIN QUERY PLAN SELECT player_id FROM ratings "  # noqa: SLF001
                            "ORDER BY mu - 3.0 * sigma DESC").fetchall()
    assert "ratings_conservative" in str(plan)


def test_payoff_and_history(db: LeagueDB) -> None:
    a, b, c = (db.add_player(n, "bot") for n in "abc")
    db.record_match(a, b, 1, key="1")
    db.record_match(b, a, 0, key="2")
    ids, score, games = db.payoff()
    i, j, k = ids.index(a), ids.index(b), ids.index(c)
    assert games[i, j] == games[j, i] == 2
    assert score[i, j] == pytest.approx(0.75) and score[j, i] == pytest.approx(0.25)
    assert score[i, k] != score[i, k]  # NaN: unplayed
    history = db.rating_history([a])[a]
    assert history.shape == (2, 4) and list(history[:, 0]) == [1, 2]
    assert tuple(history[-1, 1:]) == tuple(db.rating(a))


def test_broken_flag(db: LeagueDB) -> None:
    pid = db.add_player("snap", "snapshot", path="/missing.pt")
    db.mark_broken(pid, "file not found")
    assert db.player("snap").broken == "file not found"
    assert db.leaderboard()[0].broken == "file not found"
    db.mark_broken("snap", None)
    assert db.player(pid).broken is None


def test_registering_a_name_again(db: LeagueDB, tmp_path: Path) -> None:
    """Same settings: the same id. Another file, kind or frozen flag under a taken name: an
    error naming the difference (the newcomer would inherit the old player's results)."""
    ckpt = str(tmp_path / "a" / "run1" / "update_0000010.pt")
    pid = db.add_player("run1/update_0000010", "checkpoint", path=ckpt)
    assert db.add_player("run1/update_0000010", "checkpoint", path=ckpt) == pid
    other = str(tmp_path / "b" / "run1" / "update_0000010.pt")
    with pytest.raises(LeagueError, match=r"already in .*path .*a/run1.*, not .*b/run1"):
        db.add_player("run1/update_0000010", "checkpoint", path=other)
    bot = db.add_player("WorkerRush", "bot")
    assert db.add_player("WorkerRush", "bot") == bot
    with pytest.raises(LeagueError, match=r"a rating that is not frozen.*pick another file "
                                          r"\(--db; league.db when training\)"):
        db.add_player("WorkerRush", "bot", frozen=True)
    with pytest.raises(LeagueError, match="kind 'bot', not 'checkpoint'"):
        db.add_player("WorkerRush", "checkpoint", path=ckpt)
    assert [p.name for p in db.players()] == ["run1/update_0000010", "WorkerRush"]


def test_reading_an_empty_file_leaves_it_alone(tmp_path: Path) -> None:
    """Opening for reading (create=False) does not turn an empty file into a database."""
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with pytest.raises(LeagueError, match="empty file, not a league database"):
        LeagueDB(empty, game="tictactoe", create=False)
    assert empty.stat().st_size == 0


def test_other_game_is_refused(tmp_path: Path) -> None:
    LeagueDB(tmp_path / "l.db", game="tictactoe").close()
    with pytest.raises(LeagueError, match="is for game 'tictactoe', not 'microrts'.*--db"):
        LeagueDB(tmp_path / "l.db", game="microrts")
    with LeagueDB(tmp_path / "l.db") as reopened:  # no game given: any game is fine
        assert reopened.game == "tictactoe"


def test_other_schema_version_is_refused(tmp_path: Path) -> None:
    LeagueDB(tmp_path / "l.db", game="tictactoe").close()
    with sqlite3.connect(tmp_path / "l.db") as conn:
        conn.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(LeagueError, match=f"schema version 999; this selfplay reads version "
                                          f"{SCHEMA_VERSION}"):
        LeagueDB(tmp_path / "l.db", game="tictactoe")


def test_foreign_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "text.db").write_text("not a database at all " * 50)
    with pytest.raises(LeagueError, match="is not a league database"):
        LeagueDB(tmp_path / "text.db", game="tictactoe")
    with sqlite3.connect(tmp_path / "other.db") as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(LeagueError, match="SQLite file but not a league database"):
        LeagueDB(tmp_path / "other.db", game="tictactoe")
    with sqlite3.connect(tmp_path / "other.db") as conn:  # refused as it was found
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    with sqlite3.connect(tmp_path / "meta.db") as conn:  # another program's "meta" tables
        conn.execute("CREATE TABLE meta (name, value)")
    with sqlite3.connect(tmp_path / "meta2.db") as conn:
        conn.execute("CREATE TABLE meta (key, value)")
        conn.execute("INSERT INTO meta VALUES ('owner', 'someone')")
    for name in ("meta.db", "meta2.db"):
        with pytest.raises(LeagueError, match="SQLite file but not a league database"):
            LeagueDB(tmp_path / name, game="tictactoe")
    with pytest.raises(LeagueError, match="no league database"):
        LeagueDB(tmp_path / "absent.db", create=False)
    with pytest.raises(LeagueError, match="needs a game name"):
        LeagueDB(tmp_path / "absent.db")
    LeagueDB(tmp_path / "cfg.db", game="g", config=RatingConfig(elo_k=16)).close()
    with pytest.raises(LeagueError, match=r"created with elo_k 16 \(this run asks for 32\); "
                       "rating parameters are fixed"):
        LeagueDB(tmp_path / "cfg.db", game="g", config=RatingConfig(elo_k=32))
    with LeagueDB(tmp_path / "cfg.db", game="g") as reopened:
        assert reopened.config.elo_k == 16


WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from league.db import LeagueDB
    path, me, tmp = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    (tmp / f"ready-{me}").touch()
    while len(list(tmp.glob("ready-*"))) < 2:  # start together
        time.sleep(0.001)
    db = LeagueDB(path, game="tictactoe")  # both may create the file at once
    ids = [db.add_player(f"p{i}", "bot") for i in range(4)]
    other = "w2" if me == "w1" else "w1"
    deadline = time.monotonic() + 60
    for i in range(300):
        while i == 150 and not db.match_keys(f"{other}/") and time.monotonic() < deadline:
            time.sleep(0.001)  # halfway: wait for the other writer, so the two interleave
        a, b = ids[i % 4], ids[(i + 1 + i // 4) % 4]
        if a == b:
            b = ids[(i + 2) % 4]
        db.record_match(a, b, (i % 3) - 1, key=f"{me}/{i}")
        if i < 100:
            db.record_match(a, b, 1, key=f"shared/{i}")  # both processes try these
    db.close()
""")


def test_two_writer_processes(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name, str(tmp_path)],
                              cwd=ROOT, stderr=subprocess.PIPE, text=True)
             for name in ("w1", "w2")]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    with LeagueDB(path, game="tictactoe") as db:
        assert db.match_count() == 300 + 300 + 100
        keys = [m.key for m in db.matches()]
        assert len(set(keys)) == 700
        owners = [k.split("/")[0] for k in keys if not k.startswith("shared/")]
        assert owners.count("w1") == owners.count("w2") == 300
        switches = sum(x != y for x, y in zip(owners, owners[1:], strict=False))
        assert switches >= 2, "the two writers did not overlap"
        assert len(db.players()) == 4
        assert sum(s.games for s in db.leaderboard()) == 2 * 700
        assert db.replay_ratings() == db.ratings()
        assert db._conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"  # noqa: SLF001
        assert db._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # noqa: SLF001


def test_default_path_is_per_game() -> None:
    assert default_path("atari/Pong") == Path("runs/league/atari_Pong.db")
    assert default_path("microrts") != default_path("tictactoe")


def test_reading_never_writes(tmp_path: Path) -> None:
    """Guards: ``league leaderboard`` on another program's (valid, empty) SQLite file gave it
    the league schema and WAL mode; reading opens SQLite's read-only mode; a database made
    before rating parameters had to be finite (an Elo K of inf) is one line, not a
    traceback."""
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("PRAGMA user_version = 7")
    before = other.read_bytes()
    with pytest.raises(LeagueError, match="not a league database"):
        LeagueDB(other, create=False, read_only=True)
    assert other.read_bytes() == before and sorted(tmp_path.iterdir()) == [other]
    path = tmp_path / "league.db"
    with LeagueDB(path, game="tictactoe") as db:
        a, b = db.add_player("a", "bot"), db.add_player("b", "bot")
        db.record_match(a, b, 1, key="k")
    with LeagueDB(path, read_only=True) as db:
        assert db.match_count() == 1 and db.game == "tictactoe"
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            db.add_player("c", "bot")
    with sqlite3.connect(path) as conn:
        stored = json.loads(conn.execute("SELECT value FROM meta WHERE key = 'rating_config'")
                            .fetchone()[0])
        conn.execute("UPDATE meta SET value = ? WHERE key = 'rating_config'",
                     (json.dumps({**stored, "elo_k": float("inf")}),))
    for read_only in (True, False):
        with pytest.raises(LeagueError, match="holds rating parameters this version refuses"):
            LeagueDB(path, read_only=read_only)


def test_reading_never_shows_an_unfinished_write_of_a_rollback_journal_database(
        tmp_path: Path) -> None:
    """Guards: a database in rollback-journal mode (a copy, one changed with the sqlite3 tool)
    was read as immutable when its lock was held or a killed writer's journal lay beside it:
    ``leaderboard`` printed the uncommitted ratings (μ 999, μ − 3σ of the old ones)."""
    path = tmp_path / "league.db"
    with LeagueDB(path, game="tictactoe") as db:
        a, b = db.add_player("a", "bot"), db.add_player("b", "bot")
        db.record_match(a, b, 1, key="k")
        for n in range(1500):  # enough pages that the writer's change spills into the file
            db.add_player(f"p{n}", "bot")
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode = DELETE")
    writer = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sqlite3, sys, time
        conn = sqlite3.connect({str(path)!r}, isolation_level=None)
        conn.execute("PRAGMA cache_size = 2")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("UPDATE ratings SET mu = 999")
        print("held", flush=True)
        time.sleep(60)
        """)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "held\n"
        with pytest.raises((LeagueError, sqlite3.OperationalError), match="locked"):
            with LeagueDB(path, read_only=True, timeout=0.2) as db:
                db.leaderboard()
    finally:
        writer.kill()
        writer.wait()
    assert Path(f"{path}-journal").stat().st_size > 0  # the killed writer's, hot
    with pytest.raises(LeagueError, match="a write stopped midway"):
        LeagueDB(path, read_only=True)
    with LeagueDB(path) as db:  # a writer rolls it back
        assert max(s.mu for s in db.leaderboard()) < 999


@pytest.fixture
def read_only_folder(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a league database that cannot be written: a read-only bind mount
    as root (whom permissions do not stop), a folder without write permission otherwise."""
    source = tmp_path / "source"
    LeagueDB(source / "t.db", game="tictactoe").close()
    if os.geteuid() != 0:
        source.chmod(0o555)
        yield source
        source.chmod(0o755)
        return
    folder = tmp_path / "mounted"
    folder.mkdir()
    mounted = subprocess.run(["mount", "--bind", str(source), str(folder)],
                             capture_output=True).returncode == 0
    if mounted and subprocess.run(["mount", "-o", "remount,ro,bind", str(folder)],
                                  capture_output=True).returncode == 0:
        try:
            yield folder
        finally:
            subprocess.run(["umount", str(folder)], check=True)
        return
    if mounted:
        subprocess.run(["umount", str(folder)], check=True)
    pytest.skip("root without the right to mount: no folder it cannot write")


def test_a_database_in_a_folder_that_cannot_be_written_says_so(read_only_folder: Path) -> None:
    """Guards (review): "cannot open league database ...: unable to open database file" did
    not say why (SQLite's journal goes beside the file); reading it still works."""
    with pytest.raises(LeagueError, match=rf"cannot open league database {read_only_folder}/"
                                          rf"t.db: .*\(its folder {read_only_folder} is not "
                                          "writable: SQLite writes its journal beside it\\)"):
        LeagueDB(read_only_folder / "t.db")
    with LeagueDB(read_only_folder / "t.db", read_only=True) as db:
        assert db.game == "tictactoe"
