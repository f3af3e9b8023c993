"""KL(p || q) of masked action distributions (:mod:`selfplay.kl`) against torch's KL of the
-inf-masked categoricals and against enumerated joint distributions of gated components."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from dist_helpers import NVEC, grid_case, make_gen, random_mask

from games.core import MultiDiscrete
from selfplay.distributions import DiagGaussian, MaskedCategorical, make_dist
from selfplay.kl import kl_divergence


def _joint(logits: torch.Tensor, mask: torch.Tensor, nvec: tuple[int, ...],
           gates: list[tuple[int, ...]]) -> dict[tuple[int, ...], float]:
    """The gated joint distribution of one row, by enumeration: (type, used values) -> p."""
    probs = [torch.softmax(lg.masked_fill(~mk, -math.inf), -1).tolist()
             for lg, mk in zip(logits.split(nvec), mask.split(nvec), strict=True)]
    joint = {}
    for t in range(nvec[0]):
        used = [i for i in range(1, len(nvec)) if t in gates[i]]
        for values in itertools.product(*(range(nvec[i]) for i in used)):
            joint[(t, *values)] = probs[0][t] * math.prod(
                probs[i][v] for i, v in zip(used, values, strict=True))
    return joint


def test_masked_categorical_kl_counts_legal_actions_only() -> None:
    """KL(p || q) of the distributions renormalized over the legal actions (torch's KL of the
    -inf-masked ones); 0 for equal logits and for a row without a legal action; gradients
    finite, none on illegal logits."""
    gen = make_gen(30)
    p_logits, q_logits = torch.randn(5, 6, generator=gen), torch.randn(5, 6, generator=gen)
    mask = random_mask((5, 6), gen)
    mask[:, :2] = True  # two legal actions at least
    mask[4] = False  # no legal action
    q_logits.requires_grad_(True)
    kl = kl_divergence(MaskedCategorical(p_logits, mask), MaskedCategorical(q_logits, mask))
    for r in range(4):
        ref = torch.distributions.kl_divergence(
            torch.distributions.Categorical(logits=p_logits[r].masked_fill(~mask[r], -math.inf)),
            torch.distributions.Categorical(logits=q_logits[r].masked_fill(~mask[r], -math.inf)))
        assert kl[r].item() == pytest.approx(ref.item(), abs=1e-5)
    assert kl[4] == 0 and (kl[:4] > 0).all()
    same = kl_divergence(MaskedCategorical(p_logits, mask), MaskedCategorical(p_logits, mask))
    assert (same == 0).all()
    grad, = torch.autograd.grad(kl.sum(), q_logits)
    assert torch.isfinite(grad).all() and (grad[~mask] == 0).all()


def test_gated_kl_is_the_kl_of_the_joint_distributions() -> None:
    """With gates, the KL of the joint (type, used components) distributions, the types'
    probabilities taken from p; an illegal type and an illegal value count for nothing."""
    gen = make_gen(31)
    nvec = (3, 2, 3)
    gates = [(), (1,), (1, 2)]
    space = MultiDiscrete(nvec, gates=(None, (1,), (1, 2)))
    p_logits = torch.randn(2, sum(nvec), generator=gen).double()
    q_logits = torch.randn(2, sum(nvec), generator=gen).double()
    mask = torch.ones(2, sum(nvec), dtype=torch.bool)
    mask[1, 2] = False  # type 2 illegal in row 1
    mask[1, 5] = False  # one value of component 2 illegal in row 1
    kl = kl_divergence(make_dist(space, p_logits, mask), make_dist(space, q_logits, mask))
    for b in range(2):
        p = _joint(p_logits[b], mask[b], nvec, gates)
        q = _joint(q_logits[b], mask[b], nvec, gates)
        want = sum(pa * math.log(pa / q[a]) for a, pa in p.items() if pa > 0)
        assert kl[b].item() == pytest.approx(want, abs=1e-9)


def test_grid_kl_sums_cells_and_components_compact_or_dense() -> None:
    """Grid actions: the sum over cells and components of the legal values' KL; empty cells
    and components add nothing; the compact and the dense masks give the same values."""
    p_logits, mask, gen = grid_case(batch=3, cells=4, seed=32)
    q_logits = torch.randn(p_logits.shape, generator=gen)
    space = MultiDiscrete(NVEC, cells=4)
    dense = kl_divergence(make_dist(space, p_logits, mask, compact=False),
                          make_dist(space, q_logits, mask, compact=False))
    compact = kl_divergence(make_dist(space, p_logits, mask), make_dist(space, q_logits, mask))
    torch.testing.assert_close(compact, dense)
    want = torch.zeros(3, dtype=torch.float64)
    for b, c in itertools.product(range(3), range(4)):
        for pl, ql, mk in zip(p_logits[b, c].split(NVEC), q_logits[b, c].split(NVEC),
                              mask[b, c].split(NVEC), strict=True):
            if mk.any():
                want[b] += torch.distributions.kl_divergence(
                    torch.distributions.Categorical(logits=pl.masked_fill(~mk, -math.inf)),
                    torch.distributions.Categorical(logits=ql.masked_fill(~mk, -math.inf)))
    torch.testing.assert_close(dense.double(), want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="the same mask"):
        kl_divergence(make_dist(space, p_logits, mask),
                      make_dist(space, q_logits, torch.ones_like(mask)))


def test_diag_gaussian_kl_matches_torch() -> None:
    gen = make_gen(33)
    p = DiagGaussian(torch.randn(4, 3, generator=gen), torch.tensor([-0.5, 0.0, 0.7]))
    q = DiagGaussian(torch.randn(4, 3, generator=gen), torch.tensor([0.2, -0.3, 0.0]))
    ref = torch.distributions.kl_divergence(
        torch.distributions.Normal(p.mean, p.log_std.exp()),
        torch.distributions.Normal(q.mean, q.log_std.exp())).sum(-1)
    torch.testing.assert_close(kl_divergence(p, q), ref)
    assert (kl_divergence(p, p) == 0).all()
    with pytest.raises(TypeError, match="no KL between"):
        kl_divergence(p, MaskedCategorical(torch.zeros(4, 3)))
