"""Lux's arrays handed to torch by DLPack (``array_handover``): the same games, rollouts and
updates as through the host, without copying the observations and masks.

On this machine JAX and torch share the CPU, so the hand-over is zero-copy here too: a torch
tensor made from the game's observations points at the JAX array's own buffer.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
import torch

from games.core import ScriptedPolicy, SupportsDeviceArrays
from games.lux.adapter import LuxOptions, LuxVecGame
from games.lux.bots import heuristic, random_legal
from games.registry import make_game
from selfplay.config import ConfigError
from selfplay.config_files import build_config
from selfplay.policy import FrozenPolicy
from selfplay.ppo import Trainer

SHORT = LuxOptions(max_steps=6)  # games end inside a rollout: finished games are replaced


def test_device_arrays_are_the_games_own_buffers_and_equal_the_host_copies() -> None:
    """... and both kinds of game, the first step and the later ones, the replaced games, run
    one compilation of the step: each is 8-40 s on a CPU (before session 47 the first step's
    int8 rubble and the host's uncommitted arrays made up to four)."""
    host, device = LuxVecGame(SHORT, 2, seed=4), LuxVecGame(SHORT, 2, seed=4)
    assert isinstance(device, SupportsDeviceArrays)
    kernels = host._k
    compiled = {name: getattr(kernels, name)._cache_size() for name in ("step", "view")}
    device.device_arrays = True
    a, b = host.reset(), device.reset()
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(9):
        assert not isinstance(b.obs, np.ndarray)  # a JAX array, on JAX's device
        obs = torch.from_dlpack(b.obs)
        assert obs.data_ptr() == b.obs.unsafe_buffer_pointer()  # no copy
        np.testing.assert_array_equal(obs.numpy(), a.obs)
        np.testing.assert_array_equal(torch.from_dlpack(b.action_mask).numpy(), a.action_mask)
        mask = a.action_mask.reshape(4, *a.action_mask.shape[2:])
        actions = random_legal(a.obs.reshape(4, *a.obs.shape[2:]), mask, rng)
        actions = actions.reshape(2, 2, *actions.shape[1:])
        a = host.step(actions)
        b = device.step(torch.from_numpy(actions).to(torch.int32))  # actions by DLPack too
        np.testing.assert_array_equal(a.reward, b.reward)
        np.testing.assert_array_equal(a.terminated, b.terminated)
        if a.final_obs is not None:
            ended += 1
            np.testing.assert_array_equal(torch.from_dlpack(b.final_obs).numpy(), a.final_obs)
    assert ended >= 1
    for name, before in compiled.items():  # none, when this process compiled them already
        assert getattr(kernels, name)._cache_size() - before <= 1, name


def lux_trainer(handover: str, seed: int = 3) -> Trainer:
    config = build_config("lux", seed=seed, overrides=[
        "game.num_envs=2", "ppo.num_steps=4", "ppo.num_minibatches=1", "ppo.update_epochs=1",
        "game.options.max_steps=6", "network.channels=[8,8]", "network.hidden=[16]",
        "league.enabled=false", "log.progress=false", "log.tensorboard=false",
        f"array_handover={handover}"])
    game = make_game("lux", num_envs=2, seed=seed, options=config.game.options)
    trainer = Trainer(config, game, None)
    # env 0's seat 1: a frozen copy of the network; env 1's: the rule-based bot
    frozen = copy.deepcopy(trainer.agent).requires_grad_(False)
    trainer.seats.set_policy(1, FrozenPolicy(frozen, generator=trainer.act_gen))
    trainer.seats.set_policy(2, ScriptedPolicy("heuristic", heuristic, seed))
    trainer.seats.assign(0, 1, 1)
    trainer.seats.assign(1, 1, 2)
    return trainer


def rollout(trainer: Trainer) -> dict[str, np.ndarray]:
    buf = trainer.buffer
    return {name: getattr(buf, name).cpu().numpy().copy()
            for name in ("obs", "mask", "actions", "logprobs", "values", "rewards", "dones",
                         "trained")}


@pytest.fixture(scope="module")
def trained() -> Any:
    """Two updates through the host and by DLPack, from the same seed (and the DLPack run's
    state after the first)."""
    out: dict[str, Any] = {}
    for handover in ("host", "auto"):
        trainer = lux_trainer(handover)
        rollouts = []
        for _ in range(2):
            trainer.run_update()
            rollouts.append(rollout(trainer))
            if handover == "auto" and trainer.update == 1:
                out["saved"] = copy.deepcopy(trainer.state_dict())  # as written to disk
        out[handover] = (trainer, rollouts)
    yield out
    for handover in ("host", "auto"):
        out[handover][0].game.close()


def test_training_by_dlpack_learns_what_training_through_the_host_learns(
        trained: Any) -> None:
    host, host_rollouts = trained["host"]
    device, device_rollouts = trained["auto"]
    assert device.device_arrays and not host.device_arrays
    assert device.game.device_arrays  # auto turned the game's device arrays on
    for r, (a, b) in enumerate(zip(host_rollouts, device_rollouts, strict=True)):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], f"update {r + 1}: {name}")
    assert host_rollouts[-1]["dones"].any()  # games ended and were replaced
    assert not host_rollouts[-1]["trained"][:, :, 1].any()  # seat 1: the opponents'
    for name, value in host.agent.state_dict().items():
        assert torch.equal(device.agent.state_dict()[name], value), name
    assert device.global_step == host.global_step == 2 * 4 * 2


def test_a_dlpack_run_saves_host_arrays_and_resumes_exactly(trained: Any) -> None:
    device, _ = trained["auto"]
    state = trained["saved"]  # after its first update
    assert isinstance(state["batch"]["obs"], np.ndarray)  # checkpoints hold host arrays
    resumed = lux_trainer("auto")
    assert resumed.load_state_dict(state)  # the games themselves are restored
    resumed.run_update()
    for name, value in device.agent.state_dict().items():
        assert torch.equal(resumed.agent.state_dict()[name], value), name
    resumed.game.close()


def test_dlpack_asked_of_a_game_without_device_arrays_is_one_line() -> None:
    config = build_config("tictactoe", overrides=["array_handover=dlpack"])
    game = make_game("tictactoe", num_envs=2, seed=0)
    with pytest.raises(ConfigError, match=r"^array_handover=dlpack: tictactoe has no device "
                                          r"arrays[^\n]*$"):
        Trainer(config, game, None)
    game.close()
