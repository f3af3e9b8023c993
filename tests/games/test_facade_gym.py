"""GymEnvFacade: our one-env games pass gymnasium's env checker and behave like gym envs."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from games.core import GameError
from games.facades_gym import GymEnvFacade
from games.registry import make_game


@pytest.mark.parametrize("name", ["CartPole-v1", "Pendulum-v1", "HalfCheetah-v5", "atari/Pong"])
def test_facade_passes_gymnasium_env_checker(name: str) -> None:
    env = GymEnvFacade(make_game(name, 1, seed=0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # advice about unbounded Box spaces, missing spec
        check_env(env, skip_render_check=True)
    env.close()


def test_facade_spaces_mask_and_episode_info() -> None:
    env = GymEnvFacade(make_game("CartPole-v1", 1, seed=0))
    assert env.action_space == gym.spaces.Discrete(2)
    assert env.observation_space.shape == (4,) and env.observation_space.dtype == np.float32
    obs, info = env.reset(seed=1)
    assert obs.shape == (4,) and info["action_mask"].tolist() == [1, 1]
    assert info["action_mask"].dtype == np.int8  # as Discrete.sample(mask=...) takes it
    assert env.action_space.sample(mask=info["action_mask"]) in (0, 1)
    length, ret = 0, 0.0
    while True:
        obs, reward, terminated, truncated, info = env.step(0)  # always push left: falls fast
        length += 1
        ret += reward
        if terminated or truncated:
            break
    assert info["game_episode"] == {"r": ret, "l": length}
    assert info["action_mask"].tolist() == [0, 0]  # nothing is played from the last position
    next_obs, _ = env.reset()  # the game already started the next episode: hand it out
    assert not np.array_equal(next_obs, obs)
    assert np.all(np.abs(next_obs) <= 0.05)  # CartPole's initial-state range


def test_facade_box_actions_and_render() -> None:
    env = GymEnvFacade(make_game("atari/Breakout", 1, seed=0, options={"render": True}),
                       render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame is not None and frame.shape == (210, 160, 3)
    cheetah = GymEnvFacade(make_game("HalfCheetah-v5", 1, seed=0))
    assert isinstance(cheetah.action_space, gym.spaces.Box)
    assert cheetah.action_space.shape == (6,) and cheetah.action_space.dtype == np.float32
    cheetah.reset(seed=0)
    obs, reward, *_ = cheetah.step(cheetah.action_space.sample())
    assert obs.shape == (17,) and isinstance(reward, float)


def test_facade_needs_one_env() -> None:
    with pytest.raises(GameError, match="one env and one seat"):
        GymEnvFacade(make_game("CartPole-v1", 2, seed=0))


def test_facade_refuses_fractional_and_misshapen_actions() -> None:
    """Guards: ``step(1.7)`` played action 1 (the games refuse non-integer actions)."""
    env = GymEnvFacade(make_game("CartPole-v1", 1, seed=0))
    env.reset(seed=0)
    with pytest.raises(GameError, match=r"actions must be integers, got 1.7"):
        env.step(1.7)
    with pytest.raises(GameError, match=r"an action has 1 value"):
        env.step([0, 1])
    env.step(np.float64(1.0))  # a whole number is an integer action
    env.step(np.int32(0))
    env.close()


def test_gymnasiums_episode_statistics_wrap_the_facade() -> None:
    """CleanRL's set-up: RecordEpisodeStatistics in a SyncVectorEnv (it asserted that the
    facade's own "episode" key was not there)."""
    def thunk() -> gym.Env:  # type: ignore[type-arg]
        return gym.wrappers.RecordEpisodeStatistics(GymEnvFacade(make_game("CartPole-v1", 1,
                                                                           seed=0)))

    envs = gym.vector.SyncVectorEnv([thunk, thunk])
    envs.reset(seed=0)
    ended = 0
    for _ in range(200):
        *_, info = envs.step(np.zeros(2, np.int64))  # always left: episodes end fast
        ended += int(np.sum(info.get("_episode", 0)))
    assert ended > 0
    envs.close()


def test_a_step_past_the_end_then_reset_returns_the_games_position() -> None:
    """Stepping on after an episode ended (no reset) plays the next one; a later reset()
    handed out that episode's first observation although the game had moved on."""
    env = GymEnvFacade(make_game("CartPole-v1", 1, seed=0))
    env.reset(seed=0)
    while not any(env.step(0)[2:4]):
        pass
    env.step(0)  # one step into the next episode
    obs, _ = env.reset()
    following = env.step(0)[0]
    reference = gym.make("CartPole-v1").unwrapped  # CartPole's dynamics are deterministic
    reference.reset(seed=0)
    reference.state = obs.astype(np.float64)  # type: ignore[attr-defined]
    expected = reference.step(0)[0]
    np.testing.assert_allclose(following, expected, atol=1e-6)  # the game was at ``obs``
    env.close()


def test_render_mode_needs_a_game_that_draws() -> None:
    """A gymnasium game made without the render option draws nothing: rgb_array is refused
    when the facade is made (render() raised later; check_env failed)."""
    with pytest.raises(GameError, match="render_mode 'rgb_array': CartPole-v1 draws no frames "
                                        "as made \\(create it with options \\{render: true"):
        GymEnvFacade(make_game("CartPole-v1", 1, seed=0), render_mode="rgb_array")
    env = GymEnvFacade(make_game("CartPole-v1", 1, seed=0, options={"render": True}),
                       render_mode="rgb_array")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(env)  # the render check included
    env.close()
