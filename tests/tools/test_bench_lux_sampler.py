"""The Lux benchmark's device-side draw of random legal actions (``tools/bench_lux.py``): only
legal values, each legal value about equally often, value 0 where nothing is legal."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("jax")

from tools.bench_lux import legal_sampler  # noqa: E402


def test_draws_are_legal_uniform_and_zero_where_nothing_is_legal() -> None:
    import jax

    nvec = (3, 4)
    rng = np.random.default_rng(0)
    mask = rng.random((64, 2, 50, 7)) < 0.5
    mask[0, 0, 0, :3] = False  # component 0 of this cell has no legal value
    mask[:, :, 1:, 3:] = [True, False, True, True]  # component 1: values 0, 2, 3 legal
    draw = legal_sampler(nvec)
    counts = np.zeros(4)
    for i in range(20):
        picks = np.asarray(draw(jax.random.PRNGKey(i), mask))
        assert picks.shape == (64, 2, 50, 2)
        first, second = picks[..., 0], picks[..., 1]
        legal_first = np.take_along_axis(mask[..., :3], first[..., None], -1)[..., 0]
        none_legal = ~mask[..., :3].any(-1)
        assert none_legal[0, 0, 0] and (first[none_legal] == 0).all()
        assert legal_first[~none_legal].all()
        counts += np.bincount(second[:, :, 1:].ravel(), minlength=4)
    assert counts[1] == 0
    share = counts[[0, 2, 3]] / counts.sum()
    assert np.allclose(share, 1 / 3, atol=0.01), share
