"""A league training run SIGKILLed at a random moment, then resumed with the same command.

The league database must come out as if nothing had happened: every rating match the killed
process stored is still there unchanged, every snapshot's rating tournament is complete with
no match stored twice or half, the stored ratings equal a replay of the stored matches, and
every snapshot registered before the kill keeps its file byte for byte (the updates replayed
from the last checkpoint reuse it instead of overwriting it with other weights).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from proc_helpers import count_matches, signal_when

from league.db import LeagueDB
from league.snapshots import load_snapshot, snapshot_name
from league.tournament import match_seed
from selfplay.checkpoint import list_checkpoints

ROOT = Path(__file__).resolve().parents[2]
UPDATES = 40
STEPS_PER_UPDATE = 8 * 64  # game.num_envs * ppo.num_steps (updates long enough that the
# rater process, started at the first rating, stores matches well before training ends)
SNAPSHOT_EVERY = 2  # == eval_every: each snapshot is rated in the update that made it
EVAL_GAMES, EVAL_POOL, ANCHORS = 2, 2, ("random", "win_or_block")
SETTINGS = ["game.num_envs=8", "ppo.num_steps=64", f"league.snapshot_every={SNAPSHOT_EVERY}",
            f"league.eval_every={SNAPSHOT_EVERY}", f"league.eval_games={EVAL_GAMES}",
            f"league.eval_pool={EVAL_POOL}", "league.eval_envs=4",
            "checkpoint.every_updates=3", "checkpoint.keep=2", "log.tensorboard=false"]


def newer_snapshot_than_checkpoint(run_dir: Path) -> bool:
    """Whether a snapshot was registered after the newest checkpoint: the updates between
    them are replayed on resume, their snapshot and its rating matches included."""
    try:
        with sqlite3.connect(run_dir / "league.db", timeout=10) as conn:
            names = [r[0] for r in conn.execute("SELECT name FROM players WHERE kind = "
                                                "'snapshot'")]
    except sqlite3.OperationalError:
        return False
    checkpoints = list_checkpoints(run_dir / "checkpoints")
    if not names or not checkpoints:
        return False
    newest = max(int(name.rsplit("@", 1)[1]) for name in names)
    return newest > int(checkpoints[-1].stem.split("_")[1])


def snapshot_files(db: LeagueDB) -> dict[str, str]:
    """SHA-256 of every registered snapshot's file, by player name."""
    return {p.name: hashlib.sha256(Path(str(p.path)).read_bytes()).hexdigest()
            for p in db.players() if p.kind == "snapshot"}


def assert_whole(db: LeagueDB) -> None:
    """No half-written match: each has both rating-history rows and counts in both players'
    game totals; the stored ratings are a replay of the stored matches."""
    conn = db._conn  # noqa: SLF001 - checking the raw tables is the point
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT count(*) FROM matches m WHERE (SELECT count(*) FROM "
                        "rating_history h WHERE h.match_id = m.id) != 2").fetchone()[0] == 0
    games: Counter[int] = Counter()
    for m in db.matches():
        games[m.player_a] += 1
        games[m.player_b] += 1
    for row in db.leaderboard():
        assert row.games == games[row.player_id] == row.wins + row.draws + row.losses, row
    assert db.replay_ratings() == db.ratings()


# the random moment in `make bench` (the default suite's 8 minutes); the snapshot moment is
# the case that once crashed resumes
@pytest.mark.parametrize("moment", [pytest.param("random", marks=pytest.mark.slow),
                                    "after_a_snapshot"])
def test_sigkill_training_run_then_resume(tmp_path: Path, moment: str) -> None:
    """``random``: a random delay after the first checkpoint and the first stored match;
    ``after_a_snapshot``: once a snapshot newer than the newest checkpoint is registered (the
    case that crashed resumes with "player ... is already in the pool")."""
    run_dir = tmp_path / "ttt"
    db_path = run_dir / "league.db"
    train = [sys.executable, "-m", "selfplay.cli", "train"]
    first = [*train, "--game", "tictactoe", "--run-dir", str(run_dir), "--seed", "3",
             "--total-steps", str(UPDATES * STEPS_PER_UPDATE), "--no-progress"]
    for item in SETTINGS:
        first += ["--set", item]
    delay = random.Random(int.from_bytes(os.urandom(4), "little")).uniform(0.0, 1.5)
    if moment == "after_a_snapshot":
        delay = 0.0
    proc = subprocess.Popen(first, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 45
    while (proc.poll() is None and time.monotonic() < deadline
           and not (list_checkpoints(run_dir / "checkpoints") and count_matches(db_path)
                    and (moment == "random" or newer_snapshot_than_checkpoint(run_dir)))):
        time.sleep(0.01)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"the run ended before the kill:\n{err}"

    with LeagueDB(db_path) as db:
        assert_whole(db)
        before = {m.key: m for m in db.matches()}
        files = snapshot_files(db)
    resumed_from = list_checkpoints(run_dir / "checkpoints")[-1].name
    assert before, "no match stored before the kill"

    # the same command again continues the run
    done = subprocess.run([*first, "--json"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    note = f"(killed {moment} +{delay:.2f}s; resumed from {resumed_from})"
    assert done.returncode == 0, f"{note}\n{done.stderr}"
    assert "already holds this run (same settings): resuming it" in done.stderr
    assert json.loads(done.stdout)["global_step"] == UPDATES * STEPS_PER_UPDATE

    with LeagueDB(db_path) as db:
        assert_whole(db)
        after = {m.key: m for m in db.matches()}
        for key, match in before.items():  # nothing lost or rewritten
            assert after[key] == match, f"{note} match {key} changed"
        # snapshots registered before the kill were reused, not rewritten by the replay
        now = snapshot_files(db)
        assert {name: now[name] for name in files} == files, note
        snapshots = [p for p in db.players() if p.kind == "snapshot"]
        names = [snapshot_name("ttt", u) for u in range(SNAPSHOT_EVERY, UPDATES + 1,
                                                        SNAPSHOT_EVERY)]
        assert sorted(p.name for p in snapshots) == names, note
        for p in snapshots:
            load_snapshot(str(p.path), game="tictactoe")  # every file whole and loadable
        # each snapshot's rating tournament: every scheduled match exactly once, nothing else
        by_tournament: Counter[str] = Counter(key.split("/")[0] for key in after)
        ids = {p.name: p.id for p in db.players()}
        for i, name in enumerate(sorted(names, key=lambda n: ids[n])):
            expected = EVAL_GAMES * (min(EVAL_POOL, i) + len(ANCHORS))
            assert by_tournament.pop(f"eval@{name}") == expected, f"{note} eval@{name}"
        assert not by_tournament, f"{note} unexpected tournaments {dict(by_tournament)}"
        for match in after.values():  # the replayed schedule is the same schedule
            update = int(match.key.split("/")[0].rsplit("@", 1)[1])
            assert match.seed == match_seed(update, match.key), f"{note} {match.key}"


@pytest.mark.parametrize("sig", [signal.SIGINT, pytest.param(signal.SIGTERM,
                                                             marks=pytest.mark.slow)])
def test_stop_signal_while_the_rater_plays_ends_promptly(tmp_path: Path,
                                                         sig: signal.Signals) -> None:
    """Ctrl-C or SIGTERM while the rater process is deep in a long rating tournament: the
    trainer saves its checkpoint and exits within seconds (the rater ignores the signal, the
    trainer kills it), and nothing writes to the database afterwards."""
    run_dir = tmp_path / "ttt"
    db_path = run_dir / "league.db"
    command = [sys.executable, "-m", "selfplay.cli", "train", "--game", "tictactoe",
               "--run-dir", str(run_dir), "--total-steps", str(10**7), "--no-progress",
               "--set", "league.snapshot_every=1", "--set", "league.eval_every=1",
               "--set", "league.eval_games=100000", "--set", "log.tensorboard=false"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    err, elapsed = signal_when(proc, lambda: count_matches(db_path) >= 50, sig, timeout=60)
    assert proc.returncode == 128 + sig, err
    assert f"interrupted by {sig.name}; checkpoint saved" in err, err
    assert elapsed < 15, f"took {elapsed:.1f} s to stop"
    stored = count_matches(db_path)
    time.sleep(2)
    assert count_matches(db_path) == stored, "a rater still plays after its trainer stopped"
    with LeagueDB(db_path) as db:
        assert_whole(db)


@pytest.mark.slow  # 18 updates killed and resumed: ~14 s (make bench)
def test_sigkill_with_rating_less_often_than_snapshots(tmp_path: Path) -> None:
    """snapshot_every=2, eval_every=3: each rating update rates the newest snapshot (@2 at
    update 3, @6 at 6, @8 at 9, ...). Killed while the rater plays, the same command again
    completes exactly those tournaments: the resumed run hands the rater the snapshots that
    were rated, not those whose own update is a multiple of eval_every."""
    updates, snap, every = 18, 2, 3
    run_dir = tmp_path / "ttt"
    db_path = run_dir / "league.db"
    command = [sys.executable, "-m", "selfplay.cli", "train", "--game", "tictactoe",
               "--run-dir", str(run_dir), "--seed", "5", "--total-steps",
               str(updates * STEPS_PER_UPDATE), "--no-progress"]
    for item in [*SETTINGS, f"league.snapshot_every={snap}", f"league.eval_every={every}",
                 "league.eval_games=40"]:
        command += ["--set", item]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 45
    while proc.poll() is None and time.monotonic() < deadline and count_matches(db_path) < 150:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"the run ended before the kill:\n{err}"
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    with LeagueDB(db_path) as db:
        assert_whole(db)
        snapshots = sorted((p for p in db.players() if p.kind == "snapshot"),
                           key=lambda p: p.id)
        updates_of = [int(p.name.rsplit("@", 1)[1]) for p in snapshots]
        assert updates_of == list(range(snap, updates + 1, snap))
        rated = {max(u for u in updates_of if u <= e) for e in range(every, updates + 1, every)}
        by_tournament = Counter(m.key.split("/")[0] for m in db.matches())
        expected = {f"eval@{snapshot_name('ttt', u)}": 40 * (min(EVAL_POOL, i) + len(ANCHORS))
                    for i, u in enumerate(updates_of) if u in rated}
        assert dict(by_tournament) == expected
