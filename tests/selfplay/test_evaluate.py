"""``run_episodes``: which finished episodes an evaluation counts."""

from __future__ import annotations

import numpy as np

from games.registry import make_game
from selfplay.evaluate import run_episodes


class EnvDependentPole:
    """CartPole play that depends on the env: env 0 always pushes left (its pole falls within
    a few dozen steps), the others balance (angle plus angular velocity; 500 steps)."""

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        balance = (obs[:, 2] + obs[:, 3] > 0).astype(np.int64)
        balance[0] = 0
        return balance


def test_each_env_contributes_its_share_not_the_first_to_finish() -> None:
    """8 episodes over 4 envs: 2 from each, in env order. Counting episodes as they finish
    would take env 0's short ones only (it ends a game every few dozen steps), a biased mean."""
    game = make_game("CartPole-v1", num_envs=4, seed=0)
    try:
        returns = run_episodes(game, EnvDependentPole(), episodes=8, seed=0)  # type: ignore[arg-type]
    finally:
        game.close()
    assert len(returns) == 8
    assert max(returns[:2]) < 60, returns  # env 0's two falls
    assert min(returns[2:]) == 500, returns  # the balancing envs' full episodes
    uneven = make_game("CartPole-v1", num_envs=3, seed=0)
    try:
        shares = run_episodes(uneven, EnvDependentPole(), episodes=5, seed=1)  # type: ignore[arg-type]
    finally:
        uneven.close()
    assert len(shares) == 5 and max(shares[:2]) < 60 and min(shares[2:]) == 500  # 2, 2, 1
