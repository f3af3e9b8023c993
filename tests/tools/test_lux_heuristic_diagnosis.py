"""``tools/lux_heuristic_diagnosis.py`` on real Jux games: the heuristic measured against its own
labels agrees with them (only its tie-breaking draws differ), and random play does not."""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

from lux_heuristic_diagnosis import play  # noqa: E402

from games.lux import bots  # noqa: E402


def test_the_heuristic_agrees_with_its_own_labels_and_random_play_does_not() -> None:
    rng = np.random.default_rng(5)
    own = play(partial(bots.heuristic, rng=rng), games=2, seed=3, max_steps=30)
    rand = play(partial(bots.random_legal, rng=rng), games=2, seed=3, max_steps=30)
    for result in (own, rand):
        assert result["wins"] + result["losses"] + result["draws"] == 2  # type: ignore[operator]
        confusion = np.array(result["unit_confusion"])
        assert confusion.sum() > 100  # robots were labelled
    assert own["unit_agreement"] > 0.95 and own["move_agreement"] > 0.5  # type: ignore[operator]
    assert rand["unit_agreement"] < 0.5  # type: ignore[operator]
    assert max(own["lengths"]) <= 30  # type: ignore[type-var]
