"""Training on microRTS maps of several sizes at once: padding cells never reach the losses."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from games.microrts.options import PAD_PLANE
from selfplay.config_files import build_config
from selfplay.grid_networks import BoardPool
from selfplay.train import build_trainer

MAPS = "[basesWorkers8x8A,NoWhereToRun9x8,basesWorkers10x10]"


def test_padded_cells_get_no_gradient_and_no_log_prob() -> None:
    """Two PPO updates on a batch of 8x8, 9x8 and 10x10 maps padded to 10x10: the gradient of
    the loss reaches the per-cell logits of board cells (units acting) and never those of
    padding cells, so no padding cell has a log-prob, an entropy or a value share."""
    config = build_config("microrts", overrides=[
        "game.num_envs=8", f"game.options.maps={MAPS}", "game.options.bots=[WorkerRush]",
        "game.options.num_selfplay_envs=2", "game.options.max_steps=60", "ppo.num_steps=32",
        "ppo.num_minibatches=2", "ppo.update_epochs=1", "league.enabled=false",
        "log.progress=false", "log.tensorboard=false", "network.channels=[8,16]",
        "network.hidden=[16]"], total_steps=8 * 32 * 2)
    trainer = build_trainer(config, None)
    agent = trainer.agent
    seen: dict[str, Any] = {"obs": None, "pad": 0.0, "board": 0.0, "checked": 0}

    def keep_obs(_: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
        seen["obs"] = inputs[0]

    def watch_logits(_: torch.nn.Module, __: Any, logits: torch.Tensor) -> None:
        if not logits.requires_grad:
            return  # acting: no gradient
        padding = seen["obs"][:, PAD_PLANE].flatten(1).bool()  # [B, H*W]
        assert padding.any(), "no padded row in the minibatch"

        def check(grad: torch.Tensor) -> None:
            per_cell = grad.abs().sum(-1)  # [B, H*W]
            seen["pad"] += float(per_cell[padding].sum())
            seen["board"] += float(per_cell[~padding].sum())
            seen["checked"] += 1

        logits.register_hook(check)

    agent.actor_torso.register_forward_pre_hook(keep_obs)
    agent.actor_head.register_forward_hook(watch_logits)
    try:
        assert trainer.spec.obs_shape[1:] == (10, 10)
        for _ in range(2):
            trainer.run_update()
    finally:
        trainer.game.close()
    assert seen["checked"] >= 4  # 2 updates x 2 minibatches
    assert seen["board"] > 0, "the loss never reached a board cell: the check cannot fail"
    assert seen["pad"] == 0.0


def test_board_pool_ignores_padding_features() -> None:
    """The pooled critic's value does not move when features outside the board change, and
    their gradient is exactly zero; features on the board do move it."""
    torch.manual_seed(0)
    pool = BoardPool(channels=4, hidden=8, stages=2, pad_plane=0)
    board = torch.zeros(2, 3, 16, 16)
    board[0, 0, :, 9:] = 1  # row 0: a 16x9 board padded to 16x16
    board[0, 0, 9:, :] = 1  # ... and to 9 rows: a 9x9 board
    features = torch.randn(2, 4, 4, 4, requires_grad=True)
    value = pool(features, board)
    value.sum().backward()
    on = pool.on_board(board)
    assert on is not None and on[1].all() and not on[0].all()
    off = ~on.bool().expand_as(features)
    assert features.grad is not None
    assert (features.grad[off] == 0).all() and features.grad[~off].abs().sum() > 0
    changed = features.detach().clone()
    changed[off] += 5.0
    assert torch.equal(pool(changed, board), value.detach())


def test_checkpoint_records_its_boards(tmp_path) -> None:
    """A run on three map sizes saves them with its checkpoints: {map: [height, width]}."""
    from games.files import load_checkpoint
    from selfplay.checkpoint import resolve_checkpoint
    from selfplay.train import run_training

    config = build_config("microrts", overrides=[
        "game.num_envs=6", f"game.options.maps={MAPS}", "game.options.num_selfplay_envs=6",
        "game.options.max_steps=60", "ppo.num_steps=16", "ppo.num_minibatches=1",
        "ppo.update_epochs=1", "league.enabled=false", "log.progress=false",
        "log.tensorboard=false", "network.channels=[8]", "network.hidden=[8]"],
        total_steps=6 * 16)
    run_training(config, run_dir=tmp_path / "run")
    state = load_checkpoint(resolve_checkpoint(tmp_path / "run"))
    assert state["boards"] == {"basesWorkers8x8A": [8, 8], "NoWhereToRun9x8": [8, 9],
                               "basesWorkers10x10": [10, 10]}


def test_maps_no_env_would_play_are_refused_before_the_run_starts(tmp_path) -> None:
    """Guards: three maps on two bot envs (one side-alternating pair) trained on the first
    map only, silently, while the other two still sized the padded batch."""
    from games.core import GameError
    from selfplay.train import run_training

    config = build_config("microrts", overrides=[
        "game.num_envs=2", f"game.options.maps={MAPS}", "game.options.num_selfplay_envs=0",
        "league.enabled=false", "log.progress=false", "log.tensorboard=false"],
        total_steps=64)
    with pytest.raises(GameError, match="NoWhereToRun9x8, basesWorkers10x10 would not be "
                                        "played .* by the 2 envs .*raise game.num_envs to 6"):
        run_training(config, run_dir=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_a_map_named_twice_is_refused() -> None:
    """Guards (review): ``maps=[basesWorkers8x8A, basesworkers8x8a]`` trained, silently giving
    that map a double share of the envs (map_weights sets shares)."""
    from games.core import GameError
    from games.registry import family_of

    family = family_of("microrts")
    for twice in (["basesWorkers8x8A", "NoWhereToRun9x8", "basesworkers8x8a"],
                  ["NoWhereToRun9x8", "NoWhereToRun9x8"]):
        with pytest.raises(GameError, match=r"game.options.maps names the map \w+ twice "
                                            r"\('\w+' and '\w+'\): name each map once"):
            family.check_run("microrts", {"maps": twice, "num_selfplay_envs": 0}, 12)
    family.check_run("microrts", {"maps": ["basesWorkers8x8A", "NoWhereToRun9x8"],
                                  "num_selfplay_envs": 0}, 12)


def test_a_run_refused_at_its_start_leaves_no_folder_behind(tmp_path) -> None:
    """Guards: a league the game refuses (no self-play envs) failed after config.yaml and
    league.db were written, leaving the run folder; an option refused by the game left the
    parent folders ``--run-dir a/b/c`` made; more workers than envs ran fewer, silently."""
    from games.core import GameError
    from selfplay.config import ConfigError
    from selfplay.train import run_training

    common = ["game.num_envs=2", "game.options.map=basesWorkers8x8",
              "game.options.num_selfplay_envs=0", "log.progress=false",
              "log.tensorboard=false"]
    with pytest.raises(ConfigError, match="league.enabled needs a two-seat game"):
        run_training(build_config("microrts", overrides=common, total_steps=16),
                     run_dir=tmp_path / "a" / "b")
    with pytest.raises(GameError, match=r"game.options.workers \(3\) exceeds the 2 envs"):
        run_training(build_config("microrts", overrides=[
            *common, "league.enabled=false", "game.options.workers=3"], total_steps=16),
            run_dir=tmp_path / "a" / "b")
    assert list(tmp_path.iterdir()) == []


def test_bots_no_env_starts_with_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    """Guards: ``bots=[WorkerRush,LightRush]`` on one pair of bot envs never played LightRush,
    silently (a league with bot_env_pfsp draws every game's bot: a warning, not an error)."""
    from games.registry import family_of

    family = family_of("microrts")
    options = {"map": "basesWorkers8x8", "num_selfplay_envs": 0,
               "bots": ["WorkerRush", "LightRush"]}
    (warning,) = family.check_run("microrts", options, 2)
    assert warning.startswith("game.options.bots: LightRush start in none of the 2 bot envs")
    assert family.check_run("microrts", options, 4) == []
    assert family.check_run("microrts", options, 2, draws_bots=True) == []  # the league draws
    assert capsys.readouterr().err == ""  # printed by the run, once it starts


def test_a_run_started_from_another_keeps_the_boards_it_learned_on(tmp_path) -> None:
    """Guards: ``train --init-from`` a network trained on 8x8, on 10x10: its checkpoints said
    trained_on 10x10 only (``play`` reports them); the started-from boards stay, through a
    resume too."""
    from games.files import load_checkpoint
    from selfplay.checkpoint import resolve_checkpoint
    from selfplay.train import run_training

    def config(map_name: str, init_from: str | None = None) -> Any:
        return build_config("microrts", overrides=[
            "game.num_envs=2", f"game.options.map={map_name}", "game.options.num_selfplay_envs=2",
            "game.options.max_steps=60", "ppo.num_steps=16", "ppo.num_minibatches=1",
            "ppo.update_epochs=1", "league.enabled=false", "log.progress=false",
            "log.tensorboard=false", "network.channels=[8]", "network.hidden=[8]",
            *([f"init_from={init_from}"] if init_from else [])], total_steps=2 * 16)

    run_training(config("basesWorkers8x8A"), run_dir=tmp_path / "small")
    run_training(config("basesWorkers10x10", str(tmp_path / "small")), run_dir=tmp_path / "big")
    want = {"basesWorkers8x8A": [8, 8], "basesWorkers10x10": [10, 10]}
    assert load_checkpoint(resolve_checkpoint(tmp_path / "big"))["boards"] == want
    run_training(None, resume=tmp_path / "big", total_steps=2 * 2 * 16)
    assert load_checkpoint(resolve_checkpoint(tmp_path / "big"))["boards"] == want
