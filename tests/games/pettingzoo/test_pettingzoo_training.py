"""The trainer drives the adapter end to end (learner on both seats, a league, one env against
the console) and resumes exactly."""

from __future__ import annotations

from pathlib import Path

import pytest

from selfplay.config_files import build_config
from selfplay.train import run_training

TINY = ["game.num_envs=4", "ppo.num_steps=16", "ppo.num_minibatches=2", "ppo.update_epochs=1",
        "log.tensorboard=false", "log.progress=false", "checkpoint.every_updates=1"]


def test_train_and_resume_tiny_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = build_config("pettingzoo/pong_v3", overrides=TINY, total_steps=128)
    assert config.network.kind == "nature_cnn" and config.network.critic_input == "obs"
    assert config.ppo.clip_coef == 0.1 and config.game.options["frame_stack"] == 4
    assert config.league.enabled and config.game.options["builtin_opponent_share"] == 0.25
    summary = run_training(config, run_dir=tmp_path / "run")
    assert summary["global_step"] == 128 and summary["updates"] == 2
    assert list((tmp_path / "run" / "checkpoints").glob("*.pt"))
    summary = run_training(config, resume=tmp_path / "run", total_steps=256)
    assert summary["global_step"] == 256
    err = capsys.readouterr().err
    assert "resuming" in err and "cannot restore" not in err


def test_play_a_checkpoint_against_the_builtin_opponent(tmp_path: Path) -> None:
    """`selfplay play --vs builtin`: games against the console's own Pong player; an untrained
    policy loses them (the console scores 21 first)."""
    from games.core import GameError
    from selfplay.play import play

    config = build_config("pettingzoo/pong_v3", overrides=[*TINY, "league.enabled=false"],
                          total_steps=64)
    run_training(config, run_dir=tmp_path / "run")
    checkpoint = sorted((tmp_path / "run" / "checkpoints").glob("*.pt"))[-1]
    result = play(checkpoint, "BuiltIn", games=1, num_envs=1)
    assert result["opponent"] == "builtin" and result["games"] == 1
    assert result["losses"] == 1
    with pytest.raises(GameError, match=r"no scripted opponent 'workerrush'.*\(builtin\)"):
        play(checkpoint, "workerrush", games=1)
