"""PettingZoo ParallelEnv facade over a VecGame (on tic-tac-toe)."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest
from pettingzoo.test import parallel_api_test
from pettingzoo.test.seed_test import parallel_seed_test
from pettingzoo.test.state_test import test_parallel_env as check_parallel_state

from games.boardgames import make
from games.core import GameError, Outcome
from games.facades_pz import ParallelEnvFacade, make_parallel_env
from games.registry import make_game


def test_parallel_api_test_passes_without_warnings() -> None:
    env = make_parallel_env("tictactoe", seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(env, num_cycles=1000)


def test_seeding_and_state_space() -> None:
    parallel_seed_test(lambda: make_parallel_env("tictactoe"), num_cycles=100)
    check_parallel_state(make_parallel_env("tictactoe"), seed=3)


def test_spaces_and_observations() -> None:
    env = make_parallel_env("tictactoe", seed=0, first_player="seat0")
    obs, infos = env.reset(seed=1)
    assert env.agents == ["seat_0", "seat_1"] == env.possible_agents
    for agent in env.agents:
        assert env.observation_space(agent).contains(obs[agent])
        assert obs[agent]["action_mask"].dtype == np.int8
        assert env.action_space(agent) == gymnasium.spaces.Discrete(9)
    assert infos["seat_0"]["alive"] and not infos["seat_1"]["alive"]
    obs, *_ = env.step({"seat_0": 4})  # the idle seat may be left out
    assert obs["seat_0"]["action_mask"][4] == 0 and obs["seat_1"]["action_mask"].sum() == 8
    np.testing.assert_array_equal(obs["seat_1"]["observation"][1], obs["seat_0"]["observation"][0])
    assert env.state().shape == (2, 28)
    with pytest.raises(GameError, match="seat_1 is to act"):
        env.step({"seat_0": 0})
    with pytest.raises(GameError, match="unknown agents"):
        env.step({"seat_9": 0})


def test_episode_end_holds_final_obs_and_requires_reset() -> None:
    env = make_parallel_env("tictactoe", seed=0)  # first_player alternates
    _, infos = env.reset(seed=7)
    first = "seat_0" if infos["seat_0"]["alive"] else "seat_1"
    second = "seat_1" if first == "seat_0" else "seat_0"
    blank = env.render()
    assert blank is not None
    moves = [(first, 0), (second, 3), (first, 1), (second, 4), (first, 2)]
    for agent, cell in moves:
        obs, rewards, terms, truncs, infos = env.step({agent: cell})
    assert env.agents == [] and all(terms.values()) and not any(truncs.values())
    assert rewards == {first: 1.0, second: -1.0}
    assert infos[first]["outcome"] == Outcome.WIN and infos[second]["outcome"] == Outcome.LOSS
    assert infos[first]["episode_length"] == 5
    assert obs[first]["observation"][0].sum() == 3  # final position, not the autoreset board
    assert obs[first]["action_mask"].sum() == 0
    assert env.state()[0, :18].sum() == 5
    final = env.render()
    assert final is not None and not np.array_equal(final, blank)  # final board drawn
    with pytest.raises(GameError, match="reset"):
        env.step({first: 5})
    _, infos = env.reset()  # continues into the game's next episode: the other seat starts
    assert infos[second]["alive"] and not infos[first]["alive"]
    np.testing.assert_array_equal(np.asarray(env.render()), blank)


def test_needs_a_single_env() -> None:
    with pytest.raises(GameError, match="num_envs=1"):
        ParallelEnvFacade(make("tictactoe", num_envs=2))


def test_fractional_actions_are_refused() -> None:
    """Guards: ``{seat: 4.9}`` played cell 4."""
    env = make_parallel_env("tictactoe", seed=0, first_player="seat0")
    env.reset(seed=1)
    with pytest.raises(GameError, match=r"actions must be integers, got 4.9"):
        env.step({"seat_0": 4.9, "seat_1": 0})


def test_render_modes_follow_what_the_game_draws() -> None:
    """A gymnasium game made without the render option draws nothing: "auto" gives no render
    mode and "rgb_array" makes the game with rendering on (it picked rgb_array, then render()
    raised)."""
    quiet = make_parallel_env("CartPole-v1", seed=0)
    assert quiet.render_mode is None and quiet.metadata["render_modes"] == []
    quiet.close()
    drawn = make_parallel_env("CartPole-v1", seed=0, render_mode="rgb_array")
    drawn.reset(seed=0)
    frame = drawn.render()
    assert frame is not None and frame.ndim == 3 and frame.shape[2] == 3
    drawn.close()
    with pytest.raises(GameError, match="create it with options \\{render: true\\}"):
        ParallelEnvFacade(make_game("CartPole-v1", 1, seed=0), render_mode="rgb_array")
