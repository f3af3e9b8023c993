"""TrueSkill and Elo as pure functions, checked against the `trueskill` package and by hand."""

from __future__ import annotations

import math
import random
from statistics import NormalDist

import numpy as np
import pytest
import trueskill

from league.ratings import (
    PlayerRating,
    Rating,
    RatingConfig,
    elo_expected,
    elo_expected_matrix,
    elo_update,
    match_quality,
    quality_matrix,
    rate_1vs1,
    rate_match,
    score_of,
)

_ND = NormalDist()
EXACT_BACKEND = (lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0)),
                 lambda x: math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi), _ND.inv_cdf)


def package_rate(env: trueskill.TrueSkill, a: Rating, b: Rating,
                 score: float) -> tuple[Rating, Rating]:
    ranks = [0, 0] if score == 0.5 else ([0, 1] if score == 1.0 else [1, 0])
    (ra,), (rb,) = env.rate([(env.create_rating(*a),), (env.create_rating(*b),)], ranks=ranks)
    return Rating(ra.mu, ra.sigma), Rating(rb.mu, rb.sigma)


def random_cases(n: int, seed: int = 0) -> list[tuple[Rating, Rating, float]]:
    rng = random.Random(seed)
    return [(Rating(rng.uniform(0, 50), rng.uniform(0.3, 9.0)),
             Rating(rng.uniform(0, 50), rng.uniform(0.3, 9.0)), rng.choice([0.0, 0.5, 1.0]))
            for _ in range(n)]


@pytest.mark.parametrize("draw_probability", [0.0, 0.1, 0.33])
def test_trueskill_matches_package_factor_graph_to_1e9(draw_probability: float) -> None:
    """Same model, exact normal functions on both sides: only rounding may differ."""
    cfg = RatingConfig(draw_probability=draw_probability)
    env = trueskill.TrueSkill(draw_probability=draw_probability, backend=EXACT_BACKEND)
    checked = 0
    for a, b, score in random_cases(400):
        if draw_probability == 0.0 and score == 0.5:
            continue
        try:
            want_a, want_b = package_rate(env, a, b, score)
        except FloatingPointError:  # the package gives up on extreme upsets; we do not
            continue
        got_a, got_b = rate_1vs1(a, b, score, cfg)
        np.testing.assert_allclose([*got_a, *got_b], [*want_a, *want_b], rtol=0, atol=1e-9)
        checked += 1
    assert checked > 250


def test_trueskill_matches_package_mpmath_backend() -> None:
    pytest.importorskip("mpmath")
    cfg = RatingConfig()
    env = trueskill.TrueSkill(backend="mpmath")
    for a, b, score in random_cases(60, seed=1):
        want_a, want_b = package_rate(env, a, b, score)
        got_a, got_b = rate_1vs1(a, b, score, cfg)
        np.testing.assert_allclose([*got_a, *got_b], [float(x) for x in [*want_a, *want_b]],
                                   rtol=0, atol=1e-9)


def test_trueskill_matches_package_default_backend() -> None:
    """The package's default erfc approximation is good to ~1e-7 relative."""
    cfg = RatingConfig()
    env = trueskill.TrueSkill()
    for a, b, score in random_cases(200, seed=2):
        want_a, want_b = package_rate(env, a, b, score)
        got_a, got_b = rate_1vs1(a, b, score, cfg)
        np.testing.assert_allclose([*got_a, *got_b], [*want_a, *want_b], rtol=0, atol=1e-4)


def test_defaults_are_the_standard_trueskill_environment() -> None:
    cfg = RatingConfig()
    env = trueskill.TrueSkill()
    assert (cfg.mu, cfg.sigma, cfg.beta, cfg.tau, cfg.draw_probability) == pytest.approx(
        (env.mu, env.sigma, env.beta, env.tau, env.draw_probability))
    assert Rating(25.0, 25.0 / 3.0).conservative == pytest.approx(0.0)
    assert cfg.draw_margin == pytest.approx(trueskill.calc_draw_margin(0.1, 2, env), abs=1e-6)


def test_match_quality_matches_package() -> None:
    cfg = RatingConfig()
    env = trueskill.TrueSkill()
    cases = random_cases(50, seed=3)
    for a, b, _ in cases:
        want = trueskill.quality_1vs1(env.create_rating(*a), env.create_rating(*b), env=env)
        assert match_quality(a, b, cfg) == pytest.approx(want, abs=1e-12)
    mu = np.array([c[0].mu for c in cases])
    sigma = np.array([c[0].sigma for c in cases])
    q = quality_matrix(mu, sigma, cfg)
    assert q[3, 7] == pytest.approx(match_quality(cases[3][0], cases[7][0], cfg), abs=1e-15)
    assert np.allclose(q, q.T)


def test_win_and_loss_are_mirror_images() -> None:
    cfg = RatingConfig()
    a, b = Rating(30.0, 4.0), Rating(20.0, 6.0)
    a_wins = rate_1vs1(a, b, 1.0, cfg)
    b_wins = rate_1vs1(b, a, 0.0, cfg)
    assert a_wins == (b_wins[1], b_wins[0])
    assert a_wins[0].mu > a.mu and a_wins[1].mu < b.mu


def test_anchor_is_frozen_and_opponent_still_moves() -> None:
    cfg = RatingConfig()
    bot, learner = Rating(25.0, 1.0), Rating(25.0, 8.0)
    new_bot, new_learner = rate_1vs1(bot, learner, 0.0, cfg, frozen_a=True)
    assert new_bot == bot
    assert new_learner == rate_1vs1(bot, learner, 0.0, cfg)[1]
    frozen = PlayerRating(25.0, 1.0, 1500.0)
    new_frozen, _ = rate_match(frozen, PlayerRating(25.0, 8.0, 1200.0), 0.0, cfg, True, False)
    assert new_frozen == frozen


def test_elo_by_hand() -> None:
    # 1613 vs 1573: E = 1 / (1 + 10^(-40/400)) = 0.5573116...
    assert elo_expected(1613, 1573) == pytest.approx(0.557311634, abs=1e-9)
    new_a, new_b = elo_update(1613, 1573, 0.0, k=32)
    assert new_a == pytest.approx(1613 - 32 * 0.557311634, abs=1e-6)  # 1595.166...
    assert new_b == pytest.approx(1573 + 32 * 0.557311634, abs=1e-6)
    draw_a, draw_b = elo_update(1400, 1400, 0.5, k=24)
    assert (draw_a, draw_b) == (1400, 1400)
    win_a, _ = elo_update(1400, 1800, 1.0, k=10)  # E = 1/11
    assert win_a == pytest.approx(1400 + 10 * (1 - 1 / 11), abs=1e-12)
    frozen_a, moved_b = elo_update(1500, 1500, 1.0, k=16, frozen_a=True)
    assert (frozen_a, moved_b) == (1500, 1492)
    mat = elo_expected_matrix(np.array([1613.0, 1573.0]))
    assert mat[0, 1] == pytest.approx(0.557311634, abs=1e-9)
    assert mat + mat.T == pytest.approx(np.ones((2, 2)))


def test_bad_scores_are_refused() -> None:
    with pytest.raises(ValueError, match="score_a"):
        rate_1vs1(Rating(25, 8), Rating(25, 8), 0.7, RatingConfig())
    with pytest.raises(ValueError, match="outcome"):
        score_of(2)
    with pytest.raises(ValueError, match="draw_probability"):
        RatingConfig(draw_probability=1.0)
    assert [score_of(o) for o in (1, 0, -1)] == [1.0, 0.5, 0.0]


def test_extreme_upset_stays_finite() -> None:
    cfg = RatingConfig()
    weak, strong = Rating(0.0, 0.5), Rating(200.0, 0.5)
    new_weak, new_strong = rate_1vs1(weak, strong, 1.0, cfg)
    assert all(math.isfinite(x) for x in (*new_weak, *new_strong))
    assert new_weak.mu > weak.mu and new_strong.mu < strong.mu
    assert 0 < new_weak.sigma <= math.hypot(weak.sigma, cfg.tau)


def test_elo_far_apart_stays_finite_and_parameters_must_be_finite() -> None:
    """Guards: ``--elo-k 1e6`` drove ratings apart until ``10 ** (diff / 400)`` overflowed
    (OverflowError), and ``--elo-k inf`` stored NaN ratings (NOT NULL constraint failed)."""
    assert elo_expected(0.0, 1e7) == pytest.approx(0.0, abs=1e-299)
    assert elo_expected(1e7, 0.0) == 1.0
    assert np.isfinite(elo_expected_matrix(np.array([0.0, 1e7, -1e7]))).all()
    for bad in ({"elo_k": math.inf}, {"mu": math.nan}, {"tau": math.inf}):
        with pytest.raises(ValueError, match="must be finite"):
            RatingConfig(**bad)
