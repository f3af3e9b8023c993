"""The behaviour-cloning loss: masked cross-entropy of teachers' actions, per cell and component.

A *cell* is one categorical group of a sample: the sample itself for ``Discrete`` and plain
``MultiDiscrete`` spaces, one grid cell for grid spaces. A cell counts where the seat is
imitated and the cell's mask has a legal value (in microRTS: a unit of the imitated side that
can act); in a counted cell, component ``i`` counts where the label's action type uses it (the
space's ``gates``) and has a legal value. The policy loss is the counted components' summed
negative log-likelihood divided by the number of counted cells. A label that the mask forbids
(a bookkeeping bug upstream) is left out of the sum and counted in ``illegal``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from selfplay.distributions import ActionDist, MaskedCategorical, MaskedMultiCategorical

__all__ = ["CloneTerms", "clone_terms"]


class CloneTerms(NamedTuple):
    """Sums over one batch (detached except ``nll``); divide ``nll`` by ``cells`` for the loss."""

    nll: Tensor  # scalar: summed negative log-likelihood of the counted components
    cells: Tensor  # scalar: counted cells
    used: Tensor  # [k] counted cells whose label uses component i
    correct: Tensor  # [k] ... where the most likely value is the label's
    exact: Tensor  # scalar: counted cells with every used component right
    illegal: Tensor  # scalar: used components whose label the mask forbids

    def loss(self) -> Tensor:
        """The policy loss: mean negative log-likelihood per counted cell."""
        return self.nll / self.cells.clamp_min(1.0)


def clone_terms(dist: ActionDist, labels: Tensor, imitated: Tensor) -> CloneTerms:
    """The cloning sums of ``labels`` ``[B, *action_shape]`` under ``dist`` (a batch of ``B``
    masked distributions from :func:`selfplay.distributions.make_dist`), counting only the
    samples where ``imitated`` (bool ``[B]``)."""
    if isinstance(dist, MaskedCategorical):
        acts = labels.long().reshape(-1, 1)  # [B, 1]
        cells = imitated if dist.has_legal is None else imitated & dist.has_legal  # [B]
        used = cells[:, None]  # [B, 1]
        log_probs, logits = [dist.log_probs], [dist.logits]
        masks = None if dist.mask is None else [dist.mask]
    elif isinstance(dist, MaskedMultiCategorical):
        k = len(dist.nvec)
        acts = labels.long().reshape(dist.num_rows, k)  # [R, k]
        rows = dist.rows  # the cells with a legal value, where the others were dropped
        if rows is None:
            rows = torch.arange(dist.num_rows, device=acts.device)
        else:
            acts = acts[rows]
        row_sample = torch.div(rows, dist.cells or 1, rounding_mode="floor")  # [M]
        cells = imitated[row_sample]  # [M]
        used = cells[:, None].expand(-1, k)  # [M, k]
        if dist.has_legal is not None:
            cells = cells & dist.has_legal.any(-1)
            used = used & dist.has_legal
        if dist.gate_table is not None:
            used = used & dist.gate_table[acts[:, 0]]
        log_probs, logits, masks = dist.log_probs, dist.logits, dist.masks
    else:
        raise TypeError(f"behaviour cloning needs discrete actions, not {type(dist).__name__}")
    picked = torch.stack([lp.gather(-1, acts[:, i:i + 1])[:, 0]
                          for i, lp in enumerate(log_probs)], -1)  # [M, k]
    counted = used
    if masks is not None:
        legal = torch.stack([m.gather(-1, acts[:, i:i + 1])[:, 0]
                             for i, m in enumerate(masks)], -1)  # [M, k]
        counted = used & legal
    nll = -torch.where(counted, picked, 0.0).sum()
    with torch.no_grad():
        best = torch.stack([lg.argmax(-1) for lg in logits], -1)  # [M, k]
        right = (best == acts) & used
        return CloneTerms(
            nll=nll,
            cells=cells.sum().to(picked.dtype),
            used=used.sum(0).to(picked.dtype),
            correct=right.sum(0).to(picked.dtype),
            exact=(cells & (right | ~used).all(-1)).sum().to(picked.dtype),
            illegal=(used & ~counted).sum().to(picked.dtype),
        )
