"""tools/bench_bot_league.py's copy of MicroRTS-Py's published match list reads right."""

from __future__ import annotations

from types import SimpleNamespace

from tools.bench_bot_league import (
    _PUBLISHED_GAMES,
    PUBLISHED,
    pair_scores,
    published_order_ok,
    published_score,
)


def test_published_games_table_is_square_with_the_diagonal_empty() -> None:
    bots = list(_PUBLISHED_GAMES)
    assert set(bots) == set(PUBLISHED)
    for row, bot in enumerate(bots):
        cells = _PUBLISHED_GAMES[bot].split()
        assert len(cells) == len(bots) and cells[row] == "x"
        assert all(sum(map(int, c.split("-"))) == 5 for i, c in enumerate(cells) if i != row)


def test_published_scores_over_both_sides() -> None:
    bots = list(_PUBLISHED_GAMES)
    for a in bots:  # every pair's scores are complementary
        for b in bots:
            if a != b:
                assert abs(published_score(a, b) + published_score(b, a) - 1.0) < 1e-9
    assert published_score("CoacAI", "WorkerRush") == 0.5  # player 1 won all 10
    assert published_score("CoacAI", "Droplet") == 0.6
    assert published_score("Droplet", "Rojo") == 0.0
    assert published_score("Random", "Passive") == 0.5  # 10 draws
    # wins over the whole field reproduce the published totals (CoacAI 109 of 120)
    assert abs(sum(published_score("CoacAI", b) for b in bots if b != "CoacAI") * 10 - 109) < 1e-9


def test_pair_scores_orient_each_pair_and_count_draws() -> None:
    names = {1: "WorkerRush", 2: "CoacAI"}
    matches = [SimpleNamespace(player_a=1, player_b=2, outcome=1),
               SimpleNamespace(player_a=2, player_b=1, outcome=0),
               SimpleNamespace(player_a=2, player_b=1, outcome=-1)]
    (row,) = pair_scores(matches, names)
    assert (row["a"], row["b"], row["games"]) == ("CoacAI", "WorkerRush", 3)
    assert abs(row["score"] - 0.5 / 3) < 1e-3 and row["published_score"] == 0.5


def test_order_check_ignores_published_ties() -> None:
    ours = {"CoacAI": 27.0, "Droplet": 26.9, "WorkerRush": 27.5, "LightRush": 20.0,
            "NaiveMCTS": 16.0}
    assert not published_order_ok(list(ours), ours)  # WorkerRush above CoacAI
    ours["WorkerRush"] = 26.0  # below Droplet: a published tie (29.1 vs 29.0)
    assert published_order_ok(list(ours), ours)
    # fewer than two of the bots compared: no verdict (it said true)
    assert published_order_ok(["WorkerRush", "Random"], {"WorkerRush": 1.0, "Random": 2.0}
                              ) is None


def test_rating_trend_matches_a_hand_computed_weighted_fit() -> None:
    from tools.bench_selfplay_progress import rating_trend

    # equal sigmas: ordinary least squares; slope of (0, 1), (1, 3), (2, 2) is 0.5, and its
    # standard error with known sigma 1 is sqrt(1 / sum((x - mean x)^2)) = sqrt(1/2)
    trend = rating_trend([0, 1, 2], [1, 3, 2], [1, 1, 1])
    assert abs(trend["slope"] - 0.5) < 1e-12
    assert abs(trend["slope_se"] - 0.5**0.5) < 1e-12
    assert abs(trend["spearman"] - 0.5) < 1e-12
    # a point with a huge sigma hardly counts: the line follows the other two
    trend = rating_trend([0, 1, 2], [0, 1, -50], [1, 1, 1e6])
    assert abs(trend["slope"] - 1.0) < 1e-6 and trend["spearman"] < 0
    # monotone ratings: rank correlation 1 whatever the spacing
    assert rating_trend([10, 20, 30, 40], [1, 2, 10, 11], [2, 2, 2, 2])["spearman"] == 1.0
