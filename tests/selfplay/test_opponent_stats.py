"""Per-opponent win rates from episode statistics."""

from __future__ import annotations

import numpy as np

from games.core import EpisodeStats, Outcome
from selfplay.opponent_stats import OpponentWinRates


def stats(envs: list[int], seats: list[int], outcomes: list[int]) -> EpisodeStats:
    n = len(envs)
    return EpisodeStats(np.array(envs), np.array(seats), np.zeros(n), np.ones(n, np.int64),
                        np.array(outcomes, np.int8))


def test_groups_seat0_outcomes_by_opponent() -> None:
    rates = OpponentWinRates(["selfplay", "WorkerRush", "WorkerRush"])
    rates.add(stats([0, 0, 1, 2], [0, 1, 0, 0], [Outcome.WIN, Outcome.LOSS, Outcome.WIN,
                                                Outcome.LOSS]))
    rates.add(stats([2], [0], [Outcome.NONE]))  # no result: not counted
    assert rates.metrics() == {"win_rate/selfplay": 1.0, "win_rate/WorkerRush": 0.5}
