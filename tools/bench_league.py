"""League benchmarks: rating updates, matchmaking + rating per match, leaderboard query.

    .venv/bin/python tools/bench_league.py [--players 1000] [--matches 100000] [--json]

Targets (issue 3): matchmaking plus rating update <= 1 ms per match in a league of 1,000
players; leaderboard query <= 100 ms with 100,000 matches stored.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import trueskill

from league.db import LeagueDB
from league.matchmaking import Matchmaker
from league.ratings import PlayerRating, Rating, RatingConfig, rate_1vs1, rate_match
from league.records import MatchRecord
from selfplay.cli_common import first_paragraph, positive_int, run_tool


def per_call_us(fn: object, n: int) -> float:
    assert callable(fn)
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1e6


def bench_rating(n: int) -> dict[str, float]:
    """One TrueSkill 1v1 update: ours against the `trueskill` package."""
    cfg = RatingConfig()
    env = trueskill.TrueSkill()
    a, b = trueskill.Rating(27.0, 5.0), trueskill.Rating(23.0, 6.0)
    return {"ours_us": per_call_us(lambda: rate_1vs1(Rating(27.0, 5.0), Rating(23.0, 6.0),
                                                     1.0, cfg), n),
            "trueskill_package_us": per_call_us(lambda: env.rate_1vs1(a, b), max(n // 50, 20))}


def bench_match_loop(players: int, n: int, db: LeagueDB | None) -> float:
    """µs per match: sample an opponent (PFSP), payoff update, rating update (+ DB write)."""
    rng = np.random.default_rng(0)
    mm = Matchmaker()
    learner = 0
    mm.add_learner(learner)
    ids = list(range(1, players))
    for pid in ids[:-10]:
        mm.add_snapshot(pid, learner)
    for pid in ids[-10:]:
        mm.add_bot(pid)
    cfg = RatingConfig()
    ratings = {pid: PlayerRating(cfg.mu, cfg.sigma, cfg.elo_initial) for pid in range(players)}
    db_ids = None
    if db is not None:
        db_ids = [db.add_player(f"p{pid}", "snapshot") for pid in range(players)]
    start = time.perf_counter()
    for k in range(n):
        opp = int(mm.sample_opponents(1, rng)[0])
        if opp == learner:
            opp = int(rng.integers(1, players))  # self-play: rate against a snapshot instead
        outcome = int(rng.integers(-1, 2))
        mm.record(learner, opp, outcome)
        if db_ids is None:
            ratings[learner], ratings[opp] = rate_match(ratings[learner], ratings[opp],
                                                        (outcome + 1) / 2, cfg)
        else:
            assert db is not None
            db.record_match(db_ids[learner], db_ids[opp], outcome, key=f"bench/{k}")
    return (time.perf_counter() - start) / n * 1e6


def fill(db: LeagueDB, players: int, matches: int, batch: int = 5000) -> float:
    """Register ``players`` and store ``matches`` random results; returns seconds."""
    rng = np.random.default_rng(1)
    ids = [db.add_player(f"player-{i:05d}", "snapshot") for i in range(players)]
    start = time.perf_counter()
    for lo in range(0, matches, batch):
        k = min(batch, matches - lo)
        a = rng.integers(0, players, k)
        b = (a + rng.integers(1, players, k)) % players
        out = rng.integers(-1, 2, k)
        db.record_matches(MatchRecord(ids[x], ids[y], int(o), f"fill/{lo + i}", side_a=i % 2)
                          for i, (x, y, o) in enumerate(zip(a, b, out, strict=True)))
    return time.perf_counter() - start


def timed_ms(fn: object, repeats: int = 20) -> float:
    assert callable(fn)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--players", type=positive_int, default=1000)
    parser.add_argument("--matches", type=positive_int, default=100_000)
    parser.add_argument("--loop", type=positive_int, default=5000,
                        help="matches in the per-match loop")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.players < 2:
        parser.error(f"--players: a league needs at least 2, got {args.players}")

    results: dict[str, object] = {"machine": f"{platform.processor() or platform.machine()}, "
                                             f"python {platform.python_version()}",
                                  "date": time.strftime("%Y-%m-%d")}
    results["trueskill_update"] = bench_rating(20_000)
    with tempfile.TemporaryDirectory() as tmp:
        results["match_us_in_memory"] = bench_match_loop(args.players, args.loop, None)
        with LeagueDB(Path(tmp) / "loop.db", game="bench") as db:
            results["match_us_with_db_write"] = bench_match_loop(args.players, args.loop, db)
        with LeagueDB(Path(tmp) / "big.db", game="bench") as db:
            results["fill_seconds"] = fill(db, args.players, args.matches)
            plan = db._conn.execute(  # noqa: SLF001 - show that the query reads the index
                "EXPLAIN QUERY PLAN SELECT player_id FROM ratings ORDER BY mu - 3.0 * sigma "
                "DESC").fetchall()
            results["leaderboard_plan"] = " | ".join(str(r[-1]) for r in plan)
            results["leaderboard_ms"] = timed_ms(db.leaderboard)
            results["leaderboard_top20_ms"] = timed_ms(lambda: db.leaderboard(limit=20))
            results["payoff_ms"] = timed_ms(db.payoff, 5)
            results["replay_ratings_s"] = timed_ms(db.replay_ratings, 1) / 1e3
            results["matches_stored"] = db.match_count()
    results["players"] = args.players
    if args.json:
        print(json.dumps(results))
        return
    for key, value in results.items():
        print(f"{key:28s} {value}")


if __name__ == "__main__":
    run_tool(main)
