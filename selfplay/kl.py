"""The KL divergence of two batches of masked action distributions (:mod:`selfplay.distributions`).

A run started from another network keeps its policy near that network, the frozen teacher,
with a penalty ``KL(teacher || policy)`` (``ppo.teacher_kl_coef``, :mod:`selfplay.learning`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from selfplay.distributions import (
    ActionDist,
    DiagGaussian,
    MaskedCategorical,
    MaskedMultiCategorical,
)

__all__ = ["kl_divergence"]


def kl_divergence(p: ActionDist, q: ActionDist) -> Tensor:
    """``KL(p || q)`` ``[B]`` of two batches of distributions of one action space built over
    the same masks (a teacher's ``p`` and a learner's ``q`` on the same observations).

    Masked: only legal values count (illegal ones have probability 0 under both); a
    categorical, component or grid cell with no legal value contributes 0. Multi-discrete
    spaces sum over components and cells; with ``gates``, the KL of the gated joint
    distribution: ``KL(type) + sum_i P_p(type uses i) * KL(component i)``, the type's
    probabilities taken from ``p``. Diagonal Gaussians: the closed form, summed over dims.
    Differentiable in both arguments (detach ``p`` to pull ``q`` toward it).
    """
    if isinstance(p, MaskedCategorical) and isinstance(q, MaskedCategorical):
        if p.logits.shape != q.logits.shape:
            raise ValueError(f"distributions of shapes {tuple(p.logits.shape)} and "
                             f"{tuple(q.logits.shape)}")
        kl = (p.probs * (p.log_probs - q.log_probs)).sum(-1)  # [B]; illegal terms 0 * finite
        return kl if p.has_legal is None else torch.where(p.has_legal, kl, 0.0)
    if isinstance(p, MaskedMultiCategorical) and isinstance(q, MaskedMultiCategorical):
        return _multi_categorical_kl(p, q)
    if isinstance(p, DiagGaussian) and isinstance(q, DiagGaussian):
        var_ratio = torch.exp(2.0 * (p.log_std - q.log_std))  # [B, d]
        t = (p.mean - q.mean) * torch.exp(-q.log_std)
        return (0.5 * (var_ratio + t.square() - 1.0) - (p.log_std - q.log_std)).sum(-1)
    raise TypeError(f"no KL between {type(p).__name__} and {type(q).__name__}")


def _multi_categorical_kl(p: MaskedMultiCategorical, q: MaskedMultiCategorical) -> Tensor:
    """``[B]``: per component of each kept row (cell), weighted by ``p``'s chance that its
    action type uses the component (with gates) or counted where it has a legal value."""
    if p.nvec != q.nvec or p.logits[0].shape != q.logits[0].shape:
        raise ValueError("KL of multi-discrete distributions needs one space and the same "
                         "mask (the same rows kept)")
    kl = torch.stack([(pp * (lp - lq)).sum(-1) for pp, lp, lq
                      in zip(p.probs, p.log_probs, q.log_probs, strict=True)], -1)  # [M, k]
    if p.gate_table is not None:
        kl = kl * p.expected_use()
    elif p.has_legal is not None:
        kl = torch.where(p.has_legal, kl, 0.0)
    return p.to_batch(kl.sum(-1))
