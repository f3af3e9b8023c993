"""`selfplay train --init-from`: a new run starts from another checkpoint's network (a PPO, a
behaviour-cloning or a snapshot checkpoint), optionally kept near it by a decaying KL penalty."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from games.options import to_mapping
from games.registry import make_game
from league.db import LeagueDB
from league.snapshots import load_snapshot
from selfplay.checkpoint import (
    CheckpointError,
    load_checkpoint,
    run_checkpoints,
    save_checkpoint,
)
from selfplay.config import ConfigError, TrainConfig
from selfplay.config_files import build_config, read_yaml
from selfplay.inference import NumpyActorCritic
from selfplay.kl import kl_divergence
from selfplay.networks import ActorCritic
from selfplay.ppo import Trainer
from selfplay.train import build_trainer, run_training

PER_UPDATE = 8 * 16  # env steps of one update: game.num_envs * ppo.num_steps
SMALL = ["log.progress=false", "log.tensorboard=false", "game.num_envs=8", "ppo.num_steps=16",
         "league.enabled=false", "normalize.obs=true", "normalize.value=true"]
QUIET = ["--no-progress", "--set", "log.tensorboard=false", "--set", "game.num_envs=8",
         "--set", "ppo.num_steps=16", "--set", "league.enabled=false", "--set",
         "normalize.obs=true", "--set", "normalize.value=true"]


def tictactoe(overrides: list[str], seed: int = 5, updates: int = 1,
              init_from: str | Path | None = None) -> TrainConfig:
    return build_config("tictactoe", overrides=[*SMALL, *overrides], seed=seed,
                        total_steps=updates * PER_UPDATE, init_from=init_from)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tic-tac-toe run of two updates (its weights and normalization statistics moved)."""
    run = tmp_path_factory.mktemp("init_from") / "source"
    run_training(tictactoe([], seed=3, updates=2), run_dir=run)
    return run


def newest(run: Path) -> Path:
    return run_checkpoints(run)[-1]


def assert_same_weights(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert torch.equal(got[key], value), key


def test_init_from_loads_the_network_bit_exactly_with_a_fresh_optimizer(source: Path) -> None:
    """Weights and normalization statistics equal the checkpoint's before any update; the
    optimizer, the counters and the acting mirror start fresh; no teacher without the
    penalty."""
    path = newest(source)
    saved = load_checkpoint(path)["agent"]
    assert {"obs_rms.mean", "value_rms.mean"} <= saved.keys()
    trainer = build_trainer(tictactoe([], seed=9, init_from=path), None, path)
    try:
        assert_same_weights(trainer.agent.state_dict(), saved)
        assert trainer.optimizer.state_dict()["state"] == {}
        assert trainer.update == 0 and trainer.global_step == 0
        assert trainer.teacher is None and trainer.teacher_coef() == 0.0
    finally:
        trainer.game.close()


def test_the_acting_mirror_acts_with_the_loaded_weights(tmp_path: Path) -> None:
    """CartPole acts through a NumPy copy of the network: it is refreshed after loading."""
    config = build_config("CartPole-v1", overrides=["log.progress=false", "game.num_envs=2"])
    game = make_game("CartPole-v1", num_envs=1, seed=0)
    agent = ActorCritic(game.spec, config.network, config.normalize)
    game.close()
    with torch.no_grad():
        for param in agent.parameters():
            param.add_(1.0)
    path = save_checkpoint(tmp_path / "c.pt", {"game": "CartPole-v1",
                                               "config": to_mapping(config),
                                               "agent": agent.state_dict()})
    trainer = build_trainer(config, None, path)
    try:
        assert trainer.fast_policy is not None
        for (w, b), (w_want, b_want) in zip(trainer.fast_policy.actor,
                                            NumpyActorCritic(agent).actor, strict=True):
            assert np.array_equal(w, w_want) and np.array_equal(b, b_want)
    finally:
        trainer.game.close()


def test_a_checkpoint_of_game_config_and_agent_only_will_do(source: Path,
                                                             tmp_path: Path) -> None:
    """A behaviour-cloning checkpoint holds only the game, the config and the network."""
    state = load_checkpoint(newest(source))
    bc = save_checkpoint(tmp_path / "bc.pt", {key: state[key] for key in
                                              ("game", "config", "agent")})
    trainer = build_trainer(tictactoe([], init_from=bc), None, bc)
    try:
        assert_same_weights(trainer.agent.state_dict(), state["agent"])
    finally:
        trainer.game.close()


def test_a_run_directory_means_its_newest_checkpoint_recorded_in_the_config(
        source: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = tmp_path / "run"
    run_training(tictactoe([], init_from=source), run_dir=run)
    assert f"using {newest(source)}" in capsys.readouterr().err
    assert read_yaml(run / "config.yaml")["init_from"] == str(newest(source))


def test_the_same_command_again_resumes_though_the_source_run_moved_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """--init-from given relative (a run directory) is recorded as the absolute path of the
    checkpoint it named. Run again into the same run directory after the source run has saved
    a newer checkpoint, the same command resumes its run (as given, it still names the same
    source) and the record stays; another checkpoint is another run, refused."""
    monkeypatch.chdir(tmp_path)
    run_training(tictactoe([], seed=3), run_dir=Path("src"))
    first = (tmp_path / "src" / "checkpoints" / "update_0000001.pt").resolve()
    run_training(tictactoe([], init_from="src"), run_dir=Path("run"))
    assert read_yaml(tmp_path / "run" / "config.yaml")["init_from"] == str(first)
    run_training(None, resume=Path("src"), total_steps=2 * PER_UPDATE)  # the source goes on
    assert newest(tmp_path / "src").name == "update_0000002.pt"
    capsys.readouterr()
    summary = run_training(tictactoe([], init_from="src"), run_dir=Path("run"))
    assert "already holds this run (same settings): resuming it" in capsys.readouterr().err
    assert summary["updates"] == 1
    assert read_yaml(tmp_path / "run" / "config.yaml")["init_from"] == str(first)
    with pytest.raises(FileExistsError,
                       match=r"other settings \(init_from .*update_0000001.pt. -> "
                             r".*update_0000002.pt.\)"):
        run_training(tictactoe([], init_from="src/checkpoints/update_0000002.pt"),
                     run_dir=Path("run"))


def test_another_network_is_a_one_line_error(source: Path) -> None:
    """The settings that differ are named (it was PyTorch's "size mismatch for
    actor_torso.net.0.weight: copying a param with shape ..." line)."""
    trained = read_yaml(source / "config.yaml")["network"]["hidden"]
    with pytest.raises(CheckpointError, match=re.escape(
            f"holds a network built with network.hidden={trained!r} (this run: [32]): its "
            "weights do not fit this run's; set the same")) as error:
        build_trainer(tictactoe(["network.hidden=[32]"], init_from=source), None,
                      newest(source))
    assert "\n" not in str(error.value)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "selfplay.cli", "train", *args],
                          capture_output=True, text=True, timeout=120)


def assert_one_line_error(proc: subprocess.CompletedProcess[str], pattern: str) -> None:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and pattern in lines[0], proc.stderr


def test_bad_init_from_on_the_command_line_is_a_one_line_error(source: Path,
                                                               tmp_path: Path) -> None:
    """Another game's checkpoint, another network shape, --init-from with --resume: one line
    each, and no run directory left behind."""
    cartpole = build_config("CartPole-v1")
    game = make_game("CartPole-v1", num_envs=1, seed=0)
    agent = ActorCritic(game.spec, cartpole.network, cartpole.normalize)
    game.close()
    other = save_checkpoint(tmp_path / "cartpole.pt", {
        "game": "CartPole-v1", "config": to_mapping(cartpole), "agent": agent.state_dict()})
    run = tmp_path / "run"
    assert_one_line_error(
        run_cli("--game", "tictactoe", "--init-from", str(other), "--run-dir", str(run), *QUIET),
        f"error: {other} is for game CartPole-v1, this run trains tictactoe")
    assert not run.exists()
    assert_one_line_error(
        run_cli("--game", "tictactoe", "--init-from", str(newest(source)), "--run-dir",
                str(run), "--set", "network.hidden=[64,64]", *QUIET),
        "(this run: [64, 64]): its weights do not fit this run's; set the same")
    assert not run.exists()
    assert_one_line_error(  # guards (review): "Missing key(s) in state_dict: obs_rms.mean"
        run_cli("--game", "tictactoe", "--init-from", str(newest(source)), "--run-dir",
                str(run), *QUIET, "--set", "normalize.obs=false"),
        "was trained with normalize.obs true; this network has it false: --set "
        "normalize.obs=true to match it")
    assert not run.exists()
    assert_one_line_error(run_cli("--resume", str(source), "--init-from", str(source)),
                          "--init-from starts a new run")


def test_the_teacher_penalty_needs_init_from() -> None:
    with pytest.raises(ConfigError, match="ppo.teacher_kl_coef > 0 needs init_from"):
        tictactoe(["ppo.teacher_kl_coef=0.1"])
    with pytest.raises(ConfigError, match="ppo.teacher_kl_steps must be >= 1"):
        tictactoe(["ppo.teacher_kl_coef=0.1", "ppo.teacher_kl_steps=0"], init_from="x.pt")


def test_teacher_penalty_starts_at_zero_grows_with_drift_and_decays_on_schedule(
        source: Path) -> None:
    """The policy equals the teacher at first (KL exactly 0 on a rollout's observations); the
    updates move it away (KL > 0) while the teacher stays the init network; the coefficient
    falls linearly to 0 at ppo.teacher_kl_steps, after which the penalty is not computed."""
    path = newest(source)
    config = tictactoe(["ppo.teacher_kl_coef=0.5", f"ppo.teacher_kl_steps={2 * PER_UPDATE}"],
                       updates=4, init_from=path)
    trainer = build_trainer(config, None, path)
    try:
        assert trainer.teacher is not None
        trainer.collect()
        buf = trainer.buffer
        obs = buf.flat(buf.obs)
        assert buf.mask is not None
        mask = buf.flat(buf.mask)

        def teacher_kl() -> torch.Tensor:
            assert trainer.teacher is not None
            with torch.no_grad():
                return kl_divergence(trainer.teacher.dist(obs, mask),
                                     trainer.agent.dist(obs, mask))

        assert (teacher_kl() == 0).all()
        metrics = [trainer.run_update() for _ in range(4)]
        assert teacher_kl().mean() > 0
        assert_same_weights(trainer.teacher.state_dict(), load_checkpoint(path)["agent"])
        assert [m["loss/teacher_kl_coef"] for m in metrics] == [0.5, 0.25, 0.0, 0.0]
        assert all(m["loss/teacher_kl"] > 0 for m in metrics[:2])
        assert not any("loss/teacher_kl" in m for m in metrics[2:])
    finally:
        trainer.game.close()


def test_resume_continues_exactly_without_reading_init_from_again(source: Path,
                                                                  tmp_path: Path) -> None:
    """A run started from a checkpoint, stopped after 2 updates and resumed (the init file
    gone by then), ends with the weights of an uninterrupted run: the resumed run keeps its own
    network and its saved teacher."""
    init = Path(shutil.copy(newest(source), tmp_path / "init.pt"))
    sets = ["ppo.anneal_lr=false", "ppo.teacher_kl_coef=0.5",
            f"ppo.teacher_kl_steps={4 * PER_UPDATE}", "checkpoint.every_updates=1"]
    run_training(tictactoe(sets, updates=3, init_from=init), run_dir=tmp_path / "a")
    run_training(tictactoe(sets, updates=2, init_from=init), run_dir=tmp_path / "b")
    init.unlink()
    run_training(None, resume=tmp_path / "b", total_steps=3 * PER_UPDATE)
    want = load_checkpoint(newest(tmp_path / "a"))
    got = load_checkpoint(newest(tmp_path / "b"))
    assert newest(tmp_path / "b").name == "update_0000003.pt"
    assert_same_weights(got["agent"], want["agent"])
    assert_same_weights(got["teacher"], want["teacher"])


def test_the_league_rates_the_cloned_network_as_the_first_snapshot(source: Path,
                                                                   tmp_path: Path) -> None:
    """With league.enabled the run's first snapshot (update 0) holds the init weights, names
    the checkpoint as its parent, and plays its rating games before training moves it."""
    path = newest(source)
    config = tictactoe(["league.enabled=true", "league.eval_process=false",
                        "league.eval_games=2", "league.snapshot_every=10",
                        "league.eval_every=10"], init_from=path)
    run = tmp_path / "run"
    run_training(config, run_dir=run)
    with LeagueDB(run / "league.db") as db:
        first, *rest = [p for p in db.players() if p.kind == "snapshot"]
        assert first.name == "run@0000000" and not rest
        assert first.metadata["update"] == 0 and first.metadata["parent"] == str(path)
        assert db.match_keys(f"eval@{first.name}/"), "the cloned network was not rated"
    snapshot = load_snapshot(str(first.path), "tictactoe")
    assert_same_weights(snapshot.weights, load_checkpoint(path)["agent"])


def test_trainer_without_init_from_has_no_teacher_state(tmp_path: Path) -> None:
    """The penalty off: no teacher network, no teacher metrics, none in the checkpoint."""
    config = tictactoe([])
    trainer = Trainer(config, make_game("tictactoe", config.game.num_envs, config.seed))
    try:
        metrics = trainer.run_update()
        assert not any(key.startswith("loss/teacher") for key in metrics)
        assert "teacher" not in trainer.state_dict()
    finally:
        trainer.game.close()


def test_a_network_that_ignores_other_planes_is_a_one_line_error(tmp_path: Path) -> None:
    """``network.ignore_planes`` leaves the weights' shapes as they are, so a clone trained
    blind to the queue planes would load into a run that reads them: refused, naming both."""
    from games.lux.adapter import lux_spec
    from selfplay.evaluate import start_weights

    spec = lux_spec("lux", 1, 12)
    blind = build_config("lux", overrides=["network.grid_cells=[8]", "network.channels=[4, 8]",
                                           "network.ignore_planes=[queued_dig, queued_move]"])
    agent = ActorCritic(spec, blind.network, blind.normalize)
    path = save_checkpoint(tmp_path / "bc.pt", {"game": "lux", "config": to_mapping(blind),
                                                "agent": agent.state_dict()})
    same = ActorCritic(spec, blind.network, blind.normalize)
    start_weights(same, spec, path, blind.game.options)
    assert_same_weights(same.state_dict(), agent.state_dict())
    seeing = build_config("lux", overrides=["network.grid_cells=[8]", "network.channels=[4, 8]"])
    with pytest.raises(CheckpointError, match=r"bc.pt was trained with network.ignore_planes="
                       r"\['queued_dig', 'queued_move'\], this run has \[\]: set the same"):
        start_weights(ActorCritic(spec, seeing.network, seeing.normalize), spec, path,
                      seeing.game.options)


def test_a_network_trained_on_other_observations_is_a_one_line_error(tmp_path: Path) -> None:
    """Guards: a clone trained with microRTS's rotated board for player 1 started PPO on the
    unrotated board (same shapes), silently."""
    from selfplay.evaluate import start_weights

    rotated = build_config("microrts", overrides=[
        "game.options.map=basesWorkers8x8", "game.options.rotate_player1=true"])
    game = make_game("microrts", num_envs=1, seed=0,
                     options={**rotated.game.options, "num_selfplay_envs": 0})
    spec = game.spec
    game.close()
    agent = ActorCritic(spec, rotated.network, rotated.normalize)
    path = save_checkpoint(tmp_path / "bc.pt", {"game": "microrts",
                                                "config": to_mapping(rotated),
                                                "agent": agent.state_dict()})
    start_weights(ActorCritic(spec, rotated.network, rotated.normalize), spec, path,
                  rotated.game.options)
    plain = build_config("microrts", overrides=["game.options.map=basesWorkers8x8"])
    with pytest.raises(CheckpointError, match=r"bc.pt was trained with "
                                              r"game.options.rotate_player1=True, this run has "
                                              r"False: .*set game.options.rotate_player1=True"):
        start_weights(ActorCritic(spec, plain.network, plain.normalize), spec, path,
                      plain.game.options)
