"""Reproduce MicroRTS-Py's published league table: a TrueSkill tournament of engine bots.

    .venv/bin/python tools/bench_bot_league.py [--players CoacAI,WorkerRush,...]
        [--map basesWorkers16x16A] [--max-steps 5000] [--games-per-pair 10]
        [--until-sigma 1.4] [--max-matches N] [--time-limit S] [--processes P | --parallel N]
        [--db FILE] [--json]

Issue 3: a TrueSkill tournament (both sides, until every σ < 1.4) of the shipped bots on
basesWorkers16x16A with games of at most 5,000 cycles should order them as MicroRTS-Py's table
does, in μ − 3σ: CoacAI 33.4 above WorkerRush 29.1 and Droplet 29.0, above LightRush 23.4,
above NaiveMCTS 17.9. By default all 13 bots of that table play (it also rated MixedBot,
Izanagi, Tiamat, Rojo, GRojoA3N, RandomBiased, Passive and Random).

The protocol is MicroRTS-Py's (``experiments/league.py``, whose match list ships as
``league.db``): a round robin of ``--games-per-pair`` games per pair (10: 5 per side) opens the
tournament, then TrueSkill-adaptive pairings (the best match quality involving a player whose
σ is still ≥ ``--until-sigma``) run until every σ is below it (``--games-per-pair 0``: adaptive
only). The opening matters: CoacAI, WorkerRush and Droplet split their games with each other,
and what separates them is their record against the rest of the field (Rojo and GRojoA3N beat
the rushes; CoacAI beats nearly everyone), which adaptive pairings alone barely sample.

Search bots (NaiveMCTS, Rojo, GRojoA3N, Tiamat, ...) think for about 100 ms of wall-clock time
per cycle, so their strength depends on the CPU they get: by default each of ``--processes``
(the number of cores) worker processes plays one game at a time, and nothing else should run
meanwhile. ``--parallel N`` instead steps N games together in one process (fast for scripted
bots, but a search bot then shares a core with other games' bots).

The tournament is stored in a league database (default ``runs/bench/bot_league_mrtspy.db``)
under a fixed tournament id, so running the same command again resumes it
(``--max-matches``, which counts the opening too, and ``--time-limit`` bound one run). The
opening's games per pair are part of the tournament id: changing them starts another
tournament in the same database, whose ratings then count both.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from games.core import EngineBot, Policy
from games.matches import MatchResult, MatchSpec
from games.microrts import bots as bots_mod
from games.microrts.bots import resolve_bot
from games.microrts.match_runner import BotMatchRunner
from league.db import LeagueDB
from league.ratings import quality_matrix
from league.tournament import TournamentConfig, run_tournament
from selfplay.cli_common import first_paragraph, run_tool

# MicroRTS-Py's published league (TrueSkill μ − 3σ, experiments/gym-microrts-static-files/
# league.csv): all 13 engine bots it rated, on basesWorkers16x16A, max 5,000 cycles
PUBLISHED = {"CoacAI": 33.4, "WorkerRush": 29.1, "Droplet": 29.0, "MixedBot": 28.3,
             "Izanagi": 27.1, "Tiamat": 24.7, "LightRush": 23.4, "Rojo": 22.2,
             "GRojoA3N": 20.2, "NaiveMCTS": 17.9, "RandomBiased": 12.8, "Passive": -0.4,
             "Random": -0.5}
# MicroRTS-Py's published match list (league.db beside league.csv; 780 games, 5 per ordered
# pair): the row bot as engine player 0 against each column bot (the rows' order) as player 1,
# "wins-draws-losses" of the row bot
_PUBLISHED_GAMES = {
    "CoacAI": "x 0-0-5 1-0-4 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0",
    "WorkerRush": "0-0-5 x 2-0-3 5-0-0 5-0-0 5-0-0 5-0-0 0-0-5 0-0-5 4-1-0 5-0-0 5-0-0 5-0-0",
    "Droplet": "0-0-5 3-0-2 x 3-0-2 5-0-0 5-0-0 5-0-0 0-0-5 4-0-1 4-0-1 5-0-0 5-0-0 5-0-0",
    "MixedBot": "1-0-4 0-0-5 0-0-5 x 4-0-1 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0",
    "Izanagi": "1-0-4 0-0-5 0-0-5 3-0-2 x 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0",
    "Tiamat": "0-0-5 0-0-5 0-0-5 1-0-4 0-0-5 x 3-0-2 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0",
    "LightRush": "0-0-5 0-0-5 0-0-5 0-0-5 1-0-4 2-0-3 x 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0 5-0-0",
    "Rojo": "0-0-5 0-0-5 5-0-0 0-0-5 0-0-5 0-0-5 0-0-5 x 2-2-1 2-1-2 5-0-0 5-0-0 5-0-0",
    "GRojoA3N": "0-0-5 4-0-1 3-0-2 0-0-5 0-0-5 0-0-5 0-0-5 1-2-2 x 1-0-4 5-0-0 5-0-0 5-0-0",
    "NaiveMCTS": "0-0-5 1-0-4 1-0-4 0-0-5 0-0-5 0-0-5 0-0-5 1-1-3 2-1-2 x 5-0-0 5-0-0 5-0-0",
    "RandomBiased": "0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 x 5-0-0 5-0-0",
    "Random": "0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-1-4 x 0-5-0",
    "Passive": "0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-0-5 0-5-0 x",
}


def published_score(a: str, b: str) -> float:
    """Bot ``a``'s score against ``b`` (win 1, draw ½) over both sides in the published list."""
    cols = list(_PUBLISHED_GAMES)
    first = [int(x) for x in _PUBLISHED_GAMES[a].split()[cols.index(b)].split("-")]
    second = [int(x) for x in _PUBLISHED_GAMES[b].split()[cols.index(a)].split("-")]
    wins, draws = first[0] + second[2], first[1] + second[1]
    return (wins + draws / 2) / (sum(first) + sum(second))


def pair_scores(matches: list[Any], names: Mapping[int, str]) -> list[dict[str, Any]]:
    """Per pair of players: our score of the first (both sides), beside the published one."""
    games: dict[tuple[str, str], list[float]] = {}
    for m in matches:
        a, b = names[m.player_a], names[m.player_b]
        score = (m.outcome + 1) / 2
        if a > b:
            a, b, score = b, a, 1 - score
        games.setdefault((a, b), []).append(score)
    rows = []
    for (a, b), scores in sorted(games.items()):
        rows.append({"a": a, "b": b, "games": len(scores),
                     "score": round(sum(scores) / len(scores), 3),
                     "published_score": (round(published_score(a, b), 3)
                                         if a in PUBLISHED and b in PUBLISHED else None)})
    return rows


# the order issue 3 asks to reproduce
TARGET_ORDER = ("CoacAI", "WorkerRush", "Droplet", "LightRush", "NaiveMCTS")
DEFAULT_PLAYERS = ",".join(PUBLISHED)


class _Deadline:
    """A runner that stops asking for matches after ``seconds`` (games in flight finish)."""

    def __init__(self, inner: BotMatchRunner, seconds: float | None) -> None:
        self.inner, self.seconds = inner, seconds

    def run(self, next_match: Callable[[], MatchSpec | None],
            on_result: Callable[[MatchSpec, MatchResult], None]) -> None:
        end = None if self.seconds is None else time.monotonic() + self.seconds

        def bounded() -> MatchSpec | None:
            if end is not None and time.monotonic() >= end:
                return None
            return next_match()

        self.inner.run(bounded, on_result)


def published_order_ok(names: list[str], conservative: Mapping[str, float],
                       among: tuple[str, ...] | None = TARGET_ORDER) -> bool | None:
    """Our μ − 3σ order agrees with the published one on every pair (of ``among``, or of all
    published bots) whose published values differ by more than 0.5 (WorkerRush 29.1 vs Droplet
    29.0 is a tie either way); None when fewer than two of those bots played (nothing to
    compare)."""
    pool = [n for n in names if n in PUBLISHED and (among is None or n in among)]
    if len(pool) < 2:
        return None
    for a in pool:
        for b in pool:
            if PUBLISHED[a] > PUBLISHED[b] + 0.5 and not conservative[a] > conservative[b]:
                return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--players", default=DEFAULT_PLAYERS,
                        help="comma-separated bot names (default: %(default)s)")
    parser.add_argument("--map", default="basesWorkers16x16A")
    parser.add_argument("--max-steps", type=int, default=5000)
    parser.add_argument("--until-sigma", type=float, default=1.4)
    parser.add_argument("--min-quality", type=float, default=0.05,
                        help="skip adaptive pairings of lower match quality (the weakest bot "
                        "loses every game, which never brings its sigma below 1.4)")
    parser.add_argument("--games-per-pair", type=int, default=10,
                        help="the opening round robin's games per pair (0: adaptive only)")
    parser.add_argument("--max-matches", type=int, default=100_000,
                        help="stop this run after this many new matches")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="stop scheduling new matches after this many seconds")
    parser.add_argument("--processes", type=int, default=len(os.sched_getaffinity(0)),
                        help="worker processes, one game each at a time (default: cores)")
    parser.add_argument("--parallel", type=int, default=None,
                        help="instead: games stepped together in this process")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", default="runs/bench/bot_league_mrtspy.db")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    names = [bots_mod.resolve_bot(n).name for n in args.players.split(",") if n.strip()]
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    if args.games_per_pair < 0:
        parser.error("--games-per-pair must be >= 0")
    processes = 1 if args.parallel else max(1, args.processes)
    parallel = args.parallel or 1
    opening = f":rr{args.games_per_pair}" if args.games_per_pair else ""
    config = TournamentConfig(until_sigma=args.until_sigma, num_envs=parallel,
                              opening_games_per_pair=args.games_per_pair,
                              min_quality=args.min_quality,
                              seed=args.seed, map=args.map, max_matches=args.max_matches,
                              name=f"botleague:{args.map}:{args.max_steps}:s{args.seed}"
                                   f"{opening}")
    start = time.perf_counter()
    with LeagueDB(args.db, game="microrts") as db:
        # --max-matches bounds this run: the tournament's limit counts its stored matches
        stored = len(db.match_keys(config.tournament_id + "/"))
        config = replace(config, max_matches=stored + args.max_matches)
        for name in names:
            db.add_player(name, "bot")

        def runner(policies: Mapping[int, Policy]) -> _Deadline:
            by_id = {pid: db.player(pid).name for pid in policies}
            return _Deadline(BotMatchRunner(by_id, args.map, args.max_steps, parallel,
                                            processes), args.time_limit)

        def progress(done: int, total: int | None) -> None:
            if not args.json and done % 10 == 0:
                print(f"  {done} matches, {time.perf_counter() - start:.0f} s",
                      file=sys.stderr, flush=True)

        def no_game(num_envs: int, seed: int):  # type: ignore[no-untyped-def]
            raise AssertionError("unused: the bot runner plays the matches")

        summary = run_tournament(db, names, lambda name: EngineBot(resolve_bot(name).name),
                                 no_game, config,
                                 progress=progress, runner=runner)
        elapsed = time.perf_counter() - start
        board = [s for s in db.leaderboard() if s.name in set(names)]
        tid = config.tournament_id
        stored = [m for m in db.matches() if m.key.startswith(tid + "/")]
        names_by_id = {db.player(n).id: n for n in names}
        quality = quality_matrix(np.array([b.mu for b in board]),
                                 np.array([b.sigma for b in board]), db.config)  # [N, N]
    np.fill_diagonal(quality, 0.0)
    # players whose σ is still large although a pairing above the quality floor is left: the
    # run stopped early (--max-matches, --time-limit), not because only lopsided games remain
    unfinished = [b.name for b, q in zip(board, quality, strict=True)
                  if b.sigma >= args.until_sigma and q.max(initial=0.0) >= args.min_quality]
    pairs = pair_scores([m for m in stored if m.player_a in names_by_id
                         and m.player_b in names_by_id], names_by_id)
    by_name = {s.name: s for s in board}
    conservative = {s.name: s.conservative for s in board}
    rows = [{"rank": i + 1, "name": s.name, "mu": round(s.mu, 2), "sigma": round(s.sigma, 2),
             "conservative": round(s.conservative, 2), "games": s.games,
             "wins": s.wins, "draws": s.draws, "losses": s.losses,
             "published_conservative": PUBLISHED.get(s.name)} for i, s in enumerate(board)]
    max_sigma = max((s.sigma for s in board), default=0.0)
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "map": args.map, "max_steps": args.max_steps, "until_sigma": args.until_sigma,
        "opening_games_per_pair": args.games_per_pair, "processes": processes,
        "parallel": parallel,
        "players": names, "excluded": [n for n in TARGET_ORDER if n not in names],
        "tournament": tid, "db": args.db,
        "matches_this_run": summary.played, "matches_stored": len(stored),
        "truncated_games": sum(m.length >= args.max_steps for m in stored),
        "mean_game_cycles": round(sum(m.length for m in stored) / max(len(stored), 1), 1),
        "seconds_this_run": round(elapsed, 1),
        "converged": bool(board) and max_sigma < args.until_sigma,
        "min_quality": args.min_quality,
        "stalled": [s.name for s in board
                    if s.sigma >= args.until_sigma and s.name not in unfinished],
        "unfinished": unfinished,
        "max_sigma": round(max_sigma, 3),
        "order_matches_published": published_order_ok([s.name for s in board], conservative),
        "order_matches_published_all": published_order_ok([s.name for s in board],
                                                          conservative, among=None),
        "machine": f"{platform.machine()}, {platform.python_version()}",
        "table": rows,
        "pairs": pairs,
    }
    if args.json:
        print(json.dumps(result))
        return
    print(f"\nTrueSkill bot league on {args.map} (max {args.max_steps} cycles, both sides, "
          f"until σ < {args.until_sigma}); {len(stored)} matches stored "
          f"({summary.played} this run, {elapsed:.0f} s), {result['truncated_games']} hit the "
          f"step limit")
    print(f"{'rank':>4}  {'bot':<12} {'mu':>6} {'sigma':>6} {'mu-3s':>6} {'games':>6} "
          f"{'W-D-L':>11}  {'published mu-3s':>15}")
    for r in rows:
        pub = by_name[str(r["name"])]
        wdl = f"{pub.wins}-{pub.draws}-{pub.losses}"
        published = r["published_conservative"]
        print(f"{r['rank']:>4}  {r['name']:<12} {r['mu']:6.2f} {r['sigma']:6.2f} "
              f"{r['conservative']:6.2f} {r['games']:6d} {wdl:>11}  "
              f"{'-' if published is None else f'{published:.1f}':>15}")
    print("\nscore of the first bot per pair (win 1, draw 1/2; both sides): "
          "ours (games) | MicroRTS-Py's (10 games)")
    for pair in pairs:
        theirs = pair["published_score"]
        print(f"  {pair['a']:>12} v {pair['b']:<12} {pair['score']:5.2f} ({pair['games']:3d}) | "
              f"{'-' if theirs is None else f'{theirs:.2f}'}")
    print(f"converged (every σ < {args.until_sigma}): {result['converged']} "
          f"(max σ {max_sigma:.2f}); order agrees with the published table: "
          f"{result['order_matches_published']} ({', '.join(TARGET_ORDER)}), "
          f"{result['order_matches_published_all']} (every published bot)"
          + (f"; excluded: {', '.join(result['excluded'])}" if result["excluded"] else "")
          + (f"; left with σ ≥ {args.until_sigma} (only pairings of match quality < "
             f"{args.min_quality} remain): {', '.join(result['stalled'])}"
             if result["stalled"] else "")
          + (f"; stopped early, pairings still to play for: {', '.join(unfinished)}"
             if unfinished else ""))


if __name__ == "__main__":
    run_tool(main)
