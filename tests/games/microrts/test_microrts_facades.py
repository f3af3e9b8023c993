"""microRTS through the facades passes the ecosystem's own checkers: gymnasium's ``check_env``
on a one-seat bot env, PettingZoo's ``parallel_api_test``, ``parallel_seed_test`` and state test
on a two-seat self-play game (8x8 map, episodes of a few dozen cycles, with and without fog)."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence
from pettingzoo.test import parallel_api_test
from pettingzoo.test.seed_test import parallel_seed_test
from pettingzoo.test.state_test import test_parallel_env as check_parallel_state

from games.core import GameError
from games.facades_gym import GymEnvFacade
from games.facades_pz import ParallelEnvFacade
from games.gym_spaces import MaskedMultiDiscrete
from games.registry import make_game

MAP = "basesWorkers8x8"


def microrts(**options: Any) -> Any:
    return make_game("microrts", num_envs=1, seed=0, options={"map": MAP, **options})


def selfplay(partial_obs: bool = False) -> ParallelEnvFacade:
    return ParallelEnvFacade(microrts(num_selfplay_envs=1, max_steps=30, partial_obs=partial_obs))


@pytest.mark.parametrize("options", [
    {"bots": ["WorkerRush"], "max_steps": 40},
    {"bots": ["Passive"], "max_steps": 40, "partial_obs": True},
], ids=["worker_rush", "passive_fog"])
def test_bot_env_passes_gymnasium_env_checker(engine_home, options: dict[str, Any]) -> None:
    env = GymEnvFacade(microrts(**options), render_mode="rgb_array")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", "(?s).*not having a spec")  # other render modes
            check_env(env)
    finally:
        env.close()


@pytest.mark.parametrize("partial_obs", [False, True], ids=["full", "fog"])
def test_selfplay_passes_parallel_api_test(engine_home, partial_obs: bool) -> None:
    env = selfplay(partial_obs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            parallel_api_test(env, num_cycles=100)  # samples with obs["action_mask"]
    finally:
        env.close()


def test_selfplay_passes_parallel_seed_and_state_tests(engine_home) -> None:
    parallel_seed_test(selfplay, num_cycles=100)
    check_parallel_state(selfplay(), seed=3)


def _masked_episode(env: GymEnvFacade, seed: int) -> list[Any]:
    """One episode of masked random actions from ``reset(seed)``: every step's outputs."""
    obs, info = env.reset(seed=seed)
    env.action_space.seed(seed)
    trajectory: list[Any] = [obs, info]
    while True:
        action = env.action_space.sample(mask=info["action_mask"])
        obs, reward, terminated, truncated, info = env.step(action)
        trajectory.append((action, obs, reward, terminated, truncated, info))
        if terminated or truncated:
            return trajectory


def test_random_bot_replays_its_episode_for_a_seed(engine_home) -> None:
    """RandomBiased draws from generators the seed resets: one env replays an episode exactly,
    and so does a second env stepped after it."""
    def make_env() -> GymEnvFacade:
        return GymEnvFacade(microrts(bots=["RandomBiased"], max_steps=60))

    env, other = make_env(), make_env()
    first = _masked_episode(env, seed=5)
    assert data_equivalence(first, _masked_episode(env, seed=5))
    assert data_equivalence(first, _masked_episode(other, seed=5))
    assert not data_equivalence(first, _masked_episode(env, seed=6))
    env.close()
    other.close()


@pytest.mark.xfail(strict=True, reason="games in one JVM share RandomBiased's static generator "
                   "(util.Sampler): two games stepped in turn draw each other's numbers")
def test_random_bot_envs_stepped_in_turn_pass_parallel_seed_test(engine_home) -> None:
    parallel_seed_test(lambda: ParallelEnvFacade(microrts(bots=["RandomBiased"], max_steps=60)))


def test_grid_action_space_samples_with_our_mask_layout() -> None:
    space = MaskedMultiDiscrete(np.tile([3, 2], (4, 1)))  # 4 cells x (3, 2)
    mask = np.zeros((4, 5), bool)
    mask[:, 0] = True  # type 0 everywhere ...
    mask[2, [2, 4]] = True  # ... cell 2 may also take type 2 and value 1
    space.seed(0)
    samples = np.stack([space.sample(mask=mask) for _ in range(50)])  # [50, 4, 2]
    assert samples.shape == (50, 4, 2) and samples.dtype == space.dtype
    assert (samples[:, [0, 1, 3]] == 0).all()  # no legal value in component 1: 0
    assert set(samples[:, 2, 0]) == {0, 2} and set(samples[:, 2, 1]) == {1}
    nested = tuple((np.ones(3, np.int8), np.array([0, 1], np.int8)) for _ in range(4))
    assert (space.sample(mask=nested)[:, 1] == 1).all()  # gymnasium's own layout still works
    with pytest.raises(GameError, match="does not fit"):
        space.sample(mask=np.ones((4, 6), bool))
