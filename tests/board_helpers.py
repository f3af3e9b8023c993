"""Tic-tac-toe positions read for tests: which cells complete a line."""

from __future__ import annotations

import numpy as np

from games.boardgames.tictactoe import LINES


def completing(marks: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """bool ``[N, 9]``: empty cells that complete a line holding two of ``marks``."""
    two = (marks[:, LINES].sum(-1) == 2) & (empty[:, LINES].sum(-1) == 1)  # [N, 8]
    out = np.zeros_like(empty)
    rows, lines = np.nonzero(two)
    for cells in range(3):
        cell = LINES[lines, cells]
        out[rows, cell] |= empty[rows, cell]
    return out
