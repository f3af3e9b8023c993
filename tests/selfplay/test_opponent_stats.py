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


class _SwitchingGame:
    """Like the mixed-size microRTS game: each read of ``ended_opponent_names`` builds a new
    list from the envs' current opponents."""

    def __init__(self) -> None:
        self.bots = ["WorkerRush", "LightRush"]

    @property
    def ended_opponent_names(self) -> list[str]:
        return list(self.bots)


def test_reads_the_names_live_from_a_function() -> None:
    game = _SwitchingGame()
    rates = OpponentWinRates(lambda: game.ended_opponent_names)
    rates.add(stats([0, 1], [0, 0], [Outcome.WIN, Outcome.LOSS]))
    game.bots[1] = "CoacAI"  # env 1's next game is against another bot
    rates.add(stats([1], [0], [Outcome.WIN]))
    assert rates.metrics() == {"win_rate/WorkerRush": 1.0, "win_rate/LightRush": 0.0,
                               "win_rate/CoacAI": 1.0}
