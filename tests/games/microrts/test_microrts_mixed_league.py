"""Tournaments mixing a trained microRTS checkpoint with engine bots (PolicyMatchRunner)."""

from __future__ import annotations

from pathlib import Path

import pytest

from league.db import LeagueDB
from selfplay.config_files import build_config
from selfplay.league_commands import tournament
from selfplay.train import run_training


@pytest.fixture(scope="module")
def checkpoint_run(tmp_path_factory: pytest.TempPathFactory, engine_home: Path) -> Path:
    """A one-update microRTS run on 8x8 (a nearly random policy)."""
    run = tmp_path_factory.mktemp("mixed") / "agent"
    config = build_config("microrts", overrides=[
        "game.num_envs=2", "game.options.map=basesWorkers8x8", "game.options.bots=[Passive]",
        "game.options.num_selfplay_envs=0", "ppo.num_steps=16", "ppo.num_minibatches=1",
        "ppo.update_epochs=1", "league.enabled=false", "log.progress=false",
        "log.tensorboard=false", "network.channels=[8,16]", "network.hidden=[16]"],
        total_steps=32)
    run_training(config, run_dir=run)
    return run


def test_checkpoint_against_engine_bots_both_sides(tmp_path: Path, checkpoint_run: Path) -> None:
    db_path = tmp_path / "mixed.db"
    result = tournament("microrts", [str(checkpoint_run), "workerrush", "passive"],
                        str(db_path), games_per_pair=2, until_sigma=None,
                        map_name="basesWorkers8x8", num_envs=2, seed=3, quiet=True,
                        max_steps=400)
    assert result["played"] == 6 and not result["skipped_players"]
    with LeagueDB(db_path, game="microrts") as db:
        agent, rush, passive = (db.player(n).id for n in
                                ("agent/update_0000001", "WorkerRush", "Passive"))
        matches = db.matches()
        pairs: dict[frozenset[int], list] = {}
        for m in matches:
            pairs.setdefault(frozenset((m.player_a, m.player_b)), []).append(m)
        assert set(pairs) == {frozenset((agent, rush)), frozenset((agent, passive)),
                              frozenset((rush, passive))}
        for games in pairs.values():  # each pair played once from each side
            assert sorted(m.side_a for m in games) == [0, 1]
            assert all(0 < m.length <= 400 for m in games)
        # WorkerRush beats a one-update policy and the passive bot: no loss for it
        for m in pairs[frozenset((agent, rush))] + pairs[frozenset((rush, passive))]:
            rush_result = m.outcome if m.player_a == rush else -m.outcome
            assert rush_result >= 0, m
        replayed = db.replay_ratings()
        for player in db.players():
            got, want = db.rating(player.name), replayed[player.id]
            assert got.mu == pytest.approx(want.mu) and got.sigma == pytest.approx(want.sigma)


@pytest.mark.parametrize("rater", [False, True], ids=["between-updates", "rater-process"])
def test_league_training_rates_snapshots_against_engine_bots(tmp_path: Path, engine_home: Path,
                                                            rater: bool) -> None:
    """A short league run with engine-bot anchors: every snapshot plays rated games against
    WorkerRush, stored in the run's league database, and league/* reaches the metrics: each
    snapshot's rating once, at the snapshot's step (with a rater process too, whose last
    tournaments finish after training), the newest in the run's summary."""
    import json

    config = build_config("microrts", overrides=[f"league.eval_process={rater}",
        "game.num_envs=4", "game.options.map=basesWorkers8x8", "game.options.bots=[Passive]",
        "game.options.num_selfplay_envs=2", "game.options.max_steps=150", "ppo.num_steps=32",
        "ppo.num_minibatches=1", "ppo.update_epochs=1", "league.anchors=[WorkerRush]",
        "league.snapshot_every=1", "league.eval_every=1", "league.eval_games=2",
        "league.eval_envs=2", "log.progress=false", "log.tensorboard=false",
        "network.channels=[8,16]", "network.hidden=[16]"], total_steps=4 * 32 * 2)
    summary = run_training(config, run_dir=tmp_path / "run")
    with LeagueDB(tmp_path / "run" / "league.db", game="microrts") as db:
        rush = db.player("WorkerRush").id
        vs_rush = [m for m in db.matches() if rush in (m.player_a, m.player_b)]
        assert len(vs_rush) == 4  # 2 snapshots x 2 games (one per side)
        assert sorted(m.side_a for m in vs_rush) == [0, 0, 1, 1]
        assert {m.map for m in db.matches()} == {"basesWorkers8x8"}  # rating games' map stored
        frozen = db.player("WorkerRush")
        assert frozen.frozen and db.rating("WorkerRush").mu == 25.0  # the anchor never moves
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    rated = [(row["step"], row["snapshot"], row["league/rated_update"]) for row in rows
             if "league/mu" in row]
    assert rated == [(128, "run@0000001", 1.0), (256, "run@0000002", 2.0)]
    assert summary["league/rated_update"] == 2.0


def test_missing_checkpoint_beside_engine_bots_is_reported_as_missing(tmp_path: Path,
                                                                      engine_home: Path,
                                                                      capsys) -> None:
    missing = tmp_path / "gone.pt"
    result = tournament("microrts", ["workerrush", "passive", str(missing)],
                        str(tmp_path / "l.db"), games_per_pair=2, until_sigma=None,
                        map_name="basesWorkers8x8", num_envs=2, seed=0, quiet=True,
                        max_steps=300)
    assert result["played"] == 2 and result["skipped_players"] == [str(missing)]
    err = capsys.readouterr().err
    assert f"checkpoint {missing} not found" in err, err
