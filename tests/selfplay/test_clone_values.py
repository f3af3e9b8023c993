"""The value targets of behaviour cloning, computed by hand on a scripted game: the game's own
rewards (what PPO's critic learns) or the games' outcomes, per seat, discounted by bc.gamma
(by default ppo.gamma), bootstrapped after the rollout and where a time limit cut a game."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from games.core import Batch, Discrete, EpisodeStats, GameSpec, Outcome
from selfplay.cloning import Cloner
from selfplay.config import ConfigError, TrainConfig
from selfplay.config_files import build_config

W, L, D = Outcome.WIN, Outcome.LOSS, Outcome.DRAW


def ended(*rows: tuple[int, int, Outcome]) -> EpisodeStats:
    """Seat-episodes ``(env, seat, outcome)`` that end on one step."""
    if not rows:
        return EpisodeStats.empty()
    env, seat, outcome = (np.array(column) for column in zip(*rows, strict=True))
    return EpisodeStats(env.astype(np.int64), seat.astype(np.int64), np.zeros(len(rows)),
                        np.ones(len(rows), np.int64), outcome.astype(np.int8))


# Each step of two envs of two seats: rewards [E, A], terminated [E], truncated [E], the
# episodes that ended, the values of the final observations [E, A] (where cut) and of the
# next observations [E, A] (the last step's bootstrap the values after the rollout).
# Env 0: shaping rewards, a win of seat 0 (10 / -10) at step 1, then shaping again. Env 1: a
# draw cut by a time limit at step 1 (its final position worth 3 / -2), then a loss of seat 0.
SCRIPT = [
    ([[1.0, -0.5], [0.0, 0.0]], [False, False], [False, False], ended(), None, [[0, 0], [0, 0]]),
    ([[10.0, -10.0], [1.0, 1.0]], [True, False], [False, True],
     ended((0, 0, W), (0, 1, L), (1, 0, D), (1, 1, D)), [[9, 9], [3, -2]], [[0, 0], [0, 0]]),
    ([[0.25, 0.0], [-10.0, 10.0]], [False, True], [False, False],
     ended((1, 0, L), (1, 1, W)), [[9, 9], [9, 9]], [[0, 0], [0, 0]]),
    ([[0.0, 2.0], [0.0, 0.0]], [False, False], [False, False], ended(), None, [[4, 6], [1, 1]]),
]


def column(values: list[list[float]] | None) -> np.ndarray | None:
    """``[E, A, 1]`` observations whose one feature is their value under the stub critic."""
    return None if values is None else np.asarray(values, np.float32)[..., None]


class Scripted:
    """Two envs, two seats, moves that change nothing: rewards and ends follow SCRIPT."""

    def __init__(self) -> None:
        self.spec = GameSpec(name="scripted", num_envs=2, num_seats=2, obs_shape=(1,),
                             obs_dtype=np.dtype(np.float32), action_space=Discrete(2))
        self.teacher_actions = np.zeros((2, 2), np.int64)
        self.imitate = np.ones((2, 2), bool)
        self.t = 0

    def _batch(self, obs: np.ndarray, reward: np.ndarray, terminated: np.ndarray,
               truncated: np.ndarray, episodes: EpisodeStats,
               final_obs: np.ndarray | None) -> Batch:
        return Batch(obs, np.ones((2, 2, 2), bool), None, reward, terminated, truncated,
                     np.ones((2, 2), bool), episodes, final_obs)

    def reset(self, seed: int | None = None) -> Batch:
        self.t = 0
        return self._batch(np.zeros((2, 2, 1), np.float32), np.zeros((2, 2), np.float32),
                           np.zeros(2, bool), np.zeros(2, bool), EpisodeStats.empty(), None)

    def step(self, actions: np.ndarray) -> Batch:
        reward, terminated, truncated, episodes, final, after = SCRIPT[self.t]
        self.t += 1
        obs = column(after)
        assert obs is not None
        return self._batch(obs, np.asarray(reward, np.float32), np.asarray(terminated),
                           np.asarray(truncated), episodes, column(final))

    def close(self) -> None:
        pass


def config(*overrides: str) -> TrainConfig:
    return build_config("tictactoe", overrides=[
        "bc.teachers=[win_or_block]", "bc.num_envs=2", f"bc.num_steps={len(SCRIPT)}",
        "bc.minibatches=1", "bc.validate_every=0", "log.tensorboard=false",
        "log.progress=false", *overrides])


class TurnScripted(Scripted):
    """SCRIPT with the seats taking turns: seat ``t % 2`` acts at step ``t``."""

    def __init__(self) -> None:
        super().__init__()
        self.spec = GameSpec(name="scripted", num_envs=2, num_seats=2, obs_shape=(1,),
                             obs_dtype=np.dtype(np.float32), action_space=Discrete(2),
                             turn_based=True)

    def _batch(self, *args: Any) -> Batch:
        batch = super()._batch(*args)
        return batch._replace(alive=np.tile(np.arange(2) == self.t % 2, (2, 1)))


def value_targets(monkeypatch: pytest.MonkeyPatch, *overrides: str,
                  game: type[Scripted] = Scripted) -> np.ndarray:
    """``[T, E, A]`` value targets of one collection of SCRIPT, the critic stubbed to read
    each observation's value off its one feature."""
    cloner = Cloner(config(*overrides), game())

    def values(obs: np.ndarray, state: np.ndarray | None) -> torch.Tensor:
        return torch.as_tensor(obs)[..., 0].flatten()

    monkeypatch.setattr(cloner, "_values", values)
    cloner.collect()
    return cloner.returns().view(len(SCRIPT), 2, 2).numpy()


def test_reward_targets_are_the_games_own_rewards_discounted(
        monkeypatch: pytest.MonkeyPatch) -> None:
    got = value_targets(monkeypatch, "bc.value_target=reward", "bc.gamma=0.5")
    # by hand, backwards from the bootstrap values after step 3 (env 0: 4 and 6; env 1: 1, 1)
    env0_seat0 = [1 + 0.5 * 10, 10, 0.25 + 0.5 * (0 + 0.5 * 4), 0 + 0.5 * 4]
    env0_seat1 = [-0.5 + 0.5 * -10, -10, 0 + 0.5 * (2 + 0.5 * 6), 2 + 0.5 * 6]
    # env 1, step 1: cut by the time limit, its reward gains gamma * V(final observation)
    env1_seat0 = [0 + 0.5 * (1 + 0.5 * 3), 1 + 0.5 * 3, -10, 0 + 0.5 * 1]
    env1_seat1 = [0 + 0.5 * (1 + 0.5 * -2), 1 + 0.5 * -2, 10, 0 + 0.5 * 1]
    want = np.array([[env0_seat0, env0_seat1], [env1_seat0, env1_seat1]]).transpose(2, 0, 1)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_a_seat_waiting_for_its_turn_at_the_end_is_cut_at_its_last_move(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Turn-based: seat 1 moved last (step 3) and waits after the rollout: its chain is cut
    there (the value of its move's position, 0 here, as PPO's; it was bootstrapped from the
    values after the rollout, 6 and 1: positions where it waits); seat 0 acts next and keeps
    its bootstrap."""
    got = value_targets(monkeypatch, "bc.value_target=reward", "bc.gamma=0.5",
                        game=TurnScripted)
    env0_seat1 = [-0.5 + 0.5 * -10, -10, 0 + 0.5 * 0, 0]
    env1_seat1 = [0 + 0.5 * (1 + 0.5 * -2), 1 + 0.5 * -2, 10, 0]
    np.testing.assert_allclose(got[:, 0, 1], env0_seat1, rtol=1e-6)
    np.testing.assert_allclose(got[:, 1, 1], env1_seat1, rtol=1e-6)
    np.testing.assert_allclose(got[3, :, 0], [0 + 0.5 * 4, 0 + 0.5 * 1], rtol=1e-6)


def test_outcome_targets_are_plus_minus_one_at_the_end(monkeypatch: pytest.MonkeyPatch) -> None:
    got = value_targets(monkeypatch, "bc.value_target=outcome", "bc.gamma=0.5")
    env0_seat0 = [0.5 * 1, 1, 0.5 * 0.5 * 4, 0.5 * 4]
    env0_seat1 = [0.5 * -1, -1, 0.5 * 0.5 * 6, 0.5 * 6]
    env1_seat0 = [0, 0, -1, 0.5 * 1]  # a draw is 0, and a cut game is not bootstrapped
    env1_seat1 = [0, 0, 1, 0.5 * 1]
    want = np.array([[env0_seat0, env0_seat1], [env1_seat0, env1_seat1]]).transpose(2, 0, 1)
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_the_discount_defaults_to_ppos(monkeypatch: pytest.MonkeyPatch) -> None:
    """bc.gamma unset discounts as PPO's critic does (ppo.gamma), the reward targets too."""
    assert config().bc.value_target == "reward" and config().bc.gamma is None
    got = value_targets(monkeypatch, "ppo.gamma=0.5")
    assert got[0, 0, 0] == pytest.approx(1 + 0.5 * 10)
    assert Cloner(config("ppo.gamma=0.9"), Scripted()).gamma == 0.9
    assert Cloner(config("ppo.gamma=0.9", "bc.gamma=0.8"),
                  Scripted()).gamma == 0.8


def test_bad_value_settings_are_named() -> None:
    with pytest.raises(ConfigError, match="bc.value_target: 'outcomes' is not one of 'reward', "
                                          "'outcome'"):
        config("bc.value_target=outcomes")
    with pytest.raises(ConfigError, match=r"bc.gamma must be in \(0, 1\]"):
        config("bc.gamma=1.5")
