"""The run's device: checked settings, and training on a CUDA GPU where one is present."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from games.registry import make_game
from selfplay.checkpoint import load_checkpoint
from selfplay.config import ConfigError, build_config
from selfplay.device import resolve_device
from selfplay.ppo import Trainer
from selfplay.tracking import RunDir

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_cpu_and_auto_resolve() -> None:
    assert resolve_device("cpu") == torch.device("cpu")
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == want


@pytest.mark.parametrize("name,fragment", [
    ("gpu", "not a torch device"),
    ("cuda:99", "CUDA"),
    ("meta", "not supported"),
])
def test_bad_device_names_the_setting(name: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment) as info:
        build_config("CartPole-v1", overrides=[f"device={name}"])
    assert str(info.value).startswith("device:")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_gpu_is_a_clear_config_error() -> None:
    with pytest.raises(ConfigError, match="sees no CUDA GPU"):
        build_config("CartPole-v1", overrides=["device=cuda"])


def _trainer(game: str, device: str, run: RunDir | None, seed: int = 1) -> Trainer:
    config = build_config(game, overrides=["log.progress=false", "log.tensorboard=false",
                                           f"device={device}", "ppo.num_steps=32"], seed=seed,
                          total_steps=10_000)
    return Trainer(config, make_game(game, config.game.num_envs, config.seed,
                                     config.game.options), run)


@needs_cuda
@pytest.mark.parametrize("game", ["CartPole-v1", "tictactoe"])
def test_cuda_training_and_exact_resume(tmp_path: Path, game: str) -> None:
    """Two updates on the GPU, save, resume in a fresh trainer: the third update matches."""
    def run(trainer: Trainer, updates: int) -> None:
        while trainer.update < updates:
            trainer.collect()
            trainer.learn()
            trainer.update += 1

    base = _trainer(game, "cuda", RunDir(tmp_path / "a"))
    assert next(base.agent.parameters()).is_cuda
    run(base, 3)
    reference = [p.detach().cpu() for p in base.agent.parameters()]

    first = _trainer(game, "cuda", RunDir(tmp_path / "b"))
    run(first, 2)
    path = first.save()
    resumed = _trainer(game, "cuda", RunDir(tmp_path / "b"), seed=999)
    assert resumed.load_state_dict(load_checkpoint(path)) is True
    run(resumed, 3)
    for got, want in zip(resumed.agent.parameters(), reference, strict=True):
        torch.testing.assert_close(got.detach().cpu(), want, rtol=1e-5, atol=1e-6)

    on_cpu = _trainer(game, "cpu", None)  # a GPU checkpoint loads on the CPU
    on_cpu.load_state_dict(load_checkpoint(path))
    assert not next(on_cpu.agent.parameters()).is_cuda
