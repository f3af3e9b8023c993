"""Win rate of the learner per opponent (a scripted bot's name, or "selfplay"), for logging.

Games that mix opponents in one batch expose ``opponent_names`` (one name per env); seat 0 is
the learner's. Games whose envs change opponents between games (microRTS ``set_bot``) also
expose ``ended_opponent_names``: the opponent of each env's last finished game, which is what a
finished episode is credited to. Pass a function that reads it from the game (a game may
return a new list at each read, as the mixed-size microRTS game does), so that each
:meth:`add` sees the current names. Results are kept in a window of recent games per opponent.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from games.core import EpisodeStats, Outcome


class OpponentWinRates:
    """Recent outcomes of seat 0, grouped by the env's opponent name."""

    def __init__(self, names: Sequence[str] | Callable[[], Sequence[str]],
                 window: int = 100) -> None:
        """``names``: each env's opponent, or a function returning them (read at each
        :meth:`add`)."""
        self.names = names
        self.outcomes: dict[str, collections.deque[int]] = collections.defaultdict(
            lambda: collections.deque(maxlen=window))

    def state_dict(self) -> dict[str, Any]:
        """The windows (saved with each checkpoint, as :class:`ComponentReturns`')."""
        return {"outcomes": {name: list(results) for name, results in self.outcomes.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.outcomes.clear()
        for name, results in dict(state["outcomes"]).items():
            self.outcomes[str(name)].extend(int(x) for x in results)

    def add(self, stats: EpisodeStats, names: Sequence[str] | None = None) -> None:
        """Seat 0's outcomes of ``stats``, each under its env's opponent in ``names`` (default:
        the names given at construction, read now)."""
        seat0 = stats.seat == 0
        if names is None:
            names = self.names() if callable(self.names) else self.names
        for env, outcome in zip(stats.env[seat0].tolist(), stats.outcome[seat0].tolist(),
                                strict=True):
            if outcome != Outcome.NONE:
                self.outcomes[names[env]].append(outcome)

    def weights(self) -> dict[str, float]:
        """How many games each ``win_rate/*`` of :meth:`metrics` is over."""
        return {f"win_rate/{name}": float(len(results))
                for name, results in self.outcomes.items() if results}

    def metrics(self) -> dict[str, float]:
        out = {}
        for name, results in self.outcomes.items():
            if results:
                arr = np.asarray(results)
                out[f"win_rate/{name}"] = float((arr == Outcome.WIN).mean())
        return out
