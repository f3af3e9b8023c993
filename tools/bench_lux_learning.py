"""Lux learning benchmark: train `selfplay train --game lux` for a wall-clock budget, then play
the rule-based opponent.

    .venv/bin/python tools/bench_lux_learning.py --minutes 60 --games 100 \\
        --json-out runs/bench/lux_learning.json

Training uses hyperparams/lux.yaml (self-play through the league, the heuristic bot in a share
of the games, TrueSkill ratings of the snapshots against the random and heuristic anchors), plus
any ``--set``; the learning rate anneals to zero as the budget runs out (as in
``tools/bench_microrts_learning.py``, whose loop this reuses). Then ``--games`` full games
against ``--bot`` (default ``heuristic``) with sides alternating (``selfplay play``). Reported:
the training curve, the time split, the snapshots' ratings over the run (league database), and
the evaluation's wins, losses, draws and 95 % interval.
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

from bench_microrts_learning import evaluate, train_for  # noqa: E402


def ratings(run_dir: Path) -> list[dict[str, Any]]:
    """The league's players in the order they joined (anchors, then the snapshots) with their
    TrueSkill and games."""
    db = run_dir / "league.db"
    if not db.exists():
        return []
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as con:
        rows = con.execute("SELECT p.name, p.kind, r.mu, r.sigma, r.games, r.wins, r.losses "
                           "FROM players p JOIN ratings r ON r.player_id = p.id "
                           "ORDER BY p.id").fetchall()
    keys = ("name", "kind", "mu", "sigma", "games", "wins", "losses")
    return [dict(zip(keys, row, strict=True)) for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--games", type=int, default=100, help="evaluation games")
    parser.add_argument("--bot", default="heuristic")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--root", type=Path, default=Path("runs/bench"))
    args = parser.parse_args()
    trained = train_for(args.minutes, list(args.set), args.seed, None, args.root, game="lux")
    print(f"trained {trained['steps']} steps in {trained['seconds']} s "
          f"({trained['steps_per_second']} steps/s, split {trained['time_split']})", flush=True)
    league = ratings(Path(trained["run_dir"]))
    for row in league:
        print("  ", row, flush=True)
    result = evaluate(trained["checkpoint"], args.bot, args.games, args.seed + 1000)
    summary = {"bot": args.bot, "minutes": args.minutes, "overrides": args.set,
               "machine": f"{platform.machine()} {platform.node()}",
               "cpus": len(os.sched_getaffinity(0)), "date": time.strftime("%Y-%m-%d"),
               "training": trained, "league": league, "evaluation": result}
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
