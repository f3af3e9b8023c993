"""Lux Kaggle episodes made here: games of our scripted bots in the official engine, written as
Kaggle writes them (no replay set of the competition can be downloaded). For trying
``selfplay import-replays --game lux`` and ``selfplay bc --game lux --replays`` end to end, and
for the cloning benchmarks.

    .venv/bin/python tools/lux_kaggle_episodes.py --games 8 --steps 200 --out runs/lux-kaggle
    .venv/bin/selfplay import-replays --game lux runs/lux-kaggle --out runs/lux-replays

Game ``k`` plays seed ``--seed + k``, ``--bots`` (default: the heuristic on both sides, each
with its own generator); files ``episode-<k>.json``, existing ones kept (a rerun adds the
missing). Prints one JSON line per game.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from selfplay.cli_common import first_paragraph, positive_int, run_tool


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--games", type=positive_int, default=8)
    parser.add_argument("--steps", type=positive_int, default=1000,
                        help="main-phase steps per game")
    parser.add_argument("--out", required=True)
    parser.add_argument("--bots", default="heuristic,heuristic",
                        help="the two players: bots of games.lux.bots, A,B")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        parser.error(f"--out {out} is a file; name a folder for the episodes")
    from games.lux.bots import BOTS
    from games.lux.kaggle_play import GridPlayer, write_kaggle_episode

    names = [name.strip().lower() for name in args.bots.split(",")]
    unknown = [name for name in names if name not in BOTS]
    if len(names) != 2 or unknown:
        parser.error(f"--bots takes two of {', '.join(sorted(BOTS))}, got {args.bots!r}")
    out.mkdir(parents=True, exist_ok=True)
    for k in range(args.games):
        path = out / f"episode-{k:05d}.json"
        if path.exists():
            continue
        seed = args.seed + k
        start = time.perf_counter()
        players = [GridPlayer(BOTS[name], seed=2 * seed + side)
                   for side, name in enumerate(names)]
        played = write_kaggle_episode(path, seed, players, max_episode_length=args.steps,
                                      team_names=(names[0], names[1]))
        print(json.dumps({"file": str(path), "seed": seed,
                          "rewards": played.document.get("rewards"),
                          "seconds": round(time.perf_counter() - start, 1)}), flush=True)


if __name__ == "__main__":
    run_tool(main)
