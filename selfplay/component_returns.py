"""Mean per-component returns of the learner's recent episodes (games with reward components).

A game that sums several reward terms (microRTS: win/loss, resources gathered, workers,
buildings, attacks, combat units) exposes ``reward_component_names`` and, after each step,
``episode_reward_components()``: ``float [K, C]`` unweighted per-component returns of the
seat-episodes in ``Batch.episodes``. They are logged as ``reward/<component>``.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from games.core import EpisodeStats


class ComponentReturns:
    """A window of the learner's (seat 0) per-component episode returns."""

    def __init__(self, names: list[str], window: int = 100) -> None:
        self.names = names
        self.rows: collections.deque[np.ndarray] = collections.deque(maxlen=window)

    def state_dict(self) -> dict[str, Any]:
        """The window (saved with each checkpoint: a resumed run logs what the run that wrote
        it would have)."""
        return {"rows": (np.stack(self.rows) if self.rows
                         else np.zeros((0, len(self.names)), np.float64))}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rows.clear()
        for row in np.asarray(state["rows"], np.float64):
            self.rows.append(row)

    def add(self, stats: EpisodeStats, components: np.ndarray) -> None:
        for row in components[stats.seat == 0]:
            self.rows.append(np.asarray(row, np.float64))

    def weights(self) -> dict[str, float]:
        """How many episodes each ``reward/*`` of :meth:`metrics` is over."""
        return {f"reward/{name}": float(len(self.rows)) for name in self.names}

    def metrics(self) -> dict[str, float]:
        if not self.rows:
            return {}
        means = np.mean(np.stack(self.rows), axis=0)
        return {f"reward/{name}": float(m) for name, m in zip(self.names, means, strict=True)}
