"""Training inside a league: snapshots enter the pool, opponents come from it, ratings rise."""

from __future__ import annotations

from pathlib import Path

import pytest

from games.registry import make_game
from league.db import LeagueDB
from selfplay.config import ConfigError, build_config
from selfplay.league_training import attach
from selfplay.ppo import Trainer


def test_tictactoe_league_training(tmp_path: Path) -> None:
    config = build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "league.snapshot_every=8",
        "league.eval_every=8", "league.eval_games=8", "league.self_play=0.3"],
        seed=4, total_steps=32 * 32 * 32)
    trainer = Trainer(config, make_game("tictactoe", config.game.num_envs, config.seed))
    hook = attach(trainer, tmp_path)
    assert hook is not None
    seen_opponents = []
    trainer.after_update.append(lambda t: seen_opponents.append((t.owner[:, 1] > 0).sum()) or {})
    trainer.train()
    hook.close()
    db = LeagueDB(tmp_path / "league.db")
    snapshots = [p for p in db.players() if p.kind == "snapshot"]
    assert len(snapshots) == 4
    assert all(Path(str(p.path)).is_file() for p in snapshots)
    assert {"random", "win_or_block"} <= {p.name for p in db.players() if p.kind == "bot"}
    assert max(seen_opponents) > 0, "no env ever played a past snapshot"
    first, last = db.rating(snapshots[0].name), db.rating(snapshots[-1].name)
    assert last.mu > first.mu, (first, last)
    assert db.rating(snapshots[-1].name).mu > db.rating("random").mu
    assert db.replay_ratings() == db.ratings()
    db.close()


def test_unknown_anchor_is_an_error(tmp_path: Path) -> None:
    config = build_config("tictactoe", overrides=["league.anchors=[nobody]"])
    trainer = Trainer(config, make_game("tictactoe", 2, 0))
    with pytest.raises(ConfigError, match="league.anchors: unknown tictactoe bot 'nobody'"):
        attach(trainer, tmp_path)


def test_league_needs_two_seats(tmp_path: Path) -> None:
    config = build_config("CartPole-v1", overrides=["league.enabled=true"])
    trainer = Trainer(config, make_game("CartPole-v1", 2, 0))
    with pytest.raises(ValueError, match="two-seat game"):
        attach(trainer, tmp_path)
