"""Ratings as pure functions: TrueSkill (two players) and Elo.

TrueSkill is the closed form of Herbrich et al. (2007) for one player against one, the same
result the factor graph of the `trueskill` package computes (checked against it in the tests),
at about 2 µs per match instead of ~1 ms. Defaults are the package's: μ = 25, σ = 25/3,
β = σ/2, τ = σ/100, draw probability 0.10. The conservative rating is μ − 3σ.

Scores are from player ``a``'s point of view: 1 win, 0.5 draw, 0 loss. A *frozen* player (an
anchor, e.g. a scripted bot) keeps its rating; its opponent is updated as usual.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import cached_property
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

MAX_ELO_K = 400.0
"""The largest Elo K-factor accepted: beyond the rating scale itself (400) one game swings a
rating by more than a class."""

_SQRT2 = math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@dataclass(frozen=True)
class RatingConfig:
    """Parameters of both rating systems (stored in the league database)."""

    mu: float = 25.0
    """TrueSkill prior mean"""
    sigma: float = 25.0 / 3.0
    """TrueSkill prior standard deviation"""
    beta: float = 25.0 / 6.0
    """performance noise: a skill gap of β wins ~76% of games"""
    tau: float = 25.0 / 300.0
    """dynamics: σ grows by τ (in quadrature) before every match"""
    draw_probability: float = 0.10
    """prior probability of a draw between equal players (sets the draw margin)"""
    elo_initial: float = 1200.0
    """Elo of a new player"""
    elo_k: float = 32.0
    """Elo K-factor"""

    def __post_init__(self) -> None:
        bad = [f"{k}={v}" for k, v in asdict(self).items() if not math.isfinite(v)]
        if bad:
            raise ValueError(f"rating parameters must be finite numbers: {', '.join(bad)}")
        if not 0.0 <= self.draw_probability < 1.0:
            raise ValueError(f"draw_probability must be in [0, 1), got {self.draw_probability}")
        if self.sigma <= 0 or self.beta <= 0 or self.tau < 0 or self.elo_k < 0:
            raise ValueError("sigma and beta must be > 0, tau and elo_k >= 0")

    @cached_property
    def draw_margin(self) -> float:
        """ε = Φ⁻¹((p + 1) / 2) · √2 · β (two players)."""
        return NormalDist().inv_cdf((self.draw_probability + 1.0) / 2.0) * _SQRT2 * self.beta


class Rating(NamedTuple):
    """A TrueSkill belief about one player's skill."""

    mu: float
    sigma: float

    @property
    def conservative(self) -> float:
        """μ − 3σ: the skill the player exceeds with ~99.9% probability."""
        return self.mu - 3.0 * self.sigma


def default_rating(config: RatingConfig) -> Rating:
    return Rating(config.mu, config.sigma)


# --------------------------------------------------------------------------- TrueSkill


def _pdf(x: float) -> float:
    return _INV_SQRT_2PI * math.exp(-0.5 * x * x)


def _cdf(x: float) -> float:
    return 0.5 * math.erfc(-x / _SQRT2)


def _v_w_win(t: float, eps: float) -> tuple[float, float]:
    """Additive and multiplicative corrections for a win with normalized margin ``t``."""
    x = t - eps
    denom = _cdf(x)
    v = _pdf(x) / denom if denom > 1e-300 else -x
    w = v * (v + x)
    return v, min(max(w, 0.0), 1.0 - 1e-12)


def _v_w_draw(t: float, eps: float) -> tuple[float, float]:
    """Corrections for a draw (signed like the package: v has the sign of ``t``)."""
    d = abs(t)
    a, b = eps - d, -eps - d
    denom = _cdf(a) - _cdf(b)
    if denom > 1e-300:
        v = (_pdf(b) - _pdf(a)) / denom
        w = v * v + (a * _pdf(a) - b * _pdf(b)) / denom
    else:
        v, w = a, 1.0
    return (-v if t < 0 else v), min(max(w, 0.0), 1.0 - 1e-12)


def rate_1vs1(a: Rating, b: Rating, score_a: float, config: RatingConfig,
              frozen_a: bool = False, frozen_b: bool = False) -> tuple[Rating, Rating]:
    """New TrueSkill ratings after one game of ``a`` against ``b`` (score 1, 0.5 or 0)."""
    if score_a not in (0.0, 0.5, 1.0):
        raise ValueError(f"score_a must be 1, 0.5 or 0, got {score_a}")
    draw = score_a == 0.5
    a_won = score_a != 0.0  # for a draw the order does not matter
    win, lose = (a, b) if a_won else (b, a)
    tau2 = config.tau * config.tau
    var_w = win.sigma * win.sigma + tau2
    var_l = lose.sigma * lose.sigma + tau2
    c2 = 2.0 * config.beta * config.beta + var_w + var_l
    c = math.sqrt(c2)
    t = (win.mu - lose.mu) / c
    v, w = (_v_w_draw if draw else _v_w_win)(t, config.draw_margin / c)
    new_w = Rating(win.mu + var_w / c * v, math.sqrt(var_w * (1.0 - var_w / c2 * w)))
    new_l = Rating(lose.mu - var_l / c * v, math.sqrt(var_l * (1.0 - var_l / c2 * w)))
    new_a, new_b = (new_w, new_l) if a_won else (new_l, new_w)
    return (a if frozen_a else new_a), (b if frozen_b else new_b)


def match_quality(a: Rating, b: Rating, config: RatingConfig) -> float:
    """TrueSkill match quality of ``a`` against ``b``: the draw probability relative to equals."""
    two_beta2 = 2.0 * config.beta * config.beta
    c2 = two_beta2 + a.sigma * a.sigma + b.sigma * b.sigma
    return math.sqrt(two_beta2 / c2) * math.exp(-((a.mu - b.mu) ** 2) / (2.0 * c2))


def quality_matrix(mu: np.ndarray, sigma: np.ndarray, config: RatingConfig) -> np.ndarray:
    """Match quality of every pair ``[N, N]`` from ``mu [N]``, ``sigma [N]`` (vectorized)."""
    two_beta2 = 2.0 * config.beta * config.beta
    var = np.asarray(sigma, np.float64) ** 2
    c2 = two_beta2 + var[:, None] + var[None, :]  # [N, N]
    diff = np.asarray(mu, np.float64)[:, None] - np.asarray(mu, np.float64)[None, :]
    return np.sqrt(two_beta2 / c2) * np.exp(-(diff**2) / (2.0 * c2))  # type: ignore[no-any-return]


def win_probability(a: Rating, b: Rating, config: RatingConfig) -> float:
    """P(``a`` beats ``b``) under TrueSkill's model, draws not counted as wins."""
    c = math.sqrt(2.0 * config.beta**2 + a.sigma**2 + b.sigma**2)
    return _cdf((a.mu - b.mu - config.draw_margin) / c)


# --------------------------------------------------------------------------- Elo


def elo_expected(r_a: float, r_b: float) -> float:
    """Expected score of ``a`` against ``b``: 1 / (1 + 10^((R_b − R_a) / 400))."""
    return 1.0 / (1.0 + 10.0 ** min(max((r_b - r_a) / 400.0, -300.0), 300.0))


def elo_update(r_a: float, r_b: float, score_a: float, k: float,
               frozen_a: bool = False, frozen_b: bool = False) -> tuple[float, float]:
    """New Elo ratings after one game: R' = R + K (S − E); a draw scores ½."""
    if score_a not in (0.0, 0.5, 1.0):
        raise ValueError(f"score_a must be 1, 0.5 or 0, got {score_a}")
    delta = k * (score_a - elo_expected(r_a, r_b))
    return (r_a if frozen_a else r_a + delta), (r_b if frozen_b else r_b - delta)


def elo_expected_matrix(elo: np.ndarray) -> np.ndarray:
    """Expected score of every row player against every column player ``[N, N]``."""
    r = np.asarray(elo, np.float64)
    exponent = np.clip((r[None, :] - r[:, None]) / 400.0, -300.0, 300.0)
    return 1.0 / (1.0 + 10.0 ** exponent)  # type: ignore[no-any-return]


# --------------------------------------------------------------------------- both


class PlayerRating(NamedTuple):
    """The rating state the league stores per player."""

    mu: float
    sigma: float
    elo: float

    @property
    def conservative(self) -> float:
        return self.mu - 3.0 * self.sigma


def rate_match(a: PlayerRating, b: PlayerRating, score_a: float, config: RatingConfig,
               frozen_a: bool = False, frozen_b: bool = False
               ) -> tuple[PlayerRating, PlayerRating]:
    """TrueSkill and Elo updates of one game together (what the league database applies)."""
    ts_a, ts_b = rate_1vs1(Rating(a.mu, a.sigma), Rating(b.mu, b.sigma), score_a, config,
                           frozen_a, frozen_b)
    elo_a, elo_b = elo_update(a.elo, b.elo, score_a, config.elo_k, frozen_a, frozen_b)
    return PlayerRating(ts_a.mu, ts_a.sigma, elo_a), PlayerRating(ts_b.mu, ts_b.sigma, elo_b)


def score_of(outcome: int) -> float:
    """Outcome for ``a`` (1 win, 0 draw, −1 loss) -> score (1, 0.5, 0)."""
    if outcome not in (-1, 0, 1):
        raise ValueError(f"outcome must be 1 (win), 0 (draw) or -1 (loss), got {outcome}")
    return (outcome + 1) / 2.0
