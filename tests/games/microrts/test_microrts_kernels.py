"""The compiled per-step conversions (numba) give exactly what the numpy ones give, on the real
engine: two games with the same layout and seed play the same actions, one converting with
each, and every array of every batch must be equal."""

from __future__ import annotations

import numpy as np
import pytest

from games.core import GameError
from games.microrts import kernels
from games.microrts.adapter import MicroRTSOptions, MicroRTSVecGame, random_legal_actions

pytestmark = pytest.mark.skipif(not kernels.AVAILABLE, reason="numba is not installed")


def _assert_same_batch(ours, ref, step: int) -> None:
    for name in ("obs", "action_mask", "state", "reward", "terminated", "truncated", "alive",
                 "final_obs", "final_state"):
        a, b = getattr(ours, name), getattr(ref, name)
        if b is None:
            assert a is None, (name, step)
            continue
        np.testing.assert_array_equal(a, b, err_msg=f"{name} at step {step}")
    for name in ("env", "seat", "ret", "length", "outcome"):
        np.testing.assert_array_equal(getattr(ours.episodes, name), getattr(ref.episodes, name),
                                      err_msg=f"episodes.{name} at step {step}")


@pytest.mark.parametrize("options", [
    dict(num_selfplay_envs=3),
    dict(num_selfplay_envs=3, rotate_player1=True),
    dict(num_selfplay_envs=2, partial_obs=True),
    dict(num_selfplay_envs=2, partial_obs=True, rotate_player1=True, alternate_sides=False),
    dict(num_selfplay_envs=0, rotate_player1=True),
    dict(num_selfplay_envs=0, maps=["basesWorkers8x8", "FourBasesWorkers8x8"]),
])
def test_compiled_conversions_match_numpy(engine_home, options: dict) -> None:
    opts = MicroRTSOptions(map="basesWorkers8x8", bots=["WorkerRush", "Passive"], max_steps=70,
                           **options)
    ours = MicroRTSVecGame(opts, 6, seed=3, compiled=True)
    ref = MicroRTSVecGame(opts, 6, seed=3, compiled=False)
    try:
        assert ours.compiled and not ref.compiled
        batch, expected = ours.reset(), ref.reset()
        _assert_same_batch(batch, expected, 0)
        rng = np.random.default_rng(1)
        ended = 0
        for step in range(1, 200):
            # int32 actions on some steps: the compiled writer takes any integer type
            actions = random_legal_actions(expected.action_mask, rng)
            if step % 3 == 0:
                actions = actions.astype(np.int32)
            was_unit = ours._engine_planes[..., 11] != 0  # [R, HW] before the step
            batch, expected = ours.step(actions), ref.step(actions)
            _assert_same_batch(batch, expected, step)
            # the compiled writer leaves cells without a unit of the seat alone (the engine
            # does not read them there); where units stand, it wrote what numpy wrote
            units = ours._engine_planes[..., 11] != 0  # [R, HW] own units after the step
            np.testing.assert_array_equal(ours._engine_act[units & was_unit],
                                          ref._engine_act[units & was_unit])
            np.testing.assert_array_equal(ours.episode_reward_components(),
                                          ref.episode_reward_components())
            ended += len(expected.episodes.env)
        assert ended  # games ended (truncated at 70 cycles at least) and were compared
    finally:
        ours.close()
        ref.close()


def test_compiled_needs_numba(engine_home, monkeypatch) -> None:
    from games.core import GameError

    monkeypatch.setattr(kernels, "AVAILABLE", False)
    with pytest.raises(GameError, match="numba"):
        MicroRTSVecGame(MicroRTSOptions(map="basesWorkers8x8"), 1, compiled=True)
    game = MicroRTSVecGame(MicroRTSOptions(map="basesWorkers8x8"), 1)
    try:
        assert not game.compiled  # falls back to numpy
        game.reset()
    finally:
        game.close()


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("value", [49, -1])
def test_an_action_component_out_of_range_is_one_line(engine_home, compiled: bool,
                                                      value: int) -> None:
    """An attack offset outside 0..48 at a unit's cell (the engine took it without a word) is
    a GameError naming the component, env, seat and cell, checked before anything of the step
    is written; the game then plays on."""
    opts = MicroRTSOptions(map="basesWorkers8x8", num_selfplay_envs=2, rotate_player1=True)
    game = MicroRTSVecGame(opts, 2, seed=0, compiled=compiled)
    try:
        batch = game.reset()
        assert batch.action_mask is not None
        cell = int(np.flatnonzero(batch.action_mask[1, 1].any(-1))[0])  # a unit of env 1's seat 1
        actions = np.zeros((2, 2, 64, 7), np.int64)
        actions[1, 1, cell, 6] = value
        with pytest.raises(GameError, match=f"^microrts: action component attack = {value} "
                                            f"\\(env 1, seat 1, cell {cell}\\) is out of range "
                                            "0..48$"):
            game.step(actions)
        actions[1, 1, cell, 6] = 0
        # a cell without a unit of the seat: the same rule (as worker processes and map-size
        # groups check every cell before any steps)
        empty = int(np.flatnonzero(~batch.action_mask[1, 1].any(-1))[0])
        actions[1, 1, empty, 0] = 99
        with pytest.raises(GameError, match=f"type = 99 \\(env 1, seat 1, cell {empty}\\)"):
            game.step(actions)
        actions[1, 1, empty, 0] = 0
        game.step(actions)
    finally:
        game.close()
