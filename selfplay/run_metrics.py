"""What a run measures besides its losses: the learner's recent episodes (:class:`EpisodeLog`)
and the wall-clock time of each section of an update (:class:`Timer`)."""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from games.core import EpisodeStats, Outcome


@dataclass
class EpisodeLog:
    """Recent finished episodes of the learner's seats."""

    window: int
    returns: collections.deque[float] = field(init=False)
    lengths: collections.deque[int] = field(init=False)
    outcomes: collections.deque[int] = field(init=False)
    count: int = 0

    def __post_init__(self) -> None:
        self.returns = collections.deque(maxlen=self.window)
        self.lengths = collections.deque(maxlen=self.window)
        self.outcomes = collections.deque(maxlen=max(self.window, 100))

    def add(self, stats: EpisodeStats, learner: np.ndarray) -> None:
        """The episodes of ``stats`` played by the learner (``learner`` ``bool [E, A]``: its
        seats). A game it played on more than one seat (against itself: several of its seats
        end in one env at once) counts once, by its lowest seat, and not in the win, draw and
        loss rates: a mirror game's win and loss say nothing of its strength (they pulled the
        win rate toward a half, and its ±1 returns averaged to 0)."""
        keep = learner[stats.env, stats.seat]
        if not keep.any():
            return
        envs, counts = np.unique(stats.env[keep], return_counts=True)
        mirror = np.isin(stats.env, envs[counts > 1]) & keep  # [K]
        first_seat = np.full(int(stats.env.max()) + 1, np.iinfo(np.int64).max)
        np.minimum.at(first_seat, stats.env[mirror], stats.seat[mirror])
        counted = keep & (~mirror | (stats.seat == first_seat[stats.env]))
        self.returns.extend(stats.ret[counted].tolist())
        self.lengths.extend(stats.length[counted].tolist())
        self.outcomes.extend(stats.outcome[keep & ~mirror].tolist())
        self.count += int(counted.sum())

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {"episodes": float(self.count)}
        if self.returns:
            out["episode/return_mean"] = float(np.mean(self.returns))
            out["episode/length_mean"] = float(np.mean(self.lengths))
        decided = [o for o in self.outcomes if o != Outcome.NONE]
        if decided:
            arr = np.asarray(decided)
            out["episode/win_rate"] = float(np.mean(arr == Outcome.WIN))
            out["episode/draw_rate"] = float(np.mean(arr == Outcome.DRAW))
            out["episode/loss_rate"] = float(np.mean(arr == Outcome.LOSS))
        return out

    def weights(self) -> dict[str, float]:
        """How many episodes each of :meth:`summary`'s means is over (to weigh the ranks'
        summaries of a data-parallel run)."""
        decided = float(sum(o != Outcome.NONE for o in self.outcomes))
        return {"episode/return_mean": float(len(self.returns)),
                "episode/length_mean": float(len(self.lengths)),
                "episode/win_rate": decided, "episode/draw_rate": decided,
                "episode/loss_rate": decided}

    def state_dict(self) -> dict[str, Any]:
        return {"returns": list(self.returns), "lengths": list(self.lengths),
                "outcomes": list(self.outcomes), "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for window, saved in ((self.returns, state["returns"]), (self.lengths, state["lengths"]),
                              (self.outcomes, state["outcomes"])):
            window.clear()
            window.extend(saved)
        self.count = int(state["count"])



class Timer:
    """Named wall-clock sections (env, inference, learn) summed per update."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = collections.defaultdict(float)

    def add(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.totals[name] += now - since
        return now

    def pop(self) -> dict[str, float]:
        out = dict(self.totals)
        self.totals.clear()
        return out
