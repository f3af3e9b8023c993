"""Masked action distributions: legality, frequencies, entropy, gating, gradients, determinism."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from dist_helpers import NVEC, grid_case, make_gen, random_mask

from games.core import Box, Discrete, MultiDiscrete
from selfplay.distributions import (
    DiagGaussian,
    GridMaskIndex,
    MaskedCategorical,
    MaskedMultiCategorical,
    _any,
    make_dist,
    num_params,
    param_shape,
)


def _legal_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy of the softmax renormalized over the legal values (1-D inputs), by hand."""
    legal = logits[mask].double()
    p = torch.exp(legal - legal.max())
    p = p / p.sum()
    return -(p * p.log()).sum()


def _chi2(counts: torch.Tensor, probs: torch.Tensor) -> tuple[float, int]:
    """Pearson chi-square of ``counts`` against ``probs`` over the cells with ``probs > 0``."""
    keep = probs > 0
    n = counts.sum().double()
    expected = probs[keep].double() * n
    stat = ((counts[keep].double() - expected) ** 2 / expected).sum().item()
    return stat, int(keep.sum()) - 1


def _chi2_ok(stat: float, dof: int) -> bool:
    # mean dof, sd sqrt(2 dof): 6 sd is far beyond chance for these fixed seeds
    return stat < dof + 6.0 * math.sqrt(2.0 * max(dof, 1)) + 10.0


# --------------------------------------------------------------------------- Discrete


def test_discrete_sampling_is_legal_and_matches_softmax_over_legal() -> None:
    gen = make_gen(1)
    rows, n, per_row = 5, 7, 20_000  # 10^5 samples
    logits = torch.randn(rows, n, generator=gen) * 2
    mask = random_mask((rows, n), gen)
    mask[:, 3] = True  # every row has a legal action
    dist = MaskedCategorical(
        logits.repeat_interleave(per_row, 0), mask.repeat_interleave(per_row, 0)
    )
    actions = dist.sample(make_gen(2)).view(rows, per_row)
    assert actions.dtype == torch.int64
    for r in range(rows):
        assert mask[r][actions[r]].all(), "sampled an illegal action"
        probs = torch.softmax(logits[r].masked_fill(~mask[r], -math.inf), -1)
        counts = torch.bincount(actions[r], minlength=n)
        stat, dof = _chi2(counts, probs)
        assert _chi2_ok(stat, dof), (r, stat, dof)


def test_discrete_entropy_and_log_prob_ignore_illegal_logits() -> None:
    gen = make_gen(3)
    logits = torch.randn(6, 5, generator=gen)
    mask = random_mask((6, 5), gen)
    mask[:, 0] = True
    mask[:, 4] = False
    dist = MaskedCategorical(logits, mask)
    for r in range(6):
        expected = _legal_entropy(logits[r], mask[r])
        assert dist.entropy()[r].item() == pytest.approx(expected.item(), abs=1e-5)
    assert (dist.probs[~mask] == 0).all()

    changed = logits.clone()
    changed[:, 4] = 50.0  # an illegal logit, even a huge one, changes nothing
    other = MaskedCategorical(changed, mask)
    actions = torch.zeros(6, dtype=torch.long)
    torch.testing.assert_close(other.entropy(), dist.entropy())
    torch.testing.assert_close(other.log_prob(actions), dist.log_prob(actions))
    torch.testing.assert_close(other.mode(), dist.mode())


def test_discrete_unmasked_matches_torch_categorical() -> None:
    gen = make_gen(4)
    logits = torch.randn(8, 6, generator=gen)
    actions = torch.randint(0, 6, (8,), generator=gen)
    ours = MaskedCategorical(logits, None)
    ref = torch.distributions.Categorical(logits=logits)
    torch.testing.assert_close(ours.log_prob(actions), ref.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), ref.entropy())


def test_discrete_row_without_legal_action() -> None:
    logits = torch.randn(3, 4, generator=make_gen(5))
    mask = torch.ones(3, 4, dtype=torch.bool)
    mask[1] = False
    dist = MaskedCategorical(logits, mask)
    for seed in range(20):
        assert dist.sample(make_gen(seed))[1].item() == 0
    assert dist.mode()[1].item() == 0
    assert dist.log_prob(torch.zeros(3, dtype=torch.long))[1].item() == 0.0
    assert dist.entropy()[1].item() == 0.0


def test_discrete_gradients_finite_and_zero_on_illegal_logits() -> None:
    gen = make_gen(6)
    logits = torch.randn(16, 9, generator=gen, requires_grad=True)
    mask = random_mask((16, 9), gen, p=0.3)
    mask[0] = False  # one row with nothing legal
    dist = MaskedCategorical(logits, mask)
    actions = dist.sample(gen)
    (dist.log_prob(actions).sum() + dist.entropy().sum()).backward()
    assert logits.grad is not None
    assert torch.isfinite(logits.grad).all()
    assert (logits.grad[~mask] == 0).all()


# --------------------------------------------------------------------------- MultiDiscrete


def _legal(actions: torch.Tensor, mask: torch.Tensor, nvec: tuple[int, ...]) -> torch.Tensor:
    """bool ``[..., k]``: is each component's value legal (or 0 where nothing is legal)."""
    out = []
    for i, part in enumerate(mask.split(nvec, -1)):
        has = part.any(-1)
        picked = part.gather(-1, actions[..., i : i + 1])[..., 0]
        out.append(torch.where(has, picked, actions[..., i] == 0))
    return torch.stack(out, -1)


def test_grid_sampling_never_illegal() -> None:
    logits, mask, gen = grid_case(batch=40, cells=25, seed=7)
    space = MultiDiscrete(NVEC, grid=(5, 5))
    dist = make_dist(space, logits, mask)
    for _ in range(100):  # 100 x 1000 cells = 10^5 cell samples
        actions = dist.sample(gen)
        assert actions.shape == (40, 25, 3)
        assert _legal(actions, mask, NVEC).all()
    empty = ~mask.any(-1)
    assert (actions[empty] == 0).all()


def test_grid_frequencies_match_softmax_over_legal() -> None:
    gen = make_gen(8)
    total = sum(NVEC)
    logits = torch.randn(2, total, generator=gen)  # two distinct cells
    mask = random_mask((2, total), gen, p=0.7)
    mask[:, [0, 3, 7]] = True  # each component has a legal value
    reps = 25_000  # 50,000 samples of the cell pair, 10^5 cell samples
    space = MultiDiscrete(NVEC, cells=2)
    dist = make_dist(space, logits[None].expand(reps, 2, total), mask[None].expand(reps, 2, total))
    actions = dist.sample(gen)  # [reps, 2, 3]
    for cell in range(2):
        for i, (lg, mk) in enumerate(
            zip(logits[cell].split(NVEC), mask[cell].split(NVEC), strict=True)
        ):
            probs = torch.softmax(lg.masked_fill(~mk, -math.inf), -1)
            counts = torch.bincount(actions[:, cell, i], minlength=NVEC[i])
            stat, dof = _chi2(counts, probs)
            assert _chi2_ok(stat, dof), (cell, i, stat, dof)
            assert counts[~mk].sum() == 0


def test_multi_entropy_is_sum_of_legal_component_entropies() -> None:
    logits, mask, _ = grid_case(batch=3, cells=4, seed=9)
    dist = MaskedMultiCategorical(logits, mask, NVEC, cells=4)
    expected = torch.zeros(3, dtype=torch.float64)
    for b, c in itertools.product(range(3), range(4)):
        for lg, mk in zip(logits[b, c].split(NVEC), mask[b, c].split(NVEC), strict=True):
            if mk.any():
                expected[b] += _legal_entropy(lg, mk)
    torch.testing.assert_close(dist.entropy().double(), expected, atol=1e-5, rtol=1e-5)

    changed = logits.masked_fill(~mask, 30.0)  # illegal logits change nothing
    other = MaskedMultiCategorical(changed, mask, NVEC, cells=4)
    actions = dist.mode()
    torch.testing.assert_close(other.entropy(), dist.entropy())
    torch.testing.assert_close(other.log_prob(actions), dist.log_prob(actions))


def test_multi_unmasked_matches_torch_categoricals() -> None:
    gen = make_gen(10)
    logits = torch.randn(6, sum(NVEC), generator=gen)
    dist = make_dist(MultiDiscrete(NVEC), logits, None)
    actions = dist.sample(gen)
    assert actions.shape == (6, 3)
    refs = [torch.distributions.Categorical(logits=p) for p in logits.split(NVEC, -1)]
    ref_lp = sum(r.log_prob(actions[:, i]) for i, r in enumerate(refs))
    ref_ent = sum(r.entropy() for r in refs)
    torch.testing.assert_close(dist.log_prob(actions), ref_lp)
    torch.testing.assert_close(dist.entropy(), ref_ent)


def test_grid_sampling_stays_legal_when_the_uniform_draw_is_zero(monkeypatch) -> None:
    """Gumbel-max draws: a uniform 0 (torch.rand returns it about once in 2^24) must not turn
    into -inf noise that lets an illegal value beat a component's only legal one."""
    total = sum(NVEC)
    logits = torch.zeros(1, 2, total)
    mask = torch.zeros(1, 2, total, dtype=torch.bool)
    mask[0, :, [2, 5, 11]] = True  # one legal value per component, none of them value 0
    dist = MaskedMultiCategorical(logits, mask, NVEC, cells=2)
    real_rand = torch.rand
    monkeypatch.setattr(torch, "rand", lambda *a, **k: torch.zeros_like(real_rand(*a, **k)))
    actions = dist.sample(make_gen(0))
    assert actions[0].tolist() == [[2, 2, 4]] * 2  # columns 2, 5, 11 of (3, 4, 5)
    assert torch.isfinite(dist.log_prob(actions)).all()


def test_grid_all_masked_cells_and_components_contribute_nothing() -> None:
    gen = make_gen(11)
    total = sum(NVEC)
    logits = torch.randn(2, 3, total, generator=gen)
    mask = torch.ones(2, 3, total, dtype=torch.bool)
    mask[0, 1] = False  # a whole cell
    mask[1, 2, 3:7] = False  # component 1 of one cell
    dist = MaskedMultiCategorical(logits, mask, NVEC, cells=3)
    actions = dist.sample(gen)
    assert (actions[0, 1] == 0).all() and actions[1, 2, 1] == 0
    # same totals as a distribution over the remaining cells/components only
    keep = MaskedMultiCategorical(logits[0, [0, 2]][None], mask[0, [0, 2]][None], NVEC, cells=2)
    assert dist.log_prob(actions)[0].item() == pytest.approx(
        keep.log_prob(actions[0, [0, 2]][None]).item(), abs=1e-5
    )
    assert dist.entropy()[0].item() == pytest.approx(keep.entropy().item(), abs=1e-5)
    # a batch row whose every cell is empty
    empty = MaskedMultiCategorical(logits, torch.zeros_like(mask), NVEC, cells=3)
    assert (empty.sample(gen) == 0).all() and (empty.mode() == 0).all()
    assert (empty.log_prob(actions) == 0).all() and (empty.entropy() == 0).all()


def test_grid_compact_equals_dense() -> None:
    logits, mask, gen = grid_case(batch=6, cells=16, seed=12)
    space = MultiDiscrete(NVEC, cells=16, gates=(None, (1, 2), (2,)))
    dense = make_dist(space, logits, mask, compact=False)
    compact = make_dist(space, logits, mask, compact=True)
    assert isinstance(compact, MaskedMultiCategorical) and compact.rows is not None
    actions = dense.sample(gen)
    torch.testing.assert_close(compact.log_prob(actions), dense.log_prob(actions))
    torch.testing.assert_close(compact.entropy(actions), dense.entropy(actions))
    torch.testing.assert_close(compact.entropy(), dense.entropy())
    torch.testing.assert_close(compact.mode(), dense.mode())


def test_a_minibatch_of_a_grid_mask_index_equals_its_dense_masks() -> None:
    """A rollout's masks indexed once, a minibatch's rows selected in random order: exactly the
    dense minibatch's distribution (same values, gradients and samples for a seeded
    generator); a mismatched batch is refused."""
    logits, mask, gen = grid_case(batch=30, cells=16, seed=21)
    space = MultiDiscrete(NVEC, cells=16, gates=(None, (1, 2), (2,)))
    index = GridMaskIndex(mask, cells=16)
    for rows in (torch.randperm(30, generator=gen)[:11], torch.arange(30), torch.tensor([4])):
        params = logits[rows].clone().requires_grad_(True)
        dense = make_dist(space, params, mask[rows])
        picked = make_dist(space, params, index.select(rows))
        actions = dense.sample(make_gen(5))
        assert torch.equal(picked.sample(make_gen(5)), actions)
        assert torch.equal(picked.log_prob(actions), dense.log_prob(actions))
        assert torch.equal(picked.entropy(actions), dense.entropy(actions))
        assert torch.equal(picked.entropy(), dense.entropy())
        assert torch.equal(picked.mode(), dense.mode())
        grad_dense, = torch.autograd.grad(dense.log_prob(actions).sum(), params)
        grad_picked, = torch.autograd.grad(picked.log_prob(actions).sum(), params)
        assert torch.equal(grad_picked, grad_dense)
    with pytest.raises(ValueError, match="CompactGridMask of 3 rows"):
        make_dist(space, logits[:4], index.select(torch.arange(3)))
    with pytest.raises(ValueError, match="needs a grid action space"):
        make_dist(MultiDiscrete(NVEC), logits[:3, 0], index.select(torch.arange(3)))


def test_grid_gradients_finite_and_zero_on_illegal_logits() -> None:
    logits, mask, gen = grid_case(batch=4, cells=9, seed=13)
    logits.requires_grad_(True)
    space = MultiDiscrete(NVEC, grid=(3, 3), gates=(None, (1,), None))
    dist = make_dist(space, logits.view(4, -1), mask.view(4, -1))  # flat params are accepted
    actions = dist.sample(gen)
    (dist.log_prob(actions).sum() + dist.entropy().sum() + dist.entropy(actions).sum()).backward()
    assert logits.grad is not None
    assert torch.isfinite(logits.grad).all()
    assert (logits.grad[~mask] == 0).all()


# --------------------------------------------------------------------------- gating

GATED = MultiDiscrete((3, 4, 5), gates=(None, (1,), (1, 2)))  # type 0 uses nothing else


def test_gated_log_prob_excludes_unused_components() -> None:
    gen = make_gen(14)
    logits = torch.randn(3, 12, generator=gen)
    actions = torch.tensor([[0, 2, 3], [1, 2, 3], [2, 2, 3]])
    base = make_dist(GATED, logits, None).log_prob(actions)

    bumped_1 = logits.clone()
    bumped_1[:, 3:7] = torch.randn(3, 4, generator=gen) * 3  # component 1: used by type 1 only
    lp_1 = make_dist(GATED, bumped_1, None).log_prob(actions)
    assert lp_1[0] == base[0] and lp_1[2] == base[2]
    assert lp_1[1] != base[1]

    bumped_2 = logits.clone()
    bumped_2[:, 7:] = torch.randn(3, 5, generator=gen) * 3  # component 2: types 1 and 2
    lp_2 = make_dist(GATED, bumped_2, None).log_prob(actions)
    assert lp_2[0] == base[0]
    assert lp_2[1] != base[1] and lp_2[2] != base[2]

    # by hand: type 0 -> log p0(0) only
    p0 = logits[0, :3].log_softmax(-1)
    assert base[0].item() == pytest.approx(p0[0].item(), abs=1e-6)


def test_gated_entropy_given_actions_counts_used_components_only() -> None:
    gen = make_gen(15)
    logits = torch.randn(3, 12, generator=gen)
    dist = make_dist(GATED, logits, None)
    actions = torch.tensor([[0, 0, 0], [1, 0, 0], [2, 0, 0]])
    ent = dist.entropy(actions)
    h = [torch.distributions.Categorical(logits=p).entropy() for p in logits.split(GATED.nvec, -1)]
    torch.testing.assert_close(
        ent, torch.stack([h[0][0], h[0][1] + h[1][1] + h[2][1], h[0][2] + h[2][2]])
    )


def test_gated_expected_entropy_is_the_joint_entropy() -> None:
    """entropy() without actions = entropy of the joint (type, used components) distribution."""
    gen = make_gen(16)
    nvec = (3, 2, 3)
    space = MultiDiscrete(nvec, gates=(None, (1,), (1, 2)))
    logits = torch.randn(2, sum(nvec), generator=gen).double()
    mask = torch.ones(2, sum(nvec), dtype=torch.bool)
    mask[1, 2] = False  # type 2 illegal in row 1
    mask[1, 5] = False  # one value of component 2 illegal in row 1
    dist = make_dist(space, logits, mask)
    for b in range(2):
        probs = [
            torch.softmax(lg.masked_fill(~mk, -math.inf), -1).tolist()
            for lg, mk in zip(logits[b].split(nvec), mask[b].split(nvec), strict=True)
        ]
        gates = [(), (1,), (1, 2)]
        joint = 0.0
        for t in range(nvec[0]):
            used = [i for i in (1, 2) if t in gates[i]]
            for values in itertools.product(*(range(nvec[i]) for i in used)):
                p = probs[0][t] * math.prod(probs[i][v] for i, v in zip(used, values, strict=True))
                if p > 0:
                    joint -= p * math.log(p)
        assert dist.entropy()[b].item() == pytest.approx(joint, abs=1e-9)


# --------------------------------------------------------------------------- Box


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_a_temperature_samples_the_sharpened_or_flattened_softmax(temperature: float) -> None:
    """``sample(temperature=T)`` draws from ``softmax(logits / T)`` over the legal values, for
    plain and grid (multi-)categoricals, and never an illegal value; a Gaussian's spread
    scales by ``T``."""
    gen = make_gen(31)
    n, reps = 6, 40_000
    logits = torch.randn(n, generator=gen) * 1.5
    mask = torch.tensor([True, False, True, True, False, True])

    def expected(lg: torch.Tensor, mk: torch.Tensor) -> torch.Tensor:
        return torch.softmax((lg / temperature).masked_fill(~mk, -math.inf), -1)

    plain = MaskedCategorical(logits.expand(reps, n), mask.expand(reps, n))
    counts = torch.bincount(plain.sample(make_gen(32), temperature=temperature), minlength=n)
    assert counts[~mask].sum() == 0
    assert _chi2_ok(*_chi2(counts, expected(logits, mask)))

    total = sum(NVEC)
    grid_logits = torch.randn(total, generator=gen) * 1.5
    grid_mask = random_mask((total,), gen, p=0.7)
    grid_mask[[0, 3, 7]] = True
    space = MultiDiscrete(NVEC, cells=1)
    grid = make_dist(space, grid_logits.expand(reps, 1, total), grid_mask.expand(reps, 1, total))
    actions = grid.sample(make_gen(33), temperature=temperature)[:, 0]
    for i, (lg, mk) in enumerate(zip(grid_logits.split(NVEC), grid_mask.split(NVEC),
                                     strict=True)):
        counts = torch.bincount(actions[:, i], minlength=NVEC[i])
        assert counts[~mk].sum() == 0
        assert _chi2_ok(*_chi2(counts, expected(lg, mk))), i

    log_std = torch.tensor([-0.5, 0.0, 0.7])
    draws = DiagGaussian(torch.zeros(50_000, 3), log_std).sample(gen, temperature=temperature)
    torch.testing.assert_close(draws.std(0), log_std.exp() * temperature, rtol=0.03, atol=0.0)


@pytest.mark.parametrize("temperature", [0.0, -1.0, math.inf, math.nan])
def test_a_temperature_must_be_positive(temperature: float) -> None:
    dist = MaskedCategorical(torch.zeros(2, 3))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        dist.sample(temperature=temperature)
    grid = make_dist(MultiDiscrete(NVEC, cells=1), torch.zeros(2, 1, sum(NVEC)), None)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        grid.sample(temperature=temperature)


def test_diag_gaussian_matches_torch_normal() -> None:
    gen = make_gen(17)
    mean = torch.randn(5, 3, generator=gen)
    log_std = torch.tensor([-0.5, 0.0, 0.7])
    dist = make_dist(Box((-1.0,) * 3, (1.0,) * 3), mean, None, log_std)
    actions = torch.randn(5, 3, generator=gen) * 2
    ref = torch.distributions.Normal(mean, log_std.exp())
    torch.testing.assert_close(dist.log_prob(actions), ref.log_prob(actions).sum(-1))
    torch.testing.assert_close(dist.entropy(), ref.entropy().sum(-1))
    torch.testing.assert_close(dist.mode(), mean)

    big = DiagGaussian(torch.zeros(50_000, 3), log_std)
    draws = big.sample(gen)
    torch.testing.assert_close(draws.std(0), log_std.exp(), rtol=0.03, atol=0.0)
    assert draws.mean(0).abs().max() < 0.05


def test_diag_gaussian_log_std_gets_gradients() -> None:
    mean = torch.zeros(4, 2, requires_grad=True)
    log_std = torch.zeros(2, requires_grad=True)
    dist = DiagGaussian(mean, log_std)
    (dist.log_prob(torch.ones(4, 2)).sum() + dist.entropy().sum()).backward()
    assert log_std.grad is not None and mean.grad is not None
    assert torch.isfinite(log_std.grad).all()


# --------------------------------------------------------------------------- shared


@pytest.mark.parametrize(
    "space",
    [
        Discrete(5),
        MultiDiscrete(NVEC),
        MultiDiscrete(NVEC, grid=(2, 3)),
        Box((0.0,) * 2, (1.0,) * 2),
    ],
    ids=["discrete", "multi", "grid", "box"],
)
def test_seeded_generator_is_deterministic(space: Discrete | MultiDiscrete | Box) -> None:
    params = torch.randn(32, num_params(space), generator=make_gen(18))
    log_std = torch.zeros(2) if isinstance(space, Box) else None
    mask = None
    if not isinstance(space, Box):
        mask = random_mask((32, *space.mask_shape), make_gen(19), p=0.7)
    dist = make_dist(space, params, mask, log_std)
    a = dist.sample(make_gen(20))
    b = dist.sample(make_gen(20))
    c = dist.sample(make_gen(21))
    assert a.shape == (32, *space.action_shape)
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert dist.log_prob(a).shape == (32,) and dist.entropy().shape == (32,)


def test_num_params_and_param_shape() -> None:
    assert num_params(Discrete(7)) == 7 and param_shape(Discrete(7)) == (7,)
    assert num_params(MultiDiscrete((6, 4, 49))) == 59
    grid = MultiDiscrete((6, 4, 4, 4, 4, 7, 49), grid=(16, 16))
    assert param_shape(grid) == (256, 78) and num_params(grid) == 256 * 78
    assert num_params(Box((0.0,) * 3, (1.0,) * 3)) == 3


def test_make_dist_errors_name_the_fix() -> None:
    with pytest.raises(ValueError, match="log_std"):
        make_dist(Box((0.0,), (1.0,)), torch.zeros(2, 1), None)
    with pytest.raises(ValueError, match=r"needs \[B, 256, 78\]"):
        make_dist(MultiDiscrete((6, 4, 4, 4, 4, 7, 49), grid=(16, 16)), torch.zeros(2, 77), None)
    with pytest.raises(ValueError, match=r"mask has shape \(2, 4\)"):
        make_dist(Discrete(5), torch.zeros(2, 5), torch.ones(2, 4, dtype=torch.bool))


@pytest.mark.parametrize("width", [0, 1, 2, 3, 4, 6, 7, 8, 16, 78])
def test_row_any_matches_torch_any(width: int) -> None:
    """The word-wise ``any`` agrees with ``Tensor.any`` for every row width and layout."""
    gen = torch.Generator().manual_seed(width)
    mask = torch.rand((40, 3, width), generator=gen) < 0.05
    mask[0] = True
    mask[1] = False
    assert torch.equal(_any(mask), mask.any(-1))
    transposed = mask.transpose(0, 1)  # rows that are not contiguous in memory
    assert torch.equal(_any(transposed), transposed.any(-1))


def test_row_any_of_a_view_with_an_odd_storage_offset() -> None:
    """A contiguous view that starts at an odd byte still gives the right rows."""
    base = torch.rand(1, 2 + 5 * 8) < 0.3
    view = base[0, 2:].view(5, 8)
    assert view.is_contiguous() and view.storage_offset() % 2 == 0
    odd = (torch.rand(1, 1 + 5 * 8) < 0.3)[0, 1:].view(5, 8)
    assert torch.equal(_any(odd), odd.any(-1))
    assert torch.equal(_any(view), view.any(-1))
