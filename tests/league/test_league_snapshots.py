"""Snapshot files: atomic, safe to load, usable as policies; broken ones skipped, not fatal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from ttt_players import BOTS, game_factory, policy_factory

from games.files import CheckpointError
from games.options import to_mapping
from games.registry import make_game
from league.db import LeagueDB
from league.snapshots import (
    check_players,
    config_hash,
    load_player_snapshot,
    load_snapshot,
    save_snapshot,
    snapshot_name,
)
from league.tournament import Policy, TournamentConfig, run_tournament
from selfplay.config_files import build_config
from selfplay.evaluate import load_agent
from selfplay.networks import ActorCritic
from selfplay.policy import FrozenPolicy


@pytest.fixture
def db(tmp_path: Path) -> Iterator[LeagueDB]:
    league = LeagueDB(tmp_path / "league.db", game="tictactoe")
    yield league
    league.close()


def tictactoe_agent() -> tuple[dict[str, object], ActorCritic]:
    config = build_config("tictactoe")
    game = make_game("tictactoe", num_envs=1, seed=0)
    agent = ActorCritic(game.spec, config.network, config.normalize)
    game.close()
    return to_mapping(config), agent


def test_snapshot_round_trip_and_registration(db: LeagueDB, tmp_path: Path) -> None:
    config, agent = tictactoe_agent()
    name = snapshot_name("run1", 40)
    pid = save_snapshot(db, tmp_path / "snaps", name, agent.state_dict(), config,
                        env_steps=4096, parent="run1@0000020", update=40)
    player = db.player(pid)
    assert (player.name, player.kind) == ("run1@0000040", "snapshot")
    assert player.metadata["env_steps"] == 4096 and player.metadata["parent"] == "run1@0000020"
    assert player.metadata["config_hash"] == config_hash(config) and player.metadata["game"] \
        == "tictactoe"
    snap = load_snapshot(player.path or "", game="tictactoe")
    assert snap.info.update == 40
    for key, value in agent.state_dict().items():
        assert torch.equal(snap.weights[key], value)
    assert not list((tmp_path / "snaps").glob("*.tmp"))  # atomic write left no temp file


def test_snapshot_is_a_policy_in_a_tournament(db: LeagueDB, tmp_path: Path) -> None:
    config, agent = tictactoe_agent()
    save_snapshot(db, tmp_path, "net", agent.state_dict(), config, env_steps=0)
    for bot in BOTS:
        db.add_player(bot, "bot")

    def factory(name: str) -> Policy:
        if name in BOTS:
            return policy_factory(name)
        _, net, _ = load_agent(db.player(name).path or "")  # reads a snapshot like a checkpoint
        return FrozenPolicy(net, generator=torch.Generator().manual_seed(0))

    summary = run_tournament(db, ["net", "win_or_block"], factory, game_factory,
                             TournamentConfig(games_per_pair=20, num_envs=8))
    assert summary.played == 20
    assert db.leaderboard()[0].name == "win_or_block"  # an untrained net loses


def test_missing_and_corrupt_snapshots_are_skipped(db: LeagueDB, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    config, agent = tictactoe_agent()
    good = save_snapshot(db, tmp_path, "good", agent.state_dict(), config, env_steps=1)
    gone = save_snapshot(db, tmp_path, "gone", agent.state_dict(), config, env_steps=2)
    bad = save_snapshot(db, tmp_path, "bad", agent.state_dict(), config, env_steps=3)
    Path(db.player(gone).path or "").unlink()
    Path(db.player(bad).path or "").write_bytes(b"\x00garbage" * 100)
    assert load_player_snapshot(db, good) is not None
    assert load_player_snapshot(db, gone) is None
    assert "skipping player 'gone'" in capsys.readouterr().err
    broken = {p.name: reason for p, reason in check_players(db)}
    assert set(broken) == {"gone", "bad"}
    assert "not found" in broken["gone"] and "corrupt" in broken["bad"]
    assert db.player("bad").broken and db.player("good").broken is None
    with pytest.raises(CheckpointError, match="not 'microrts'"):
        load_snapshot(db.player(good).path or "", game="microrts")
