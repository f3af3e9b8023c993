"""How `selfplay league` names its --players in the league database."""

from __future__ import annotations

from pathlib import Path

import pytest

from league.db import LeagueDB, LeagueError
from selfplay.league_commands import register_player, resolve_player, tournament_settings


def _run_with_checkpoint(root: Path) -> Path:
    (root / "checkpoints").mkdir(parents=True)
    (root / "checkpoints" / "update_0000010.pt").write_bytes(b"weights")
    return root


def test_same_run_name_in_two_folders_gets_two_players(tmp_path: Path) -> None:
    """``expA/run1`` and ``expB/run1`` share the short name ``run1/update_0000010``: the second
    is registered under its full path, not merged into the first (whose results it would
    inherit); registering either again finds the same player."""
    a = _run_with_checkpoint(tmp_path / "expA" / "run1")
    b = _run_with_checkpoint(tmp_path / "expB" / "run1")
    with LeagueDB(tmp_path / "league.db", game="tictactoe") as db:
        name_a = register_player(db, *resolve_player(str(a), "tictactoe"))
        name_b = register_player(db, *resolve_player(str(b), "tictactoe"))
        assert name_a == "run1/update_0000010"
        assert name_b == str(b.resolve() / "checkpoints" / "update_0000010.pt")
        assert db.player(name_a).path != db.player(name_b).path
        assert register_player(db, *resolve_player(str(b), "tictactoe")) == name_b
        assert register_player(db, *resolve_player(str(a), "tictactoe")) == name_a
        assert register_player(db, *resolve_player("Win_Or_Block", "tictactoe")) \
            == "win_or_block"


def test_a_bot_name_taken_by_a_checkpoint_is_an_error(tmp_path: Path) -> None:
    with LeagueDB(tmp_path / "league.db", game="tictactoe") as db:
        db.add_player("random", "checkpoint", path=str(tmp_path / "random.pt"))
        with pytest.raises(LeagueError, match="kind 'checkpoint', not 'bot'"):
            register_player(db, *resolve_player("random", "tictactoe"))


def test_checkpoint_of_another_game_is_skipped_with_that_reason(tmp_path: Path,
                                                               capsys) -> None:
    from selfplay.config import build_config
    from selfplay.league_commands import tournament
    from selfplay.train import run_training

    run = tmp_path / "cartpole"
    run_training(build_config("CartPole-v1", overrides=["log.progress=false",
                                                        "log.tensorboard=false"],
                              total_steps=1024), run_dir=run)
    result = tournament("tictactoe", ["random", "win_or_block", str(run)],
                        str(tmp_path / "l.db"), games_per_pair=2, until_sigma=None,
                        map_name=None, num_envs=2, seed=0, quiet=True)
    assert result["played"] == 2 and len(result["skipped_players"]) == 1
    assert "plays CartPole-v1, not tictactoe" in capsys.readouterr().err


def test_tournament_settings_name_a_game_length_other_than_the_default() -> None:
    assert tournament_settings(None, 2000) == ""  # the game's default: the id of old databases
    assert tournament_settings(2000, 2000) == ""  # the same games, spelled out
    assert tournament_settings(300, 2000) == "max_steps=300"
    assert tournament_settings(300, None) == "max_steps=300"  # a game without a default
