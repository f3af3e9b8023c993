"""The league database a training run creates (``league.elo_k``) or joins (the anchors it
finds there)."""

from __future__ import annotations

from pathlib import Path

import pytest

from league.db import LeagueDB, LeagueError
from selfplay.config import ConfigError, TrainConfig
from selfplay.config_files import build_config
from selfplay.train import run_training


def tiny_league_config(*overrides: str) -> TrainConfig:
    return build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "league.enabled=true",
        "league.snapshot_every=1", "league.eval_every=1", "league.eval_games=2",
        "league.eval_process=false", "game.num_envs=8", "ppo.num_steps=16", *overrides],
        seed=3, total_steps=8 * 16 * 2)


@pytest.mark.parametrize(("value", "message"), [("0", "> 0"), ("-4", "> 0"),
                                               ("1000.0", r"in \(0, 400\]")])
def test_elo_k_must_be_positive_and_at_most_400(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=rf"league\.elo_k must be {message}.*got {value}"):
        tiny_league_config(f"league.elo_k={value}")


def test_training_creates_its_league_with_elo_k_and_refuses_another(tmp_path: Path) -> None:
    run_training(tiny_league_config("league.elo_k=16"), run_dir=tmp_path / "a")
    shared = tmp_path / "a" / "league.db"
    with LeagueDB(shared) as db:
        assert db.config.elo_k == 16
        assert db.match_count() > 0 and db.replay_ratings() == db.ratings()
    # another run sharing that database with another K is refused, naming both values
    with pytest.raises(LeagueError, match=r"elo_k 16 \(this run asks for 8\)"):
        run_training(tiny_league_config("league.elo_k=8", f"league.db={shared}",
                                        "league.role=league_exploiter"),
                     run_dir=tmp_path / "b")
    # without league.elo_k a run joins it with its K; a new database gets the default, 32
    run_training(tiny_league_config(f"league.db={shared}", "league.role=league_exploiter"),
                 run_dir=tmp_path / "c")
    run_training(tiny_league_config(), run_dir=tmp_path / "d")
    with LeagueDB(shared) as joined, LeagueDB(tmp_path / "d" / "league.db") as fresh:
        assert joined.config.elo_k == 16 and fresh.config.elo_k == 32


def test_a_run_joins_a_league_whose_tournament_rated_its_anchors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Guards (review): a league made by `league tournament --players random win_or_block`
    refused every training run ("player 'random' is already in ... with a rating that is not
    frozen; give this one another name"), a name a bot cannot change. The run rates against
    the tournament's bots as they are, and says so."""
    shared = tmp_path / "league.db"
    with LeagueDB(shared, game="tictactoe") as db:  # as the tournament registers its bots
        before = {name: db.add_player(name, "bot") for name in ("random", "win_or_block")}
    run_training(tiny_league_config(f"league.db={shared}"), run_dir=tmp_path / "run")
    err = capsys.readouterr().err
    for name in before:
        assert (f"warning: league.anchors: {name} is already in {shared} with a rating that is "
                "not frozen (a tournament player); this run rates against it as it is") in err
    with LeagueDB(shared) as db:
        assert {name: db.player(name).id for name in before} == before
        assert not any(db.player(name).frozen for name in before)
        assert db.player("run@0000001").kind == "snapshot"


def test_a_run_refused_in_a_folder_holding_a_league_leaves_it_as_it_was(tmp_path: Path) -> None:
    """Guards (review): a run the league refused, in a folder that held only a league database
    (a place the README lets a run start in), left its config.yaml there."""
    folder = tmp_path / "shared"
    LeagueDB(folder / "league.db", game="CartPole-v1").close()  # another game's league
    with pytest.raises(LeagueError, match="CartPole-v1"):
        run_training(tiny_league_config(), run_dir=folder)
    assert sorted(p.name for p in folder.iterdir()) == ["league.db"]


def test_a_run_restarted_in_place_and_refused_keeps_its_config(tmp_path: Path) -> None:
    """Guards (review of the fix above): a run that stopped before its first checkpoint,
    started again and refused, lost the config.yaml it had (it could not be resumed)."""
    import shutil

    folder = tmp_path / "run"
    config = tiny_league_config()
    run_training(config, run_dir=folder)
    shutil.rmtree(folder / "checkpoints")  # as if it stopped before its first checkpoint
    saved = (folder / "config.yaml").read_bytes()
    (folder / "league.db").unlink()
    LeagueDB(folder / "league.db", game="CartPole-v1").close()  # another game's league
    with pytest.raises(LeagueError, match="CartPole-v1"):
        run_training(config, run_dir=folder)
    assert (folder / "config.yaml").read_bytes() == saved
