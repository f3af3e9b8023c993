"""Random masked logits shared by the distribution tests (``test_distributions``, ``test_kl``)."""

from __future__ import annotations

import torch

NVEC = (3, 4, 5)


def make_gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def random_mask(shape: tuple[int, ...], gen: torch.Generator, p: float = 0.5) -> torch.Tensor:
    return torch.rand(shape, generator=gen) < p


def grid_case(
    batch: int, cells: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Generator]:
    """Grid logits ``[batch, cells, sum(NVEC)]`` and masks with empty cells and components."""
    gen = make_gen(seed)
    total = sum(NVEC)
    logits = torch.randn(batch, cells, total, generator=gen) * 1.5
    mask = random_mask((batch, cells, total), gen, p=0.6)
    mask &= random_mask((batch, cells, 1), gen, p=0.7)  # ~30% cells without any legal value
    mask[:, :, 3:7] &= random_mask((batch, cells, 1), gen, p=0.8)  # some components empty
    return logits, mask, gen
