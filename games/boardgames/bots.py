"""Scripted tic-tac-toe opponents as vectorized numpy functions ``[N, ...] -> actions [N]``.

Rows are (env, seat) pairs; to play both seats of a batch::

    E = batch.obs.shape[0]
    acts = win_or_block(batch.obs.reshape(E * 2, 3, 3, 3),
                        batch.action_mask.reshape(E * 2, 9), rng).reshape(E, 2)

(the action of a seat that is not ``alive`` is ignored by the game).
"""

from __future__ import annotations

import numpy as np

from games.boardgames.tictactoe import LINES, NUM_CELLS

# [8, 9] incidence of cells in lines
_INCIDENCE = np.zeros((len(LINES), NUM_CELLS), np.float32)
_INCIDENCE[np.arange(len(LINES))[:, None], LINES] = 1.0


def random_legal(mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random legal action per row of ``bool [N, n]``; 0 for rows with none."""
    mask = np.asarray(mask, bool)
    keys = rng.random(mask.shape)  # [N, n]
    keys[~mask] = -1.0
    return keys.argmax(axis=-1).astype(np.int64)


def win_or_block(obs: np.ndarray, mask: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One-ply heuristic: complete an own line, else block the opponent's, else random legal.

    ``obs`` is the tic-tac-toe observation ``[N, 3, 3, 3]`` (own, opponent, turn planes) seen
    by the seat that plays; ``mask`` is ``bool [N, 9]``. Ties are broken at random.
    """
    n = len(obs)
    planes = np.asarray(obs, np.float32).reshape(n, 3, NUM_CELLS)
    mask = np.asarray(mask, bool).reshape(n, NUM_CELLS)
    own, opp = planes[:, 0], planes[:, 1]  # [N, 9]
    empty = (own == 0) & (opp == 0) & mask  # [N, 9]
    empty_f = empty.astype(np.float32)

    def completing(marks: np.ndarray) -> np.ndarray:
        """Empty cells that complete a line holding two of ``marks`` ``[N, 9]``."""
        two = (marks @ _INCIDENCE.T == 2) & (empty_f @ _INCIDENCE.T == 1)  # [N, 8]
        return ((two.astype(np.float32) @ _INCIDENCE) > 0) & empty

    tier = 2.0 * completing(own) + 1.0 * completing(opp)  # [N, 9] in {0, 1, 2, 3}
    keys = tier + 0.5 * rng.random((n, NUM_CELLS))
    keys[~mask] = -1.0
    return keys.argmax(axis=-1).astype(np.int64)
