"""Lux learning benchmark: clone the rule-based opponent, then train `selfplay train --game lux`
from the clone, within one wall-clock budget; then play the rule-based opponent.

    .venv/bin/python tools/bench_lux_learning.py --minutes 60 --bc-minutes 20 --games 100 \\
        --json-out runs/bench/lux_learning.json

The first ``--bc-minutes`` (0: none) clone ``--teachers`` (default the heuristic, playing both
seats) as ``selfplay bc --game lux --teachers heuristic`` does (the ``bc`` section of
hyperparams/lux.yaml, plus ``--bc-set``); the rest of ``--minutes`` trains PPO from that
checkpoint (``train --init-from``), so the whole budget includes the cloning; with
``--bc-minutes`` equal to ``--minutes`` the clone is the agent evaluated (no PPO, no ratings),
and ``--eval-clone`` plays the clone as well as the final agent. ``--bc-env-steps N`` makes the
cloning budget N env-steps within ``--bc-minutes``: the schedules follow the env-steps, not the
clock, so one seed gives one clone whatever the host's speed (on wall time alone, one recipe
and seed won 82 and 89 of the same 100 games on two days: BENCHMARKS.md, session 48).

Training uses hyperparams/lux.yaml (self-play through the league, the heuristic bot in a share
of the games, TrueSkill ratings of the snapshots against the random and heuristic anchors), plus
any ``--set``; the learning rate anneals to zero as the budget runs out (as in
``tools/bench_microrts_learning.py``, whose loop this reuses). Then ``--games`` full games
against ``--bot`` (default ``heuristic``) with sides alternating (``selfplay play``). Reported:
the training curve, the time split, the snapshots' ratings over the run (league database), and
the evaluation's wins, losses, draws and 95 % interval, with actions sampled (as in training)
and with the most likely actions (unless ``--sampled-only``). With ``--bc-set
bc.snapshot_every=N`` the clone's snapshots are rated too, and training goes on in the clone's
league database, so the ratings cover the whole run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_microrts_learning import evaluate, fresh_run_dir, train_for  # noqa: E402

from games.files import atomic_write_text  # noqa: E402
from selfplay.bc import build_cloner  # noqa: E402
from selfplay.cli_common import first_paragraph, positive_int, run_tool
from selfplay.clone_league import CloneLeague  # noqa: E402
from selfplay.config_files import build_config
from selfplay.tracking import MetricSink  # noqa: E402


def budget_progress(elapsed: float, seconds: float, steps: int, env_steps: int) -> float:
    """The share of a cloning budget spent: of ``env_steps`` env-steps when that is positive
    (a host's speed then changes nothing but when the run ends), else of ``seconds`` of wall
    time. Clipped to [0, 1]."""
    spent = steps / env_steps if env_steps > 0 else elapsed / seconds
    return min(1.0, max(0.0, spent))


def clone_for(minutes: float, teachers: list[str], overrides: list[str], seed: int,
              root: Path, env_steps: int = 0, game: str = "lux") -> dict[str, Any]:
    """Clone ``teachers`` for ``minutes`` of wall time (``selfplay bc``'s cloner, the learning
    rate annealed to zero as the budget ends); the run's record with its final checkpoint.

    With ``env_steps`` > 0 the budget is that many env-steps, capped by ``minutes``: the
    learning rate and the students' share (``bc.student_ramp``) follow the env-steps, so a
    seed gives the same run on any host that finishes within the time; one that does not
    stops at the deadline (``budget`` in the record says which ended it)."""
    start = time.perf_counter()
    config = build_config(game, overrides=["log.progress=false", f"bc.teachers={teachers}",
                                           "bc.total_steps=1000000000", *overrides], seed=seed)
    run = fresh_run_dir(root, f"{game}-bc-s{seed}")
    run.write_config(config)
    cloner = build_cloner(config, run)
    if config.bc.snapshot_every > 0:  # the clone's snapshots rated as it learns
        cloner.league = CloneLeague(cloner, run.path, config.league, config.bc.snapshot_every)
    sink = MetricSink(run, config)
    if cloner.league is not None:  # each snapshot's rating at its step, as `selfplay bc` does
        cloner.league.log_ratings_to(sink)
    seconds = minutes * 60
    deadline = start + seconds
    last, base_lr, metrics, ended = 0.0, config.bc.learning_rate, {}, "time"
    try:
        while True:
            begin = time.perf_counter()
            progress = budget_progress(begin - start, seconds, cloner.global_step, env_steps)
            if env_steps > 0 and progress >= 1.0:
                ended = "env_steps"
                break
            if begin + last >= deadline:  # the next update would end past the deadline
                break
            for group in cloner.optimizer.param_groups:  # linear decay to 0 at the budget's end
                group["lr"] = base_lr * (1.0 - progress)
            cloner.progress = progress  # bc.student_ramp over the budget
            metrics = cloner.run_update()
            sink.log(cloner.global_step, metrics)
            last = time.perf_counter() - begin
        checkpoint = cloner.loop.save(final=True)
        league = {}
        if cloner.league is not None:  # after the budget: every snapshot rated
            cloner.league.finish()
            league = cloner.league.describe()
    finally:
        sink.close()
        cloner.close()
    elapsed = time.perf_counter() - start
    keep = ("bc/accuracy/", "val/", "loss/bc_")
    return {"run_dir": str(run.path), "checkpoint": str(checkpoint),
            "league_db": league.get("league_db"),
            "steps": cloner.global_step, "updates": cloner.update, "seconds": round(elapsed, 1),
            "budget": ended, "env_steps_budget": env_steps,
            "steps_per_second": round(cloner.global_step / elapsed),
            "last": {k: round(v, 4) for k, v in metrics.items() if k.startswith(keep)}}


def ratings(db: Path) -> list[dict[str, Any]]:
    """The players of league database ``db`` in the order they joined (anchors, then the
    snapshots: the clone's, then training's) with their TrueSkill and games."""
    if not db.exists():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        rows = con.execute("SELECT p.name, p.kind, r.mu, r.sigma, r.games, r.wins, r.losses "
                           "FROM players p JOIN ratings r ON r.player_id = p.id "
                           "ORDER BY p.id").fetchall()
    keys = ("name", "kind", "mu", "sigma", "games", "wins", "losses")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--games", type=positive_int, default=100, help="evaluation games")
    parser.add_argument("--bot", default="heuristic")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--bc-minutes", type=float, default=0.0,
                        help="of --minutes, cloning the teachers first (0: PPO only; all of "
                             "--minutes: cloning only, the clone is evaluated)")
    parser.add_argument("--bc-env-steps", type=int, default=0,
                        help="the cloning budget in env-steps, within --bc-minutes (0: wall "
                             "time alone): the learning rate and the students' share follow "
                             "the env-steps, so a seed gives the same clone on any host "
                             "that finishes in time")
    parser.add_argument("--eval-clone", action="store_true",
                        help="also play the clone against --bot before PPO goes on from it "
                             "(actions sampled; after the budget)")
    parser.add_argument("--sampled-only", action="store_true",
                        help="evaluate with sampled actions only (not also the most likely)")
    parser.add_argument("--teachers", default="heuristic", help="comma-separated")
    parser.add_argument("--bc-set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--root", type=Path, default=Path("runs/bench"))
    args = parser.parse_args()
    start = time.perf_counter()
    cloned, overrides = None, list(args.set)
    if args.bc_minutes > 0:
        cloned = clone_for(args.bc_minutes, args.teachers.split(","), args.bc_set, args.seed,
                           args.root, env_steps=args.bc_env_steps)
        print(f"cloned {cloned['steps']} steps in {cloned['seconds']} s: {cloned['last']}",
              flush=True)
        overrides.append(f"init_from={cloned['checkpoint']}")
        if cloned["league_db"] is not None:  # training goes on in the clone's league
            overrides.append(f"league.db={cloned['league_db']}")
    trained: dict[str, Any] | None = None
    league: list[dict[str, Any]] = []
    if cloned is None or args.bc_minutes < args.minutes:
        left = args.minutes - (time.perf_counter() - start) / 60
        trained = train_for(left, overrides, args.seed, None, args.root, game="lux")
        print(f"trained {trained['steps']} steps in {trained['seconds']} s "
              f"({trained['steps_per_second']} steps/s, split {trained['time_split']})",
              flush=True)
    db = next((Path(o.split("=", 1)[1]) for o in reversed(overrides)
               if o.startswith("league.db=")), None)
    if trained is not None or db is not None:
        league = ratings(db or Path(trained["run_dir"]) / "league.db")
        for row in league:
            print("  ", row, flush=True)
    final = (trained or cloned or {})["checkpoint"]
    result = evaluate(final, args.bot, args.games, args.seed + 1000)
    argmax = (None if args.sampled_only else
              evaluate(final, args.bot, args.games, args.seed + 1000, deterministic=True))
    clone_result = (evaluate(cloned["checkpoint"], args.bot, args.games, args.seed + 1000)
                    if cloned is not None and trained is not None and args.eval_clone else None)
    summary = {"bot": args.bot, "minutes": args.minutes, "overrides": args.set,
               "machine": f"{platform.machine()} {platform.node()}",
               "cpus": len(os.sched_getaffinity(0)), "date": time.strftime("%Y-%m-%d"),
               "cloning": cloned, "training": trained, "league": league, "evaluation": result,
               "evaluation_most_likely": argmax, "evaluation_of_the_clone": clone_result}
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    run_tool(main)
