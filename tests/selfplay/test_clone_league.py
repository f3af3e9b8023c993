"""`bc.snapshot_every`: a cloning run's snapshots rated in the league, and a training run from
the clone going on in the same league (real tic-tac-toe games and rating tournaments)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from league.db import LeagueDB
from league.snapshots import load_snapshot, snapshot_run
from selfplay.bc import run_cloning
from selfplay.checkpoint import list_checkpoints, load_checkpoint
from selfplay.config import ConfigError, TrainConfig
from selfplay.config_files import build_config
from selfplay.train import run_training

PER_UPDATE = 32 * 16  # env steps of one cloning update: bc.num_envs * bc.num_steps


def cloning(*overrides: str, updates: int = 8) -> TrainConfig:
    """Cloning win_or_block, a snapshot every 2 updates rated at once in this process."""
    return build_config("tictactoe", overrides=[
        "bc.teachers=[win_or_block]", "bc.num_envs=32", "bc.num_steps=16",
        "bc.learning_rate=1e-3", "bc.validate_every=0", "log.tensorboard=false",
        "log.progress=false", f"bc.total_steps={updates * PER_UPDATE}", "bc.snapshot_every=2",
        "league.eval_process=false", "league.eval_games=4", *overrides])


def own_snapshots(db: LeagueDB, run: str) -> list[str]:
    return [p.name for p in db.players() if p.kind == "snapshot" and snapshot_run(p.name) == run]


def rating_opponents(db: LeagueDB, snapshot: str) -> list[str]:
    """The opponent of each of ``snapshot``'s rating games."""
    me = db.player(snapshot).id
    return [db.player(m.player_b if m.player_a == me else m.player_a).name
            for m in db.matches(f"eval@{snapshot}/")]


def test_a_clones_snapshots_are_rated_as_it_learns(tmp_path: Path) -> None:
    summary = run_cloning(cloning("league.eval_pool=2"), run_dir=tmp_path / "clone")
    assert summary["snapshots"] == 4 and "league/mu" in summary
    with LeagueDB(tmp_path / "clone" / "league.db") as db:
        names = own_snapshots(db, "clone")
        assert names == [f"clone@{u:07d}" for u in (2, 4, 6, 8)]
        assert {p.name for p in db.players() if p.kind == "bot"} == {"random", "win_or_block"}
        for k, name in enumerate(names):
            player = db.player(name)
            snapshot = load_snapshot(str(player.path), "tictactoe")
            assert snapshot.info.update == 2 * (k + 1)
            assert snapshot.info.env_steps == 2 * (k + 1) * PER_UPDATE
            assert snapshot.info.parent == (names[k - 1] if k else None)
            # league.eval_games (4) against each of the last league.eval_pool (2) earlier
            # snapshots and each anchor
            want = sorted(4 * [*names[max(0, k - 2):k], "random", "win_or_block"])
            assert sorted(rating_opponents(db, name)) == want, name
        assert db.replay_ratings() == db.ratings()


def test_a_rater_process_rates_every_snapshot_by_the_end(tmp_path: Path) -> None:
    summary = run_cloning(cloning("league.eval_process=true", updates=4),
                          run_dir=tmp_path / "clone")
    assert summary["snapshots"] == 2
    with LeagueDB(tmp_path / "clone" / "league.db") as db:
        first, second = own_snapshots(db, "clone")
        assert sorted(rating_opponents(db, first)) == sorted(4 * ["random", "win_or_block"])
        assert sorted(rating_opponents(db, second)) == sorted(
            4 * [first, "random", "win_or_block"])
        assert summary["league/mu"] == db.rating(second).mu
    records = [json.loads(line) for line in (tmp_path / "clone" / "metrics.jsonl").open()]
    # each snapshot's rating once, at its step, the last one finished after cloning
    assert [(r["step"], r["snapshot"]) for r in records if "league/mu" in r] == [
        (2 * PER_UPDATE, first), (4 * PER_UPDATE, second)]


def test_a_run_from_the_clone_goes_on_in_its_league(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    run_cloning(cloning(), run_dir=clone)
    db_path = clone / "league.db"
    config = build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "game.num_envs=8", "ppo.num_steps=16",
        f"league.db={db_path}", "league.snapshot_every=2", "league.eval_every=2",
        "league.eval_games=2", "league.eval_pool=3", "league.eval_process=false"], seed=3,
        total_steps=2 * 8 * 16, init_from=str(clone))
    run_training(config, run_dir=tmp_path / "ppo")
    with LeagueDB(db_path) as db:
        cloned, trained = own_snapshots(db, "clone"), own_snapshots(db, "ppo")
        assert trained == ["ppo@0000000", "ppo@0000002"]
        # the training run's first snapshot is the clone, rated against the clone's last
        # snapshots (league.eval_pool: 3) and the anchors, on the clone's scale
        assert sorted(set(rating_opponents(db, trained[0]))) == sorted(
            [*cloned[-3:], "random", "win_or_block"])
        assert db.replay_ratings() == db.ratings()


def test_a_killed_clone_resumes_without_a_snapshot_or_rating_game_twice(tmp_path: Path) -> None:
    """A run killed after update 3 (its later checkpoints gone) whose snapshots of updates 4
    and 6 were registered and rated before the kill, resumed: it keeps those snapshots and
    their files, and stores no rating game twice."""
    config = cloning("checkpoint.every_updates=1", "checkpoint.keep=10", updates=6)
    run = tmp_path / "run"
    run_cloning(config, run_dir=run)
    with LeagueDB(run / "league.db") as db:
        players = [(p.name, p.path) for p in db.players()]
        matches = db.match_count()
    files = {path: Path(str(path)).read_bytes() for _, path in players if path}
    for path in list_checkpoints(run / "checkpoints")[3:]:
        path.unlink()
    summary = run_cloning(None, resume=run)
    assert summary["updates"] == 6
    assert load_checkpoint(list_checkpoints(run / "checkpoints")[-1])["counters"][
        "update"] == 6
    with LeagueDB(run / "league.db") as db:
        assert [(p.name, p.path) for p in db.players()] == players
        assert db.match_count() == matches
        assert own_snapshots(db, "run") == [f"run@{u:07d}" for u in (2, 4, 6)]
    assert all(Path(str(path)).read_bytes() == data for path, data in files.items())


def test_snapshots_need_the_league() -> None:
    with pytest.raises(ConfigError, match="bc.snapshot_every.*league.enabled"):
        cloning("league.enabled=false")
