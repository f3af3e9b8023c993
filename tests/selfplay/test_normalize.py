"""Running reward scaling: Stable-Baselines3's VecNormalize scheme, over the learner's streams."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from selfplay.normalize import RewardScaler


class _Scripted(gym.Env):
    """Emits a fixed reward sequence, ending episodes where ``dones`` says."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Discrete(1)

    def __init__(self, rewards: np.ndarray, dones: np.ndarray) -> None:
        self.rewards, self.dones, self.t = rewards, dones, 0

    def reset(self, *, seed=None, options=None):  # type: ignore[no-untyped-def]
        return np.zeros(1, np.float32), {}

    def step(self, action):  # type: ignore[no-untyped-def]
        r, d = float(self.rewards[self.t]), bool(self.dones[self.t])
        self.t += 1
        return np.zeros(1, np.float32), r, d, False, {}


def test_reward_scaler_matches_stable_baselines3_vec_normalize() -> None:
    """One stream is scaled as Stable-Baselines3's ``VecNormalize`` scales rewards (returns
    reset after an episode's last step; gymnasium 1.x's ``NormalizeReward`` resets them on it)."""
    from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize

    rng = np.random.default_rng(0)
    rewards = rng.normal(2.0, 3.0, 300)
    dones = rng.random(300) < 0.05
    ours = RewardScaler((1, 1), gamma=0.99, clip=10.0)
    theirs = VecNormalize(DummyVecEnv([lambda: _Scripted(rewards, dones)]), norm_obs=False,
                          norm_reward=True, gamma=0.99, clip_reward=10.0, epsilon=1e-8)
    theirs.reset()
    for r, d in zip(rewards, dones, strict=True):
        got = ours(np.array([[r]]), np.array([d]))[0, 0]
        _, want, done, _ = theirs.step(np.zeros(1, np.int64))
        assert bool(done[0]) == d
        assert np.isclose(got, want[0], rtol=1e-5), (got, want)


def test_only_the_learners_streams_set_the_scale() -> None:
    """Dead seats (always 0) and opponents' seats leave the statistics alone."""
    rng = np.random.default_rng(1)
    alone = RewardScaler((4, 1), gamma=0.9, clip=10.0)
    mixed = RewardScaler((4, 2), gamma=0.9, clip=10.0)
    learner = np.zeros((4, 2), bool)
    learner[:, 0] = True
    for _ in range(50):
        reward = rng.normal(0.0, 5.0, (4, 1))
        done = rng.random(4) < 0.1
        other = np.concatenate([reward, rng.normal(0.0, 50.0, (4, 1))], axis=1)
        np.testing.assert_allclose(mixed(other, done, learner=learner)[:, :1],
                                   alone(reward, done), rtol=1e-6)
    assert mixed.stats.var.item() == alone.stats.var.item()


def test_a_seat_counts_from_its_first_move_to_its_episodes_end() -> None:
    """A turn-based seat's stream joins at its first move and stays in while it waits (its
    loss arrives on the other seat's move); a seat that never acts (a bot env's engine seat)
    never counts; the episode's end takes the streams out until their next move."""
    scaler = RewardScaler((1, 3), gamma=1.0, clip=10.0)
    acted = np.array([[True, False, False]])
    scaler(np.zeros((1, 3)), np.zeros(1, bool), learner=acted)  # seat 0 moves
    assert scaler.stats.count == pytest.approx(1 + 1e-4)
    acted = np.array([[False, True, False]])
    scaler(np.array([[-1.0, 1.0, 0.0]]), np.ones(1, bool), learner=acted)  # seat 1 wins
    assert scaler.stats.count == pytest.approx(3 + 1e-4)  # the loser's -1 counted
    assert scaler.stats.mean.item() == pytest.approx(0.0, abs=1e-3)
    scaler(np.zeros((1, 3)), np.zeros(1, bool), learner=np.zeros((1, 3), bool))
    assert scaler.stats.count == pytest.approx(3 + 1e-4)  # a new episode: nobody moved yet
