"""Learning benchmarks as tests (`make bench`, pytest -m slow); excluded from `make test`."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.bench_learning import train_seed
from tools.bench_microrts_learning import train_for

pytestmark = pytest.mark.slow


# pyproject's 600 s per-test limit is for the unit tests; these runs state their own (about
# twice the time each takes on the 2-core machine)
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cartpole_475_within_100k(seed: int, tmp_path: Path) -> None:
    result = train_seed("CartPole-v1", 100_000, seed, 20, 475, [], tmp_path)
    assert result["final_mean_return"] >= 475, result


@pytest.mark.timeout(6000)  # three seeds of 12-18 minutes
def test_halfcheetah_1500_within_1m_in_2_of_3_seeds(tmp_path: Path) -> None:
    results = [train_seed("HalfCheetah-v5", 1_000_000, seed, 10, 1500, [], tmp_path)
               for seed in (1, 2, 3)]
    assert sum(r["final_mean_return"] >= 1500 for r in results) >= 2, results


@pytest.mark.timeout(1800)  # 15 minutes of training, then 100 games
def test_microrts_10x10_beats_randombiased_95_percent_within_15_minutes(tmp_path: Path) -> None:
    """Issue 5's first learning target on the 2-core machine: the default microRTS settings
    with every env against RandomBiased on basesWorkers10x10 for 15 minutes (JVM start
    included), then 100 evaluation games, sides alternating: >= 95 % wins."""
    from selfplay.play import play

    bot, map_name = "RandomBiased", "basesWorkers10x10"
    trained = train_for(15.0, ["game.num_envs=24", f"game.options.map={map_name}",
                               f"game.options.bots=[{bot}]", "game.options.num_selfplay_envs=0",
                               "league.enabled=false"], 1, None, tmp_path)
    result = play(trained["checkpoint"], bot, games=100, map_name=map_name, seed=1001)
    print(f"\n{trained['steps']:,} steps; evaluation {result['wins']}/{result['losses']}/"
          f"{result['draws']} (wins/losses/draws), ci95 {result['ci95']}")  # shown by -s or -rP
    assert result["win_rate"] >= 0.95, (result, trained["steps"])
