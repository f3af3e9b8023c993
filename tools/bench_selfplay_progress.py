"""Self-play progress of a league run: every snapshot rated against one frozen reference pool.

    .venv/bin/python tools/bench_selfplay_progress.py --run runs/bench/mrts8-league \
        [--bots RandomBiased,WorkerRush,LightRush] [--games 8] [--calibrate-games 20] \
        [--db FILE] [--json-out FILE]

Issue 3 asks that successive snapshots' ratings against a frozen reference pool (including
scripted bots) rise. During training each snapshot is rated against the snapshots just before
it, whose ratings keep moving; this benchmark rates them afterwards on one fixed scale:

Any two-player game with scripted bots (microRTS by default: its engine bots). The steps:

1. the reference bots play each other on the run's map (a round robin of
   ``--calibrate-games`` per pair, both sides), which places them on a common scale;
2. they become anchors: frozen at those ratings;
3. every snapshot of the run plays only the anchors (``--games`` per bot, both sides), so its
   rating depends on its own games against the same frozen pool and nothing else.

Everything is stored in a league database (default ``RUN/progress.db``); running the command
again resumes it.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from games.core import Policy
from games.family import MatchConditions
from games.files import CheckpointError, atomic_write_text
from games.matches import MatchRunner
from games.registry import family_of, make_game, resolve
from league.db import LeagueDB
from league.ratings import PlayerRating
from league.snapshots import load_player_snapshot
from league.tournament import TournamentConfig, bot_tournament, run_tournament
from selfplay.cli_common import UserError, check_output, first_paragraph, positive_int, run_tool
from selfplay.config_files import read_yaml, saved_config_from_mapping
from selfplay.league_rating import snapshot_agent
from selfplay.policy import FrozenPolicy


def rating_trend(updates: list[float], mu: list[float], sigma: list[float]) -> dict[str, float]:
    """Does the rating rise with training? The least-squares line through ``(update, mu)``
    weighted by ``1 / sigma**2`` (each snapshot is rated only against the frozen pool, so the
    errors are independent): ``slope`` (mu per update), its standard error ``slope_se`` and
    ``z = slope / slope_se``; also Spearman's rank correlation ``spearman`` of update and mu
    (no weights, no linearity assumed)."""
    x, y, s = (np.asarray(v, np.float64) for v in (updates, mu, sigma))
    if len(x) < 3:
        raise ValueError("a trend needs at least 3 snapshots")
    w = 1.0 / s**2
    design = np.stack([np.ones_like(x), x], 1)  # [n, 2]
    normal = design.T @ (w[:, None] * design)
    slope = float(np.linalg.solve(normal, design.T @ (w * y))[1])
    slope_se = float(np.sqrt(np.linalg.inv(normal)[1, 1]))
    ranks_x = np.argsort(np.argsort(x, kind="stable"), kind="stable")
    ranks_y = np.argsort(np.argsort(y, kind="stable"), kind="stable")
    spearman = float(np.corrcoef(ranks_x, ranks_y)[0, 1])
    return {"slope": slope, "slope_se": slope_se, "z": slope / slope_se, "spearman": spearman}


def calibrate(db: LeagueDB, game: str, bots: list[str], map_name: str | None,
              max_steps: int | None, games: int, parallel: int) -> dict[str, Any]:
    """The bots' ratings on ``map_name`` from a round robin among themselves (``games`` per
    pair, both sides; stored under a ``calibration`` tournament of ``db``). Not adaptive: a
    bot that wins every game never gets its σ below TrueSkill's per-game drift."""
    config = TournamentConfig(games_per_pair=games, num_envs=parallel, map=map_name or "",
                              name="calibration")
    bot_tournament(db, game, bots, config, max_steps=max_steps, parallel=parallel)
    return {b.name: b for b in db.leaderboard() if b.name in bots}


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--run", type=Path, required=True,
                        help="a league training run (of a two-player game with bots)")
    parser.add_argument("--bots", default="RandomBiased,WorkerRush,LightRush",
                        help="the reference bots (the microRTS default; name the game's own)")
    parser.add_argument("--games", type=positive_int, default=8,
                        help="games per snapshot and bot")
    parser.add_argument("--calibrate-games", type=positive_int, default=20,
                        help="games per pair of bots in the calibration round robin")
    parser.add_argument("--num-envs", type=positive_int, default=8)
    parser.add_argument("--db", type=Path, help="default RUN/progress.db")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()

    run_config = saved_config_from_mapping(read_yaml(args.run / "config.yaml"))
    game = resolve(run_config.game.name).name
    family = family_of(game)
    options = dict(run_config.game.options)
    if family.has_maps and (not options.get("map") or options.get("maps")):
        raise UserError("the run must use one map (game.options.map)")
    map_name = str(options["map"]) if family.has_maps else None
    length = options.get(family.length_option) if family.length_option else None
    max_steps = int(length) if isinstance(length, int) else None
    bots = [b.strip() for b in args.bots.split(",") if b.strip()]
    bots = [family.match_setup(game, b, 1, 0).opponent_name or b for b in bots]
    if len(set(bots)) < 2:
        raise UserError("--bots: name at least two different bots")
    source_path = args.run / "league.db"  # checked before any game is played
    if not source_path.is_file():
        raise UserError(f"no league database at {source_path}: the run kept no league")
    inputs = [source_path, args.run / "config.yaml"]
    if args.db is not None:  # the rating pool must stay frozen: never the run's own league
        check_output("--db", args.db, [*inputs, args.run / "progress-calibration.db"])
    if args.json_out:
        check_output("--json-out", args.json_out,
                     [*inputs, args.db or args.run / "progress.db",
                      args.run / "progress-calibration.db"])
    start = time.perf_counter()

    # 1. calibrate the bots in a database of their own, 2. freeze them in the progress one
    calib_db = LeagueDB(args.run / "progress-calibration.db", game=game)
    try:
        calibrated = calibrate(calib_db, game, bots, map_name, max_steps, args.calibrate_games,
                               args.num_envs)
    finally:
        calib_db.close()
    db = LeagueDB(args.db or args.run / "progress.db", game=game)
    source = LeagueDB(source_path, game=game, create=False)
    try:
        for name, standing in calibrated.items():
            db.add_player(name, "bot", frozen=True, rating=PlayerRating(
                standing.mu, standing.sigma, standing.elo))
        snapshots = sorted((p for p in source.players() if p.kind == "snapshot"),
                           key=lambda p: int(p.metadata.get("update", 0)))
        match_options = {**options, **family.match_setup(game, None, 1, 0, map_name).options}
        spec_game = make_game(game, num_envs=1, seed=0, options=match_options)
        spec = spec_game.spec
        spec_game.close()
        conditions = MatchConditions(options=options, num_envs=args.num_envs, seed=0,
                                     map_name=map_name, max_steps=max_steps)
        game_factory = family.match_games(game, options, map_name)

        def policy_factory(name: str) -> Policy:
            player = db.player(name)
            if player.kind == "bot":
                return family.opponent(game, name, 0)
            snapshot = load_player_snapshot(source, name)
            if snapshot is None:
                raise CheckpointError(f"snapshot {name} is missing or corrupt")  # skipped
            return FrozenPolicy(snapshot_agent(spec, run_config.network, run_config.normalize,
                                               snapshot))

        def runner(policies: Mapping[int, Policy]) -> MatchRunner:
            return family.match_runner(game, policies, conditions, game_factory)

        rows = []
        for snap in snapshots:
            meta = snap.metadata
            db.add_player(snap.name, "snapshot", path=snap.path, metadata=meta)
            config = TournamentConfig(games_per_pair=args.games, num_envs=args.num_envs,
                                      map=map_name or "", name=f"gauntlet@{snap.name}")
            run_tournament(db, [snap.name, *calibrated], policy_factory, game_factory, config,
                           focus=[snap.name], runner=runner)
            rating = db.rating(snap.name)
            wins: dict[str, list[int]] = {}
            me = db.player(snap.name).id
            for m in db.matches():
                ids = {m.player_a, m.player_b}
                if me not in ids:
                    continue
                other = db.player((ids - {me}).pop()).name
                won = m.outcome if m.player_a == me else -m.outcome
                w = wins.setdefault(other, [0, 0, 0])
                w[0 if won > 0 else (1 if won < 0 else 2)] += 1
            rows.append({"snapshot": snap.name, "update": meta.get("update"),
                         "env_steps": meta.get("env_steps"), "mu": rating.mu,
                         "sigma": rating.sigma, "conservative": rating.mu - 3 * rating.sigma,
                         "vs": {k: {"wins": v[0], "losses": v[1], "draws": v[2]}
                                for k, v in wins.items()}})
            print(f"{snap.name:>28}  mu {rating.mu:6.2f}  sigma {rating.sigma:5.2f}  "
                  + "  ".join(f"{k} {v[0]}-{v[1]}-{v[2]}" for k, v in wins.items()),
                  flush=True)
    finally:
        source.close()
        db.close()
    result = {"run": str(args.run), "map": map_name, "games_per_bot": args.games,
              "anchors": {n: {"mu": s.mu, "sigma": s.sigma, "games": s.games}
                          for n, s in calibrated.items()},
              "snapshots": rows, "seconds": time.perf_counter() - start,
              "machine": f"{platform.machine()} {platform.node()}",
              "date": time.strftime("%Y-%m-%d %H:%M")}
    print("anchors: " + ", ".join(f"{n} {s.mu:.2f}±{s.sigma:.2f}" for n, s in calibrated.items()),
          file=sys.stderr)
    if len(rows) >= 3:
        trend = rating_trend([float(r["update"]) for r in rows], [r["mu"] for r in rows],
                             [r["sigma"] for r in rows])
        result["trend"] = trend
        print(f"trend: mu {10 * trend['slope']:+.2f} ± {10 * trend['slope_se']:.2f} per 10 "
              f"updates (z {trend['z']:.1f}), Spearman {trend['spearman']:.2f}", file=sys.stderr)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(result, indent=1))


if __name__ == "__main__":
    run_tool(main)
