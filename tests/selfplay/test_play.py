"""`selfplay play`: matches against bots and checkpoints, quotas, intervals, errors."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from games.core import GameError
from selfplay.checkpoint import CheckpointError
from selfplay.play import play, wilson_interval

SELFPLAY = [sys.executable, "-m", "selfplay.cli"]


@pytest.fixture(scope="module")
def tictactoe_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("play") / "run"
    proc = subprocess.run([*SELFPLAY, "train", "--game", "tictactoe", "--total-steps", "4096",
                           "--run-dir", str(run_dir), "--no-progress", "--set",
                           "log.tensorboard=false"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return sorted((run_dir / "checkpoints").glob("update_*.pt"))[-1]


def test_wilson_interval_reference_values() -> None:
    low, high = wilson_interval(8, 10)  # textbook: 0.490 - 0.943
    assert low == pytest.approx(0.4902, abs=1e-3) and high == pytest.approx(0.9433, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_play_against_bot_counts_every_game(tictactoe_checkpoint: Path) -> None:
    seen: list[tuple[int, int]] = []
    result = play(tictactoe_checkpoint, "WIN_OR_BLOCK", games=37, seed=3,
                  progress=lambda done, total: seen.append((done, total)))
    assert result["games"] == 37
    assert seen == [(k, 37) for k in range(1, 38)]  # every finished game is reported
    assert result["wins"] + result["losses"] + result["draws"] == 37
    assert result["opponent"] == "win_or_block"
    assert _sides(result) == [19, 18] and result["maps"] == []  # seats swap in odd envs of 16
    low, high = result["ci95"]
    assert low <= result["win_rate"] <= high
    # tic-tac-toe scores +1 / -1 / 0: the mean return is (wins - losses) / games, per side too
    assert result["return_mean"] == pytest.approx((result["wins"] - result["losses"]) / 37)
    for side in result["sides"]:
        assert side["return_mean"] == pytest.approx((side["wins"] - side["losses"])
                                                    / side["games"])


@pytest.mark.parametrize("games", [2, 16])
def test_the_checkpoint_opens_half_the_tictactoe_games(
        tictactoe_checkpoint: Path, monkeypatch: pytest.MonkeyPatch, games: int) -> None:
    """The checkpoint's seat alternates by env, and env e's first game is opened by seat
    (e // 2) % 2, so it moves first in half the games (the opener of an env's first game was
    drawn: it opened both of 2 games, 11 of 16)."""
    from games.boardgames.tictactoe import TicTacToe

    openers: list[list[int]] = []
    original = TicTacToe.reset

    def reset(self: TicTacToe, seed: int | None = None):  # type: ignore[no-untyped-def]
        batch = original(self, seed)
        openers.append(self.starter.tolist())
        return batch

    monkeypatch.setattr(TicTacToe, "reset", reset)
    result = play(tictactoe_checkpoint, "win_or_block", games=games, seed=0)
    (starters,) = openers  # one game per env: every env's first game
    checkpoint_opens = sum(s == e % 2 for e, s in enumerate(starters))  # its seat: env % 2
    assert checkpoint_opens == games // 2 and result["games"] == games


def test_play_against_checkpoint_cli(tictactoe_checkpoint: Path, tmp_path: Path) -> None:
    video = tmp_path / "game.mp4"
    proc = subprocess.run([*SELFPLAY, "play", "--checkpoint", str(tictactoe_checkpoint), "--vs",
                           str(tictactoe_checkpoint), "--games", "20", "--json", "--video",
                           str(video)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert {"wins", "losses", "draws", "games", "win_rate", "ci95"} <= set(result)
    assert "games" not in proc.stderr  # --json: no progress lines
    human = subprocess.run([*SELFPLAY, "play", "--checkpoint", str(tictactoe_checkpoint),
                            "--vs", "random", "--games", "20"], capture_output=True, text=True,
                           timeout=120)
    assert human.returncode == 0, human.stderr
    assert "1/20 games" in human.stderr and "20/20 games" in human.stderr
    assert result["games"] == 20 and video.stat().st_size > 0
    # eval of a two-player game is the checkpoint against itself, and says so
    itself = subprocess.run([*SELFPLAY, "eval", "--checkpoint", str(tictactoe_checkpoint),
                             "--episodes", "2"], capture_output=True, text=True, timeout=120)
    assert itself.returncode == 0, itself.stderr
    assert "(seat 0's, the checkpoint playing itself; `selfplay play --vs BOT` for results " \
        "against an opponent)" in itself.stdout


def test_play_errors(tictactoe_checkpoint: Path) -> None:
    with pytest.raises(GameError, match="unknown tictactoe bot 'nobody'.*known: random"):
        play(tictactoe_checkpoint, "nobody", games=2)
    proc = subprocess.run([*SELFPLAY, "play", "--checkpoint", str(tictactoe_checkpoint), "--vs",
                           "random", "--map", "basesWorkers8x8"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and "has no maps" in proc.stderr
    assert "Traceback" not in proc.stderr
    cold = subprocess.run([*SELFPLAY, "play", "--checkpoint", str(tictactoe_checkpoint), "--vs",
                           "random", "--temperature", "0"], capture_output=True, text=True,
                          timeout=60)
    assert cold.returncode == 2 and "--temperature must be > 0, got 0.0" in cold.stderr
    assert "Traceback" not in cold.stderr
    both = subprocess.run([*SELFPLAY, "play", "--checkpoint", str(tictactoe_checkpoint), "--vs",
                           "random", "--deterministic", "--temperature", "0.5"],
                          capture_output=True, text=True, timeout=60)  # it ignored the second
    assert both.returncode == 2 and "--deterministic takes the most likely action, which " \
        "--temperature does not change" in both.stderr
    with pytest.raises(ValueError, match="temperature must be > 0"):
        play(tictactoe_checkpoint, "random", games=2, temperature=-1.0)
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        play(tictactoe_checkpoint, "/nowhere/gone.pt", games=2)
    run_dir = tictactoe_checkpoint.parent.parent  # a run directory: its latest checkpoint
    assert play(tictactoe_checkpoint, str(run_dir), games=2)["opponent"] == \
        str(tictactoe_checkpoint)


@pytest.mark.slow  # ~14 s (make bench); the CLI test below plays microRTS too
def test_play_microrts_against_engine_bot(tmp_path: Path) -> None:
    """One update of microRTS on 8x8, then games against the engine's WorkerRush."""
    run_dir = tmp_path / "mrts"
    proc = subprocess.run([*SELFPLAY, "train", "--game", "microrts", "--total-steps", "256",
                           "--run-dir", str(run_dir), "--no-progress",
                           "--set", "log.tensorboard=false", "--set", "game.num_envs=2",
                           "--set", "ppo.num_steps=128", "--set", "ppo.num_minibatches=2",
                           "--set", "game.options.map=basesWorkers8x8",
                           "--set", "game.options.num_selfplay_envs=1",
                           "--set", "game.options.max_steps=300"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    checkpoint = sorted((run_dir / "checkpoints").glob("update_*.pt"))[-1]
    proc = subprocess.run([*SELFPLAY, "play", "--checkpoint", str(checkpoint), "--vs",
                           "workerrush", "--games", "2", "--json"], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["opponent"] == "WorkerRush" and result["games"] == 2


def test_play_against_itself_swaps_seats(tmp_path: Path) -> None:
    """Tic-tac-toe where seat 0 always moves first, the same deterministic policy on both
    sides: every game is the same game, so with seats swapped in odd envs the checkpoint wins
    exactly as often as it loses (without the swap it would always win, or always lose)."""
    run_dir = tmp_path / "run"
    proc = subprocess.run([*SELFPLAY, "train", "--game", "tictactoe", "--total-steps", "2048",
                           "--run-dir", str(run_dir), "--no-progress", "--set",
                           "log.tensorboard=false", "--set", "league.enabled=false", "--set",
                           "game.options.first_player=seat0"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    ckpt = sorted((run_dir / "checkpoints").glob("update_*.pt"))[-1]
    result = play(ckpt, str(ckpt), games=8, seed=0, deterministic=True)
    assert result["games"] == 8
    assert result["wins"] == result["losses"] == 4 or result["draws"] == 8, result


def test_checkpoint_seats_follow_the_games_own_sides() -> None:
    """Games without their own side convention swap seats in odd envs; microRTS, whose seat
    0 already alternates engine players, keeps seat 0."""
    from games.microrts import make as make_microrts
    from games.registry import make_game
    from selfplay.play import _checkpoint_seats

    two = [object(), object()]
    ttt = make_game("tictactoe", num_envs=4, seed=0)
    assert _checkpoint_seats(ttt, two).tolist() == [0, 1, 0, 1]  # type: ignore[arg-type]
    mrts = make_microrts("microrts", num_envs=4, seed=0, map="basesWorkers8x8",
                         num_selfplay_envs=4)
    try:
        assert _checkpoint_seats(mrts, two).tolist() == [0, 0, 0, 0]  # type: ignore[arg-type]
    finally:
        mrts.close()


def test_play_takes_run_directories(tictactoe_checkpoint: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A run directory (or its checkpoints/ folder) as the checkpoint or as ``--vs``: its newest
    checkpoint, named on stderr; a directory without checkpoints is a clear error."""
    run_dir = tictactoe_checkpoint.parent.parent
    capsys.readouterr()
    result = play(run_dir, str(run_dir / "checkpoints"), games=2)
    assert result["checkpoint"] == result["opponent"] == str(tictactoe_checkpoint)
    assert capsys.readouterr().err.count(f"using {tictactoe_checkpoint}\n") == 2
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        play(tmp_path, "random", games=2)
    with pytest.raises(CheckpointError, match="--vs: .* holds no checkpoint"):
        play(run_dir, str(tmp_path), games=2)


def test_a_folder_named_like_a_bot_does_not_hide_the_bot(
        tictactoe_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Guards: a folder ``random/`` in the working directory (no checkpoints in it) made
    ``--vs random`` an error "--vs: random holds no checkpoint"; a bare name is a run folder
    only when it holds checkpoints."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "random").mkdir()
    assert play(tictactoe_checkpoint, "random", games=2)["opponent"] == "random"
    (tmp_path / "win_or_block").write_text("notes")  # a file that is no checkpoint: the bot
    assert play(tictactoe_checkpoint, "win_or_block", games=2)["opponent"] == "win_or_block"
    (tmp_path / "emptyrun").mkdir()  # not a bot either: the folder's error, not "unknown bot"
    with pytest.raises(CheckpointError, match="--vs: .*emptyrun holds no checkpoint"):
        play(tictactoe_checkpoint, "emptyrun", games=2)
    run = tictactoe_checkpoint.parent.parent
    (tmp_path / "myrun").symlink_to(run)
    assert play(tictactoe_checkpoint, "myrun", games=2)["opponent"] == str(
        Path("myrun") / "checkpoints" / tictactoe_checkpoint.name)


# --------------------------------------------------------------------------- microRTS matches


def _untrained(game_name: str, path: Path, seed: int, *overrides: str) -> Path:
    """An untrained checkpoint of ``game_name`` (random weights from ``seed``) with the
    config ``overrides``."""
    import torch

    from games.options import to_mapping
    from games.registry import make_game
    from selfplay.checkpoint import save_checkpoint
    from selfplay.config_files import build_config
    from selfplay.networks import ActorCritic

    config = build_config(game_name, overrides=list(overrides))
    game = make_game(game_name, num_envs=1, seed=0, options=config.game.options)
    spec = game.spec
    game.close()
    torch.manual_seed(seed)
    agent = ActorCritic(spec, config.network, config.normalize)
    return save_checkpoint(path, {"config": to_mapping(config), "agent": agent.state_dict()})


def _untrained_microrts(path: Path, seed: int, *options: str) -> Path:
    """An untrained 8x8 microRTS checkpoint (random weights from ``seed``) whose games stop
    after 100 cycles; ``options`` are extra ``game.options.KEY=VALUE`` overrides."""
    import torch

    from games.options import to_mapping
    from games.registry import make_game
    from selfplay.checkpoint import save_checkpoint
    from selfplay.config_files import build_config
    from selfplay.networks import ActorCritic

    config = build_config("microrts", overrides=[
        "game.options.map=basesWorkers8x8", "game.options.max_steps=100",
        "network.channels=[8]", "network.hidden=[16]", *options])
    game = make_game("microrts", num_envs=1, seed=0,
                     options={**config.game.options, "num_selfplay_envs": 0})
    spec = game.spec
    game.close()
    torch.manual_seed(seed)
    agent = ActorCritic(spec, config.network, config.normalize)
    return save_checkpoint(path, {"config": to_mapping(config), "agent": agent.state_dict()})


@pytest.fixture(scope="module")
def microrts_checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """``plain`` and ``other`` (different weights) on basesWorkers8x8, ``flat`` with the
    size-bound critic; ``maps`` trained on a
    list of two maps without side alternation."""
    root = tmp_path_factory.mktemp("mrts")
    return {"plain": _untrained_microrts(root / "plain.pt", 0),
            "other": _untrained_microrts(root / "other.pt", 1),
            "flat": _untrained_microrts(root / "flat.pt", 3, "network.grid_critic=flatten"),
            "mixed": _untrained_microrts(
                root / "mixed.pt", 4, "game.options.maps=[basesWorkers8x8A,NoWhereToRun9x8]",
                "game.options.map_weights=[1,3]"),
            "maps": _untrained_microrts(
                root / "maps.pt", 2, "game.options.maps=[basesWorkers8x8A,basesWorkers8x8B]",
                "game.options.alternate_sides=false")}


def _sides(result: dict[str, object]) -> list[int]:
    return [side["games"] for side in result["sides"]]  # type: ignore[attr-defined]


def test_play_microrts_map_replaces_the_checkpoints_maps(
        microrts_checkpoints: dict[str, Path]) -> None:
    """A checkpoint trained on a ``maps`` list with ``alternate_sides: false``: ``--map`` is
    the map played (the list used to win over it, and the result named a map never played),
    without it the list's maps are played and reported; sides alternate either way."""
    chosen = play(microrts_checkpoints["maps"], "workerrush", games=4, map_name="basesWorkers8x8")
    assert chosen["maps"] == ["basesWorkers8x8"] and chosen["map"] == "basesWorkers8x8"
    assert _sides(chosen) == [2, 2]
    trained = play(microrts_checkpoints["maps"], "workerrush", games=4)
    assert trained["maps"] == ["basesWorkers8x8A", "basesWorkers8x8B"] and trained["map"] is None
    assert _sides(trained) == [2, 2]
    assert play(microrts_checkpoints["plain"], "workerrush", games=2)["maps"] == \
        ["basesWorkers8x8"]


def test_play_microrts_against_another_checkpoint(microrts_checkpoints: dict[str, Path]) -> None:
    other = microrts_checkpoints["other"]
    result = play(microrts_checkpoints["plain"], str(other), games=5, seed=1)
    assert result["opponent"] == str(other) and result["games"] == 5
    assert result["wins"] + result["losses"] + result["draws"] == 5
    assert _sides(result) == [3, 2]  # envs 0, 2, 4 as player 0; 1, 3 as player 1
    assert [sum(s[k] for s in result["sides"]) for k in ("wins", "losses", "draws")] == \
        [result["wins"], result["losses"], result["draws"]]


def test_play_microrts_bot_names_ignore_case(microrts_checkpoints: dict[str, Path]) -> None:
    for name in ("CoacAI", "coacai"):
        result = play(microrts_checkpoints["plain"], name, games=1)
        assert result["opponent"] == "CoacAI" and result["games"] == 1


def test_play_max_steps_cuts_every_game(microrts_checkpoints: dict[str, Path],
                                        tictactoe_checkpoint: Path) -> None:
    """``play --max-steps``: games cut after that many steps (a draw in microRTS, where no
    base falls in 5 cycles); a game without a length to set refuses it."""
    result = play(microrts_checkpoints["plain"], "workerrush", games=2, max_steps=5)
    assert result["draws"] == 2 and result["games"] == 2
    with pytest.raises(GameError, match="^tictactoe has no game length to set"):
        play(tictactoe_checkpoint, "random", games=2, max_steps=5)


def test_play_microrts_cli_json_human_and_video(microrts_checkpoints: dict[str, Path],
                                                tmp_path: Path) -> None:
    ckpt = str(microrts_checkpoints["plain"])
    video = tmp_path / "game.mp4"
    proc = subprocess.run([*SELFPLAY, "play", "--checkpoint", ckpt, "--vs", "CoacAI", "--games",
                           "4", "--map", "basesWorkers8x8", "--json", "--video", str(video)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # one JSON object, nothing else on stdout
    assert {"wins", "losses", "draws", "games", "win_rate", "ci95", "sides", "maps"} <= \
        set(result)
    assert result["games"] == 4 and result["wins"] + result["losses"] + result["draws"] == 4
    low, high = result["ci95"]
    assert 0 <= low <= result["win_rate"] <= high <= 1
    assert result["win_rate"] == result["wins"] / 4 and _sides(result) == [2, 2]
    assert result["opponent"] == "CoacAI" and result["maps"] == ["basesWorkers8x8"]
    assert video.stat().st_size > 0
    import imageio.v2 as imageio

    frames = imageio.mimread(str(video), memtest=False)
    assert frames[0].shape == (8 * 24, 8 * 24, 3)
    human = subprocess.run([*SELFPLAY, "play", "--checkpoint", ckpt, "--vs", "coacai",
                            "--games", "2"], capture_output=True, text=True, timeout=300)
    assert human.returncode == 0, human.stderr
    line = human.stdout.strip()
    assert re.search(r"microrts vs CoacAI on basesWorkers8x8: \d+ wins, \d+ losses, \d+ draws "
                     r"in 2 games; win rate [\d.]+% \(95% CI [\d.]+%-[\d.]+%\); by side "
                     r"\(W/L/D\) 0: \d+/\d+/\d+, 1: \d+/\d+/\d+; mean return -?[\d.e+-]+$",
                     line), line


def test_one_checkpoint_plays_every_map_size(microrts_checkpoints: dict[str, Path]) -> None:
    """An 8x8 checkpoint (pooled critic) plays an 8x8, a 9x8 and a 16x16 map in one process;
    a flatten-critic checkpoint on another size is one line naming both board sizes, not
    PyTorch's state-dict dump."""
    plain = microrts_checkpoints["plain"]
    for name in ("basesWorkers8x8", "NoWhereToRun9x8", "basesWorkers16x16"):
        result = play(plain, "workerrush", games=2, map_name=name)
        assert result["maps"] == [name]
        assert result["wins"] + result["losses"] + result["draws"] == 2
    flat = microrts_checkpoints["flat"]
    assert play(flat, "workerrush", games=2)["games"] == 2  # its own size
    with pytest.raises(CheckpointError) as error:
        play(flat, "workerrush", games=1, map_name="basesWorkers10x10")
    assert re.fullmatch(rf"{re.escape(str(flat))} was trained on observations of shape "
                        r"\((\d+), 8, 8\) \(8x8 board\); this game gives \(\1, 10, 10\) "
                        r"\(10x10 board\): its network is tied to the board size it was "
                        r"trained on \(network.grid_critic: flatten; train with pool for a "
                        r"network that plays every size\)", str(error.value)), str(error.value)
    # a 6x6 board: the encoder's feature map has the 8x8 board's size, so every weight fits;
    # it played (and trained on with --init-from) behind a critic tied to 8x8
    deeper = _untrained_microrts(flat.parent / "flat2.pt", 5, "network.grid_critic=flatten",
                                 "network.channels=[8,8]")
    with pytest.raises(CheckpointError, match=r"\(6x6 board\): its network is tied"):
        play(deeper, "workerrush", games=1, map_name="baseTwoWorkersMaxResources6x6")


def test_a_network_tied_to_one_board_size_is_refused_a_run_of_several(tmp_path: Path) -> None:
    """Guards (review): a flatten-critic network trained on 8x8 and 9x8 maps together (the mix
    padded to 9x8) then played neither map alone, though its checkpoint listed both."""
    from selfplay.config import ConfigError
    from selfplay.config_files import build_config
    from selfplay.train import run_training

    config = build_config("microrts", overrides=[
        "game.options.maps=[basesWorkers8x8A,NoWhereToRun9x8]", "game.num_envs=6",
        "game.options.num_selfplay_envs=2", "network.grid_critic=flatten",
        "network.channels=[8]", "network.hidden=[16]", "log.progress=false",
        "log.tensorboard=false"], total_steps=64)
    with pytest.raises(ConfigError, match=re.escape(
            "the maps of this run have 2 board sizes (8x8, 8x9, height x width); "
            "network.grid_critic: flatten ties the network to one: start the run with the "
            "gridnet and grid_critic: pool, which plays every size")):
        run_training(config, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_mixed_size_checkpoint_plays_its_maps_and_any_map(
        microrts_checkpoints: dict[str, Path]) -> None:
    """A checkpoint trained on weighted maps of two sizes plays its own list (padded to 8x9)
    and, with --map, one map of a third size (its weights dropped with its list); eval takes
    --map too."""
    from selfplay.evaluate import evaluate

    mixed = microrts_checkpoints["mixed"]
    own = play(mixed, "workerrush", games=4)
    assert sorted(own["maps"]) == ["NoWhereToRun9x8", "basesWorkers8x8A"]
    assert own["wins"] + own["losses"] + own["draws"] == 4
    other = play(mixed, "workerrush", games=2, map_name="basesWorkers10x10")
    assert other["maps"] == ["basesWorkers10x10"]
    assert other["trained_on"] is None  # saved without a run: no boards recorded
    result = evaluate(mixed, episodes=2, map_name="NoWhereToRun9x8")
    assert result["episodes"] == 2


def test_checkpoint_from_before_the_off_map_plane_plays_its_own_size(tmp_path: Path) -> None:
    """A network saved before size-agnostic networks (29 observation planes, flatten critic,
    no grid_critic key in its config) loads with a zero weight for the off_map plane: it plays
    its board exactly as it did, and plays games."""
    from dataclasses import replace

    import torch

    from games.options import to_mapping
    from games.registry import make_game
    from selfplay.checkpoint import save_checkpoint
    from selfplay.config_files import build_config
    from selfplay.evaluate import load_agent
    from selfplay.networks import ActorCritic

    config = build_config("microrts", overrides=[
        "game.options.map=basesWorkers8x8", "game.options.max_steps=100",
        "network.channels=[8,16]", "network.hidden=[16]", "network.grid_critic=flatten"])
    game = make_game("microrts", num_envs=1, seed=0,
                     options={**config.game.options, "num_selfplay_envs": 0})
    spec = game.spec
    game.close()
    old_spec = replace(spec, obs_shape=(29, 8, 8), state_shape=(29, 8, 8), pad_plane=None)
    torch.manual_seed(5)
    old = ActorCritic(old_spec, config.network, config.normalize)
    mapping = to_mapping(config)
    del mapping["network"]["grid_critic"]  # as saved then
    path = save_checkpoint(tmp_path / "old.pt", {"config": mapping, "agent": old.state_dict()})

    _, agent, _ = load_agent(path, spec)
    obs = (torch.rand(4, 30, 8, 8) < 0.2).float()
    obs[:, 29] = 0  # no padding on its own board
    with torch.no_grad():
        assert torch.equal(agent.dist_params(obs), old.dist_params(obs[:, :29]))
        assert torch.equal(agent.value(obs), old.value(obs[:, :29]))
    result = play(path, "workerrush", games=2)
    assert result["wins"] + result["losses"] + result["draws"] == 2


def test_tournament_of_8x8_checkpoints_on_a_9x8_map(microrts_checkpoints: dict[str, Path],
                                                   tmp_path: Path) -> None:
    """League tournaments take --map of any size: two 8x8 checkpoints and a bot on
    NoWhereToRun9x8 (checkpoint against checkpoint, and against the engine bot)."""
    from selfplay.league_commands import tournament

    result = tournament("microrts", [str(microrts_checkpoints["plain"]),
                                     str(microrts_checkpoints["other"]), "workerrush"],
                        str(tmp_path / "league.db"), games_per_pair=2, until_sigma=None,
                        map_name="NoWhereToRun9x8", num_envs=2, seed=1, quiet=True,
                        max_steps=100)
    assert result["played"] == 6


def test_checkpoints_that_observe_differently_cannot_share_a_game(
        microrts_checkpoints: dict[str, Path]) -> None:
    """Guards: ``--vs`` a checkpoint trained with rotate_player1 played it unrotated (its
    actions read in the wrong frame), and reported results."""
    plain = microrts_checkpoints["plain"]
    rotated = _untrained_microrts(plain.parent / "rotated.pt", 6,
                                  "game.options.rotate_player1=true")
    with pytest.raises(CheckpointError, match="rotate_player1=False and --vs .*rotated.pt with "
                                              "True: one game cannot show both"):
        play(plain, str(rotated), games=2)


def test_a_tournament_plays_checkpoints_with_their_observation_settings(
        microrts_checkpoints: dict[str, Path], tmp_path: Path, capsys) -> None:
    """Guards: tournaments played every checkpoint with the family's default settings (a
    rotate_player1 checkpoint unrotated; a PettingZoo one of another screen size was
    skipped though play and eval took it); one trained otherwise than the first is skipped,
    naming the setting."""
    from selfplay.league_commands import tournament

    rotated = [_untrained_microrts(tmp_path / f"rotated{i}.pt", 6 + i,
                                   "game.options.rotate_player1=true") for i in range(2)]
    result = tournament("microrts", [*map(str, rotated), str(microrts_checkpoints["plain"])],
                        str(tmp_path / "league.db"), games_per_pair=1, until_sigma=None,
                        map_name=None, num_envs=2, seed=1, quiet=True, max_steps=60)
    assert result["played"] == 1 and len(result["skipped_players"]) == 1
    assert ("plain.pt was trained with game.options.rotate_player1=False, the tournament's "
            "first checkpoint with True: one game cannot show both") in capsys.readouterr().err


def test_pettingzoo_checkpoints_that_observe_differently_cannot_share_a_game(
        tmp_path: Path) -> None:
    """Guards: ``--vs`` a checkpoint trained with another frame skip (or mirrored seat) played
    it with the first checkpoint's preprocessing, silently."""
    pong = "pettingzoo/pong_v3"
    plain = _untrained(pong, tmp_path / "plain.pt", 0, "game.num_envs=1")
    skipping = _untrained(pong, tmp_path / "skip2.pt", 1, "game.num_envs=1",
                          "game.options.frame_skip=2")
    with pytest.raises(CheckpointError, match=r"plain.pt was trained with "
                                              r"game.options.frame_skip=4 and --vs .*skip2.pt "
                                              r"with 2: one game cannot show both"):
        play(plain, str(skipping), games=1)


def test_games_without_a_winner_are_neither_counted_nor_rated(tmp_path: Path) -> None:
    """Guards: a cooperative PettingZoo game reported every game as a draw (win rate 0 with an
    interval), in play, tournaments and a training league."""
    from games.registry import make_game
    from league.db import LeagueError
    from selfplay.config import ConfigError
    from selfplay.config_files import build_config
    from selfplay.league_commands import tournament
    from selfplay.league_training import attach
    from selfplay.ppo import Trainer

    coop = "pettingzoo/entombed_cooperative_v3"
    a = _untrained(coop, tmp_path / "a.pt", 0, "game.num_envs=1", "league.enabled=false")
    b = _untrained(coop, tmp_path / "b.pt", 1, "game.num_envs=1", "league.enabled=false")
    with pytest.raises(GameError, match="games have no winner .*no wins and losses to count"):
        play(a, str(b), games=1)
    with pytest.raises(LeagueError, match="games have no winner .*nothing to rate"):
        tournament(coop, [str(a), str(b)], str(tmp_path / "l.db"), games_per_pair=1,
                   until_sigma=None, map_name=None, num_envs=1, seed=0, quiet=True)
    assert not (tmp_path / "l.db").exists()  # refused before its database was made
    config = build_config(coop, overrides=["game.num_envs=1", "log.progress=false"])
    trainer = Trainer(config, make_game(coop, 1, 0))
    try:
        with pytest.raises(ConfigError, match="league.enabled needs games with a winner"):
            attach(trainer, tmp_path / "run")
    finally:
        trainer.game.close()


def test_pettingzoo_tournaments_take_a_game_length_in_steps(tmp_path: Path) -> None:
    """Guards: ``--max-steps`` was refused for PettingZoo ("no game length to set"), whose
    ``max_cycles`` counts emulator frames (frame_skip per step)."""
    from games.registry import family_of
    from selfplay.league_commands import tournament

    pong = "pettingzoo/pong_v3"
    family = family_of(pong)
    assert family.with_game_length(pong, {"frame_skip": 2}, 100)["max_cycles"] == 200
    assert family.match_defaults({}, False).max_steps == 100_000 // 4
    a = _untrained(pong, tmp_path / "a.pt", 0, "game.num_envs=1")
    b = _untrained(pong, tmp_path / "b.pt", 1, "game.num_envs=1")
    result = tournament(pong, [str(a), str(b)], str(tmp_path / "l.db"), games_per_pair=2,
                        until_sigma=None, map_name=None, num_envs=2, seed=0, quiet=True,
                        max_steps=30)
    assert result["played"] == 2


def test_eval_plays_every_map_a_checkpoint_trained_on(tmp_path: Path) -> None:
    """Guards: eval played at most 8 envs, so 4 of a 5-map checkpoint's maps, and said not
    which."""
    from selfplay.evaluate import evaluate

    five = [f"basesWorkers8x8{x}" for x in "ABCDE"]
    path = _untrained_microrts(tmp_path / "five.pt", 5, f"game.options.maps=[{','.join(five)}]")
    result = evaluate(path, episodes=10)
    assert result["episodes"] == 10 and sorted(result["maps"]) == five


def test_a_checkpoint_with_nan_weights_is_refused(tictactoe_checkpoint: Path,
                                                  tmp_path: Path) -> None:
    """Training never saves non-finite weights; a file holding them played (always the first
    legal cell) and won."""
    import torch

    from games.files import save_checkpoint
    from selfplay.checkpoint import load_checkpoint

    state = load_checkpoint(tictactoe_checkpoint)
    name = next(k for k, v in state["agent"].items() if k.endswith("weight"))
    state["agent"][name] = torch.full_like(state["agent"][name], float("nan"))
    bad = save_checkpoint(tmp_path / "nan.pt", state)
    for player, opponent in ((bad, "random"), (tictactoe_checkpoint, str(bad))):
        with pytest.raises(CheckpointError, match=f"{bad} holds weights that are not numbers "
                                                  f"\\({name} has NaN"):
            play(player, opponent, games=2)
