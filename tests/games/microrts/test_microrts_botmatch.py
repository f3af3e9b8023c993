"""Bot-vs-bot games (tournaments of the shipped bots) against the real engine."""

from __future__ import annotations

import pytest

from games.core import GameError, Outcome
from games.microrts import bots
from games.microrts.botmatch import (
    BotGame,
    BotGameResult,
    play_bot_games,
    play_bots,
    round_robin,
)

DETERMINISTIC = ["WorkerRush", "LightRush", "HeavyRush", "RangedRush"]


def test_known_game_on_the_tournament_map(engine_home) -> None:
    """WorkerRush as player 0 beats LightRush on basesWorkers16x16A in 355 cycles (the
    engine's deterministic result); the same pairing with sides swapped goes the other way."""
    result = play_bots("workerrush", "LightRush", "basesWorkers16x16A", max_steps=5000)
    assert result == BotGameResult("WorkerRush", "LightRush", "basesWorkers16x16A", 0, 0, 355,
                                   False)
    assert result.outcome == Outcome.WIN
    swapped = play_bots("LightRush", "WorkerRush", "basesWorkers16x16A", max_steps=5000)
    assert (swapped.winner, swapped.outcome, swapped.truncated) == (1, Outcome.LOSS, False)


def test_same_games_same_results_whatever_the_batching(engine_home) -> None:
    """Deterministic bots: the results depend on the games only, not on how many run at once
    or in which order (each slot has its own bots and game state)."""
    games = round_robin(DETERMINISTIC, "basesWorkers8x8", max_steps=3000)
    assert len(games) == 12
    assert {(g.bot_a, g.bot_b) for g in games} == {(a, b) for a in DETERMINISTIC
                                                   for b in DETERMINISTIC if a != b}
    together = play_bot_games(games, parallel=12)
    one_by_one = play_bot_games(games[::-1], parallel=1)[::-1]
    uneven = play_bot_games(games, parallel=5)
    assert together == one_by_one == uneven
    again = play_bots(games[3].bot_a, games[3].bot_b, "basesWorkers8x8", 3000, seed=7)
    assert (again.winner, again.length) == (together[3].winner, together[3].length)
    assert all(r.length > 0 for r in together)


def test_random_bots_replay_for_a_seed(engine_home) -> None:
    """RandomBiased draws from its own generator and the engine's shared static sampler: with
    both seeded, one game is the same game for a seed, and a batch replays as a whole."""
    def game(seed: int) -> tuple[int, int]:
        result = play_bots("RandomBiased", "randombiased", "basesWorkers8x8", 3000, seed=seed)
        return result.winner, result.length

    first = game(7)
    assert game(7) == first == game(7)
    assert len({first, game(8), game(9), game(10)}) > 1  # the seed matters
    # a worker process (its own JVM and static generators) plays the same game
    workers = play_bot_games([BotGame("RandomBiased", "RandomBiased", "basesWorkers8x8", 3000,
                                      7)] * 2, parallel=1, processes=2)
    assert [(r.winner, r.length) for r in workers] == [first, first]
    batch = round_robin(["RandomBiased", "WorkerRush", "LightRush"], "basesWorkers8x8", 2000,
                        games_per_side=2, seed=3)
    assert play_bot_games(batch, parallel=5) == play_bot_games(batch, parallel=5)


def test_max_steps_is_a_draw(engine_home) -> None:
    results = play_bot_games([BotGame("Passive", "Passive", "basesWorkers8x8", max_steps=40),
                              BotGame("WorkerRush", "Passive", "basesWorkers8x8", 30)])
    for r in results:
        assert (r.winner, r.outcome, r.truncated) == (-1, Outcome.DRAW, True)
    assert [r.length for r in results] == [40, 30]


def test_slots_are_refilled_with_mixed_maps(engine_home) -> None:
    """More games than slots, on maps of different sizes: every game gets its own result."""
    games = [BotGame("WorkerRush", "Passive", m, 2000) for m in ("basesWorkers8x8",
                                                                 "basesWorkers10x10")] * 3
    seen: list[tuple[int, int]] = []
    results = play_bot_games(games, parallel=2, progress=lambda done, n: seen.append((done, n)))
    assert [r.map for r in results] == [g.map for g in games]
    assert all(r.outcome == Outcome.WIN and not r.truncated for r in results)
    assert results[0] == results[2] == results[4] and results[1] == results[3]
    assert seen[-1] == (6, 6)


def test_bad_names_fail_before_any_game(engine_home) -> None:
    with pytest.raises(GameError, match="unknown microRTS bot 'WorkerRsh'"):
        play_bot_games([BotGame("WorkerRush", "LightRush"), BotGame("WorkerRsh", "LightRush")])
    with pytest.raises(GameError, match="unknown microRTS map"):
        play_bots("WorkerRush", "LightRush", map="noSuchMap")
    with pytest.raises(GameError, match="max_steps"):
        play_bots("WorkerRush", "LightRush", max_steps=0)
    assert play_bot_games([]) == []


def test_deterministic_flags() -> None:
    assert bots.resolve_bot("WorkerRush").deterministic
    for name in ("Mayari", "CoacAI", "RandomBiased", "NaiveMCTS", "EconomyRush"):
        assert not bots.resolve_bot(name).deterministic, name


def test_bots_marked_deterministic_replay_whatever_the_seed(engine_home) -> None:
    """Every bot marked deterministic plays the same game against WorkerRush from each side
    with different seeds (each game alone, so shared generators cannot hide a difference)."""
    marked = [b for b in (bots.resolve_bot(n) for n in bots.bot_names()) if b.deterministic]
    assert len(marked) >= 10
    games = [BotGame(a, b, "basesWorkers8x8", 1000, seed) for spec in marked
             for a, b in ((spec.name, "WorkerRush"), ("WorkerRush", spec.name))
             for seed in (1, 2)]
    results = play_bot_games(games, parallel=1)
    differ = [(g.bot_a, g.bot_b) for g, first, second in zip(games[::2], results[::2],
                                                                results[1::2], strict=True)
              if (first.winner, first.length) != (second.winner, second.length)]
    assert differ == []


@pytest.mark.timeout(300)
def test_worker_processes_give_the_same_results(engine_home) -> None:
    games = round_robin(["WorkerRush", "LightRush"], "basesWorkers8x8", 3000, games_per_side=2)
    assert play_bot_games(games, processes=2) == play_bot_games(games)
