"""The run's device: checked settings, and training on a CUDA GPU where one is present."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from games.registry import make_game
from selfplay.checkpoint import load_checkpoint
from selfplay.config import ConfigError
from selfplay.config_files import build_config
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


def _moved_to_a_missing_gpu(tmp_path: Path) -> Path:
    """A tictactoe run trained here whose saved config (config.yaml and checkpoint) says it
    ran on ``cuda:99``, a device no machine here has: a GPU run brought to this machine."""
    import yaml

    from selfplay.cli import main

    run = tmp_path / "gpu-run"
    assert main(["train", "--game", "tictactoe", "--total-steps", "256", "--set",
                 "ppo.num_steps=32", "--run-dir", str(run), "--no-progress", "--set",
                 "log.tensorboard=false"]) == 0
    config = yaml.safe_load((run / "config.yaml").read_text())
    (run / "config.yaml").write_text(yaml.safe_dump({**config, "device": "cuda:99"}))
    for path in (run / "checkpoints").glob("*.pt"):
        state = torch.load(path, weights_only=True)
        state["config"] = {**state["config"], "device": "cuda:99"}
        torch.save(state, path)
    return run


def test_a_gpu_runs_weights_play_and_start_runs_here_and_resuming_says_how(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from selfplay.cli import main
    from selfplay.evaluate import load_agent

    run = _moved_to_a_missing_gpu(tmp_path)
    checkpoint = sorted((run / "checkpoints").glob("*.pt"))[-1]
    config, agent, _ = load_agent(checkpoint)
    assert config.device == "cuda:99"  # read as saved, not changed
    assert next(agent.parameters()).device.type == "cpu"
    assert main(["play", "--checkpoint", str(checkpoint), "--vs", "random", "--games", "4",
                 "--json"]) == 0
    assert main(["train", "--game", "tictactoe", "--init-from", str(run), "--total-steps",
                 "64", "--set", "ppo.num_steps=32", "--run-dir", str(tmp_path / "here"),
                 "--no-progress", "--set", "log.tensorboard=false"]) == 0
    capsys.readouterr()
    assert main(["train", "--resume", str(run), "--no-progress"]) != 0
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "'cuda:99'" in lines[0] and "--init-from" in lines[0], lines


def test_bfloat16_learner_runs_its_products_in_bfloat16(tmp_path: Path) -> None:
    """``precision=bfloat16``: the update's matrix products run in bfloat16 (acting stays in
    float32, so both runs collect the same rollout), and its losses stay those of float32 to
    bfloat16's precision."""
    def one_update(precision: str) -> tuple[dict[str, float], set[torch.dtype]]:
        config = build_config("tictactoe", overrides=[
            "log.progress=false", "log.tensorboard=false", "ppo.num_steps=32",
            f"precision={precision}"], seed=3, total_steps=10_000)
        trainer = Trainer(config, make_game("tictactoe", config.game.num_envs, config.seed,
                                            config.game.options), None)
        seen: set[torch.dtype] = set()
        linears = [m for m in trainer.agent.modules() if isinstance(m, torch.nn.Linear)]
        trainer.collect()
        def note(_module: torch.nn.Module, _in: object, out: torch.Tensor) -> None:
            if torch.is_grad_enabled():  # the update's passes, not the bootstrap values'
                seen.add(out.dtype)

        hooks = [m.register_forward_hook(note) for m in linears]
        metrics = trainer.learn()
        for hook in hooks:
            hook.remove()
        trainer.game.close()
        return metrics, seen

    full, full_types = one_update("float32")
    half, half_types = one_update("bfloat16")
    assert full_types == {torch.float32} and half_types == {torch.bfloat16}
    for key in ("loss/value_loss", "loss/policy_loss", "loss/entropy"):
        assert np.isfinite(half[key])
        assert half[key] == pytest.approx(full[key], rel=0.05, abs=2e-3), key


def test_unknown_precision_names_the_setting() -> None:
    with pytest.raises(ConfigError, match=r"^precision"):
        build_config("tictactoe", overrides=["precision=float16"])
