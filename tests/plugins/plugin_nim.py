"""A game family from outside selfplay, as a plugin registers one (tests/games/test_plugins.py).

Nim: a pile of 10 stones, the two seats take 1-3 in turn, who takes the last stone wins. Every
array is batched over envs and seats, masks allow only what the pile holds, only the mover is
alive, and a finished game starts again at once (its last observation in ``final_obs``).
Registered with ``SELFPLAY_FAMILIES=plugin_nim`` (or a ``selfplay.families`` entry point).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from games.batches import EpisodeTracker, outcome_from_rewards
from games.core import Batch, Discrete, EpisodeStats, GameSpec
from games.family import SeatBotsFamily

PILE = 10
SETTINGS = Path(__file__).with_name("plugin_nim.yaml")


class Nim:
    """``num_envs`` games of Nim; obs ``float32 [E, 2, PILE + 2]``: the pile (one-hot) and
    whether the seat is to move."""

    def __init__(self, name: str, num_envs: int = 1, seed: int | None = None,
                 pile: int = PILE) -> None:
        self.spec = GameSpec(name=name, num_envs=num_envs, num_seats=2, obs_shape=(pile + 2,),
                             obs_dtype=np.dtype(np.float32), action_space=Discrete(3),
                             zero_sum=True, turn_based=True)
        self.pile0 = pile
        self.pile = np.full(num_envs, pile, np.int64)
        self.mover = np.zeros(num_envs, np.int64)
        self.tracker = EpisodeTracker(num_envs, 2)

    def _batch(self, reward: np.ndarray, done: np.ndarray, episodes: EpisodeStats,
               final_obs: np.ndarray | None) -> Batch:
        e = self.spec.num_envs
        obs = self._obs()
        mask = np.zeros((e, 2, 3), bool)
        mask[:, :] = (np.arange(1, 4)[None, :] <= self.pile[:, None])[:, None, :]
        alive = np.zeros((e, 2), bool)
        alive[np.arange(e), self.mover] = True
        return Batch(obs, mask, None, reward, done, np.zeros(e, bool), alive, episodes,
                     final_obs if final_obs is not None else obs)

    def _obs(self) -> np.ndarray:
        e = self.spec.num_envs
        obs = np.zeros((e, 2, self.pile0 + 2), np.float32)
        obs[np.arange(e), :, self.pile] = 1.0
        obs[np.arange(e), self.mover, -1] = 1.0
        return obs

    def reset(self, seed: int | None = None) -> Batch:
        e = self.spec.num_envs
        self.pile[:] = self.pile0
        self.mover[:] = 0
        self.tracker = EpisodeTracker(e, 2)
        return self._batch(np.zeros((e, 2), np.float32), np.zeros(e, bool),
                           EpisodeStats.empty(), None)

    def step(self, actions: np.ndarray) -> Batch:
        e = self.spec.num_envs
        take = actions[np.arange(e), self.mover] + 1
        self.pile -= np.minimum(take, self.pile)
        done = self.pile == 0
        reward = np.zeros((e, 2), np.float32)
        reward[done, self.mover[done]] = 1.0
        reward[done, 1 - self.mover[done]] = -1.0
        episodes = self.tracker.update(reward, done, outcome_from_rewards(reward))
        final_obs = self._obs()
        self.mover = np.where(done, 0, 1 - self.mover)
        self.pile[done] = self.pile0
        return self._batch(reward, done, episodes, final_obs)

    def close(self) -> None:
        pass


class FlawedNim(Nim):
    """Nim whose batches break the contract as ``flaw`` says (the tests of the checks)."""

    def __init__(self, name: str, num_envs: int, seed: int | None, flaw: str) -> None:
        super().__init__(name, num_envs, seed)
        self.flaw = flaw

    def _batch(self, reward: np.ndarray, done: np.ndarray, episodes: EpisodeStats,
               final_obs: np.ndarray | None) -> Batch:
        batch = super()._batch(reward, done, episodes, final_obs)
        if self.flaw == "flat_obs":  # [E, 2 * 12] instead of [E, 2, 12]
            return batch._replace(obs=batch.obs.reshape(len(batch.obs), -1))
        if self.flaw == "int_mask":
            return batch._replace(action_mask=batch.action_mask.astype(np.int64))
        if self.flaw == "float64_obs":
            return batch._replace(obs=batch.obs.astype(np.float64))
        if self.flaw == "nobody_alive":
            return batch._replace(alive=np.zeros_like(batch.alive))
        if self.flaw == "no_episodes":
            return batch._replace(episodes=EpisodeStats.empty())
        return batch

    def step(self, actions: np.ndarray) -> Batch:
        batch = super().step(actions)
        if self.flaw == "flat_obs_in_steps":  # reset() keeps the contract
            return batch._replace(obs=batch.obs.reshape(len(batch.obs), -1))
        return batch


def make(name: str, num_envs: int = 1, seed: int | None = None, pile: int = PILE,
         render: bool = False, flaw: str = "") -> Nim:
    return FlawedNim(name, num_envs, seed, flaw) if flaw else Nim(name, num_envs, seed, pile)


def _take_one(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    return np.zeros(len(obs), np.int64)


class NimFamily(SeatBotsFamily):
    name = "nim"
    summary = "Nim with 10 stones (a plugin: tests/plugins/plugin_nim.py)"
    factory = "plugin_nim:make"
    games = ("nim",)
    two_player = True
    hyperparams = SETTINGS

    def seat_bots(self) -> Mapping[str, Callable[..., np.ndarray]]:
        return {"take_one": _take_one}


FAMILIES = (NimFamily(),)
