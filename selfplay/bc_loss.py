"""The behaviour-cloning loss: masked cross-entropy of teachers' actions, per cell and component.

A *cell* is one categorical group of a sample: the sample itself for ``Discrete`` and plain
``MultiDiscrete`` spaces, one grid cell for grid spaces. A cell counts where the seat is
imitated and the cell's mask has a legal value (in microRTS: a unit of the imitated side that
can act); in a counted cell, component ``i`` counts where the label's action type uses it (the
space's ``gates``) and has a legal value. The policy loss is the counted components' summed
negative log-likelihood divided by the number of counted cells. A label that the mask forbids
(a bookkeeping bug upstream) is left out of the sum and counted in ``illegal``.

With ``weights`` (:func:`balance_weights`), each counted component's term is weighted by its
label's value: rare decisive labels (microRTS's produce orders among no-ops, Lux's builds and
watering among "none") then weigh more than their share. The counted labels of each value, and
how many of them the most likely value got right, are summed too (``values``,
``values_right``): what the weights are computed from, and the balanced accuracy.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor

from selfplay.distributions import ActionDist, MaskedCategorical, MaskedMultiCategorical

__all__ = ["CloneTerms", "balance_weights", "clone_confusion", "clone_terms"]


class CloneTerms(NamedTuple):
    """Sums over one batch (detached except ``nll``); divide ``nll`` by ``cells`` for the loss."""

    nll: Tensor  # scalar: summed negative log-likelihood of the counted components
    cells: Tensor  # scalar: counted cells
    used: Tensor  # [k] counted cells whose label uses component i
    correct: Tensor  # [k] ... where the most likely value is the label's
    exact: Tensor  # scalar: counted cells with every used component right
    illegal: Tensor  # scalar: used components whose label the mask forbids
    values: Tensor  # [sum(nvec)] counted labels of each value (components concatenated)
    values_right: Tensor  # [sum(nvec)] ... where the most likely value is the label's
    weight: Tensor  # scalar: counted cells, each by its sample's weight (``cells`` without)

    def loss(self) -> Tensor:
        """The policy loss: mean negative log-likelihood per counted cell (weighted by the
        samples' weights where given)."""
        return self.nll / self.weight.clamp_min(1e-8)


def balance_weights(counts: Tensor, sizes: list[int], power: float) -> Tensor:
    """``[sum(sizes)]`` label weights from ``counts`` of each value (components of ``sizes``
    values, concatenated): per component, ``share ** -power`` (shares with one label added to
    every value), scaled so that labels drawn at those shares weigh 1 on average. ``power`` 0:
    all 1; 1: each value's labels weigh as much in all as any other value's."""
    out = []
    for part in torch.split(counts.double() + 1.0, sizes):
        share = part / part.sum()
        weight = share.pow(-power)
        out.append(weight / (share * weight).sum())
    return torch.cat(out).to(torch.float32)


class _Rows(NamedTuple):
    """The rows (cells) of a batch's distribution that cloning counts, with their labels."""

    acts: Tensor  # [M, k] the labels
    cells: Tensor  # [M] rows counted
    used: Tensor  # [M, k] ... whose label uses component i
    counted: Tensor  # [M, k] ... and the mask allows the label
    row_weight: Tensor | None  # [M] each row's sample weight
    log_probs: list[Tensor]  # k x [M, n_i]
    logits: list[Tensor]  # k x [M, n_i] (masked)


def _counted_rows(dist: ActionDist, labels: Tensor, imitated: Tensor,
                  sample_weights: Tensor | None) -> _Rows:
    """``dist``'s rows with ``labels``, the imitated samples' cells that have a legal value and
    the components their labels use (:func:`clone_terms`, :func:`clone_confusion`)."""
    if isinstance(dist, MaskedCategorical):
        acts = labels.long().reshape(-1, 1)  # [B, 1]
        cells = imitated if dist.has_legal is None else imitated & dist.has_legal  # [B]
        row_weight = sample_weights
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
        row_weight = None if sample_weights is None else sample_weights[row_sample]
        used = cells[:, None].expand(-1, k)  # [M, k]
        if dist.has_legal is not None:
            cells = cells & dist.has_legal.any(-1)
            used = used & dist.has_legal
        if dist.gate_table is not None:
            used = used & dist.gate_table[acts[:, 0]]
        log_probs, logits, masks = dist.log_probs, dist.logits, dist.masks
    else:
        raise TypeError(f"behaviour cloning needs discrete actions, not {type(dist).__name__}")
    counted = used
    if masks is not None:
        legal = torch.stack([m.gather(-1, acts[:, i:i + 1])[:, 0]
                             for i, m in enumerate(masks)], -1)  # [M, k]
        counted = used & legal
    return _Rows(acts, cells, used, counted, row_weight, log_probs, logits)


def clone_confusion(dist: ActionDist, labels: Tensor, imitated: Tensor | None = None
                    ) -> list[Tensor]:
    """Per component ``i``, ``int64 [n_i, n_i]``: how often a counted label of value ``a``
    (:func:`clone_terms`' counted cells and components) had ``b`` as the most likely value
    (row ``a``, column ``b``; the diagonal is :attr:`CloneTerms.values_right`)."""
    if imitated is None:
        imitated = torch.ones(labels.shape[0], dtype=torch.bool, device=labels.device)
    rows = _counted_rows(dist, labels, imitated, None)
    out = []
    with torch.no_grad():
        for i, lg in enumerate(rows.logits):
            n = lg.shape[-1]
            keep = rows.counted[:, i]
            pairs = rows.acts[keep, i] * n + lg.argmax(-1)[keep]
            out.append(torch.bincount(pairs, minlength=n * n).view(n, n))
    return out


def clone_terms(dist: ActionDist, labels: Tensor, imitated: Tensor,
                weights: Tensor | None = None, sample_weights: Tensor | None = None
                ) -> CloneTerms:
    """The cloning sums of ``labels`` ``[B, *action_shape]`` under ``dist`` (a batch of ``B``
    masked distributions from :func:`selfplay.distributions.make_dist`), counting only the
    samples where ``imitated`` (bool ``[B]``); ``weights`` ``[sum(nvec)]`` weigh each counted
    term by its label's value (:func:`balance_weights`), ``sample_weights`` ``[B]`` each
    sample's terms (its cells count that much in the mean)."""
    rows = _counted_rows(dist, labels, imitated, sample_weights)
    acts, cells, used, counted = rows.acts, rows.cells, rows.used, rows.counted
    row_weight, log_probs, logits = rows.row_weight, rows.log_probs, rows.logits
    picked = torch.stack([lp.gather(-1, acts[:, i:i + 1])[:, 0]
                          for i, lp in enumerate(log_probs)], -1)  # [M, k]
    sizes = [lg.shape[-1] for lg in logits]
    starts = torch.tensor([0, *sizes[:-1]], device=acts.device).cumsum(0)
    flat = acts + starts  # [M, k] each label's index among every component's values
    terms = torch.where(counted, picked, 0.0)
    if weights is not None:
        terms = terms * weights[flat]
    if row_weight is not None:
        terms = terms * row_weight.to(terms.dtype)[:, None]
    nll = -terms.sum()
    with torch.no_grad():
        best = torch.stack([lg.argmax(-1) for lg in logits], -1)  # [M, k]
        right = (best == acts) & used
        total = sum(sizes)
        return CloneTerms(
            nll=nll,
            cells=cells.sum().to(picked.dtype),
            used=used.sum(0).to(picked.dtype),
            correct=right.sum(0).to(picked.dtype),
            exact=(cells & (right | ~used).all(-1)).sum().to(picked.dtype),
            illegal=(used & ~counted).sum().to(picked.dtype),
            values=torch.bincount(flat[counted], minlength=total).to(picked.dtype),
            values_right=torch.bincount(flat[counted & right],
                                        minlength=total).to(picked.dtype),
            weight=(cells.sum().to(picked.dtype) if row_weight is None else
                    (row_weight.to(picked.dtype) * cells).sum()),
        )
