"""``run_episodes``: which finished episodes an evaluation counts; loading checkpoints (run
directories, weights trained on other shapes)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from games.core import Discrete, GameSpec
from games.options import to_mapping
from games.registry import make_game
from league.snapshots import Snapshot, SnapshotInfo
from league.tournament import IncompatiblePlayer
from selfplay.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from selfplay.config_files import build_config
from selfplay.evaluate import evaluate, load_agent, run_episodes, shape_mismatch
from selfplay.league_rating import snapshot_agent
from selfplay.networks import ActorCritic


class EnvDependentPole:
    """CartPole play that depends on the env: env 0 always pushes left (its pole falls within
    a few dozen steps), the others balance (angle plus angular velocity; 500 steps)."""

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        balance = (obs[:, 2] + obs[:, 3] > 0).astype(np.int64)
        balance[0] = 0
        return balance


def test_each_env_contributes_its_share_not_the_first_to_finish() -> None:
    """8 episodes over 4 envs: 2 from each, in env order. Counting episodes as they finish
    would take env 0's short ones only (it ends a game every few dozen steps), a biased mean."""
    game = make_game("CartPole-v1", num_envs=4, seed=0)
    try:
        returns = run_episodes(game, EnvDependentPole(), episodes=8, seed=0)  # type: ignore[arg-type]
    finally:
        game.close()
    assert len(returns) == 8
    assert max(returns[:2]) < 60, returns  # env 0's two falls
    assert min(returns[2:]) == 500, returns  # the balancing envs' full episodes
    uneven = make_game("CartPole-v1", num_envs=3, seed=0)
    try:
        shares = run_episodes(uneven, EnvDependentPole(), episodes=5, seed=1)  # type: ignore[arg-type]
    finally:
        uneven.close()
    assert len(shares) == 5 and max(shares[:2]) < 60 and min(shares[2:]) == 500  # 2, 2, 1


# --------------------------------------------------------------------------- loading weights


def _untrained(path: Path, game: str, *overrides: str) -> Path:
    """A checkpoint of an untrained network for ``game`` (config and weights only)."""
    config = build_config(game, overrides=list(overrides))
    made = make_game(game, num_envs=1, seed=0, options=config.game.options)
    spec = made.spec
    made.close()
    agent = ActorCritic(spec, config.network, config.normalize)
    return save_checkpoint(path, {"config": to_mapping(config), "agent": agent.state_dict()})


def test_evaluate_takes_a_run_directory(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A run directory means its newest checkpoint, named on stderr and in the result."""
    run = tmp_path / "run"
    _untrained(run / "checkpoints" / "update_0000001.pt", "CartPole-v1")
    newest = _untrained(run / "checkpoints" / "update_0000002.pt", "CartPole-v1")
    result = evaluate(run, episodes=2, num_envs=1)
    assert result["checkpoint"] == str(newest) and result["episodes"] == 2
    assert f"using {newest}" in capsys.readouterr().err
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        evaluate(tmp_path, episodes=1)


@pytest.mark.parametrize("normalized", [False, True])
def test_another_observation_shape_is_named_not_dumped(tmp_path: Path, normalized: bool) -> None:
    """CartPole weights (4 observations) for Acrobot (6): one line naming both shapes, from
    the saved observation statistics or from the training config's game."""
    path = _untrained(tmp_path / "pole.pt", "CartPole-v1", f"normalize.obs={normalized}")
    acrobot = make_game("Acrobot-v1", num_envs=1, seed=0)
    acrobot.close()
    with pytest.raises(CheckpointError) as error:
        load_agent(path, acrobot.spec)
    assert str(error.value) == (f"{path} was trained on observations of shape (4,); this game "
                                "gives (6,): its network takes only the observations it was "
                                "trained on")


def test_another_network_names_the_first_difference(tmp_path: Path) -> None:
    """The same game with another network: PyTorch's first difference, on one line."""
    path = _untrained(tmp_path / "pole.pt", "CartPole-v1", "network.hidden=[8]")
    state = load_checkpoint(path)
    state["config"]["network"]["hidden"] = [16]  # as if the config had changed since
    with pytest.raises(CheckpointError, match=r"does not match the network of game "
                       r"CartPole-v1: size mismatch for actor_torso\.1\.weight") as error:
        load_agent(path, None, state)
    assert "\n" not in str(error.value)


def test_a_config_this_selfplay_cannot_read_is_one_line(tmp_path: Path) -> None:
    """Checkpoints are read alike by eval/play (load_agent) and train --init-from
    (Trainer.start_from): a config of another version is one CheckpointError line."""
    from selfplay.ppo import Trainer

    path = _untrained(tmp_path / "pole.pt", "CartPole-v1")
    state = load_checkpoint(path)
    state["config"]["ppo"]["no_such_setting"] = 1
    state["game"] = "CartPole-v1"
    save_checkpoint(path, state)
    message = (re.escape(f"{path} holds a config this selfplay cannot read: unknown key ")
               + "'ppo.no_such_setting'")
    with pytest.raises(CheckpointError, match=message):
        load_agent(path)
    config = build_config("CartPole-v1", overrides=["log.tensorboard=false"])
    trainer = Trainer(config, make_game("CartPole-v1", num_envs=1, seed=0))
    try:
        with pytest.raises(CheckpointError, match=message):
            trainer.start_from(path)
        del state["config"]["ppo"]["no_such_setting"], state["agent"]
        save_checkpoint(path, state)
        with pytest.raises(CheckpointError,
                           match=re.escape(f"{path} lacks the training config or weights")):
            trainer.start_from(path)
    finally:
        trainer.game.close()


def test_eval_and_play_name_a_checkpoint_without_its_config(tmp_path: Path) -> None:
    """A checkpoint file with the format tag but no training config: one line naming it."""
    from selfplay.play import play

    path = _untrained(tmp_path / "pole.pt", "CartPole-v1")
    state = load_checkpoint(path)
    del state["config"]
    save_checkpoint(path, state)
    message = re.escape(f"{path} lacks the training config or weights")
    with pytest.raises(CheckpointError, match=message):
        evaluate(path, episodes=1)
    with pytest.raises(CheckpointError, match=message):
        play(path, "random", games=1)


def test_board_size_mismatch_message() -> None:
    """Grid observations are named as boards (images as images), in the game's terms."""
    spec = GameSpec(name="g", num_envs=1, num_seats=2, obs_shape=(27, 8, 8),
                    obs_dtype=np.dtype(np.uint8), action_space=Discrete(3), obs_kind="grid")
    assert shape_mismatch("a.pt", spec, (27, 16, 16), None) == (
        "a.pt was trained on observations of shape (27, 16, 16) (16x16 board); this game "
        "gives (27, 8, 8) (8x8 board): its network is tied to the board size it was trained "
        "on (network.grid_critic: flatten; train with pool for a network that plays every "
        "size)")
    assert shape_mismatch("a.pt", spec, (26, 8, 8), None) == (
        "a.pt was trained on 26 observation planes; this game gives 27 (the game's "
        "observation changed since): retrain it, or play it with the version of selfplay that "
        "trained it")
    assert shape_mismatch("a.pt", spec, (27, 8, 8), (64, 7)) == (
        "a.pt was trained on actions of shape (64, 7); this game takes (): its network "
        "outputs only the actions it was trained on")
    assert shape_mismatch("a.pt", spec, (27, 8, 8), ()) is None
    assert shape_mismatch("a.pt", spec, None, None) is None


def test_league_snapshot_of_another_shape_is_incompatible(tmp_path: Path) -> None:
    """A league snapshot loads through the same check: an incompatible player, with shapes."""
    path = _untrained(tmp_path / "pole.pt", "CartPole-v1")
    state = load_checkpoint(path)
    acrobot = make_game("Acrobot-v1", num_envs=1, seed=0)
    acrobot.close()
    info = SnapshotInfo(game="CartPole-v1", env_steps=0, parent=None, config_hash="",
                        created=0.0)
    snapshot = Snapshot(state["agent"], state["config"], info, path)
    config = build_config("CartPole-v1")  # the snapshot's own settings
    with pytest.raises(IncompatiblePlayer, match=r"does not fit this run's network: .*pole\.pt "
                       r"was trained on observations of shape \(4,\); this game gives \(6,\)"):
        snapshot_agent(acrobot.spec, config.network, config.normalize, snapshot)
    pole = make_game("CartPole-v1", num_envs=1, seed=0)
    pole.close()
    assert snapshot_agent(pole.spec, config.network, config.normalize, snapshot) is not None


def test_videos_of_odd_sizes_are_written_and_a_failed_one_keeps_the_old_file(
        tmp_path: Path) -> None:
    """Guards: frames of an odd side (microRTS with an odd render_cell on a map with an odd
    side) made ffmpeg write nothing, and the empty file replaced an existing video (exit 0)."""
    import imageio.v3 as iio

    from games.core import GameError
    from selfplay.evaluate import write_video

    frames = [np.full((201, 225, 3), k * 20, np.uint8) for k in range(5)]
    video = tmp_path / "game.mp4"
    write_video(video, frames, fps=5)
    assert iio.imread(video, index=0).shape[:2] == (202, 226)
    before = video.read_bytes()
    with pytest.raises(GameError, match="writing video .*game.mp4 failed: its frames differ"):
        write_video(video, [np.zeros((4, 4, 3), np.uint8), np.zeros((6, 6, 3), np.uint8)], 5)
    with pytest.raises(GameError, match="writing video .*game.mp4 failed"):  # ffmpeg refuses
        write_video(video, [np.zeros((2, 2, 5), np.uint8)] * 2, 5)
    assert video.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["game.mp4"]


# --------------------------------------------------------------------------- game length


def test_max_steps_cuts_every_episode_and_progress_counts_them(tmp_path: Path) -> None:
    """Guards: ``eval`` had no game length of its own: a PettingZoo checkpoint playing itself
    ran its 25,000-step games for minutes with no output and no way to shorten them."""
    path = _untrained(tmp_path / "pole.pt", "CartPole-v1")
    seen: list[tuple[int, int]] = []
    result = evaluate(path, episodes=5, num_envs=2, max_steps=7,
                      progress=lambda done, total: seen.append((done, total)))
    assert result["episodes"] == 5 and max(result["returns"]) <= 7.0
    assert seen == [(k, 5) for k in range(1, 6)]


def test_max_steps_of_a_game_without_a_length_is_one_line(tmp_path: Path) -> None:
    from games.core import GameError

    path = _untrained(tmp_path / "ttt.pt", "tictactoe")
    with pytest.raises(GameError, match="^tictactoe has no game length to set; drop "
                                        "--max-steps$"):
        evaluate(path, episodes=1, max_steps=3)


def test_a_length_in_agent_steps_cuts_pettingzoo_games_after_that_many_steps() -> None:
    """PettingZoo's ``max_cycles`` counts emulator frames (``frame_skip`` per agent step)."""
    from games.registry import family_of

    game = "pettingzoo/pong_v3"
    options = family_of(game).with_game_length(game, {"frame_skip": 3}, 5)
    made = make_game(game, num_envs=1, seed=0, options=options)
    try:
        made.reset(seed=0)
        shape = (1, made.spec.num_seats, *made.spec.action_space.action_shape)
        for step in range(1, 6):
            batch = made.step(np.zeros(shape, np.int64))
            assert bool(batch.truncated[0]) == (step == 5), step
    finally:
        made.close()


def test_a_checkpoint_with_options_this_version_cannot_read_is_skipped(tmp_path: Path) -> None:
    """Guards (diff review): a tournament checkpoint whose saved game options this version
    refuses (a key it does not know) stopped the whole tournament with the option's error,
    naming no file, once only file failures skipped a player; it is skipped, named."""
    import json
    import subprocess
    import sys

    path = _untrained(tmp_path / "odd.pt", "microrts", "game.options.map=basesWorkers8x8",
                      "game.options.num_selfplay_envs=1")
    state = load_checkpoint(path)
    state["config"]["game"]["options"]["bogus"] = 1
    save_checkpoint(path, state)
    proc = subprocess.run(
        [sys.executable, "-m", "selfplay.cli", "league", "tournament", "--game", "microrts",
         "--players", "workerrush", "lightrush", str(path), "--games-per-pair", "1",
         "--map", "basesWorkers8x8", "--max-steps", "30", "--db", str(tmp_path / "l.db"),
         "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["skipped_players"] == [str(path)]
    assert f"{path} holds game options this selfplay cannot read" in proc.stderr
