"""PettingZoo Atari learning benchmark: self-play training for a wall-clock budget, then its curve.

    .venv/bin/python tools/bench_pettingzoo_learning.py --game pettingzoo/pong_v3 --minutes 50 \
        --json-out runs/bench/pong.json

Runs ``selfplay train`` (hyperparams/pettingzoo.yaml plus ``--set``) in a subprocess and stops
it with Ctrl-C when the budget ends (the run writes a checkpoint and can be resumed with
``selfplay train --resume``). By default every env plays latest-vs-latest self-play, as
CleanRL's ``ppo_pettingzoo_ma_atari.py`` does (``--league-mix`` keeps the league's opponent mix
and the console's built-in opponent instead); the league still freezes and rates a snapshot every
``league.snapshot_every`` updates. Reported: the curve of mean episode length (game steps after
frame skip, CleanRL's ``episodic_length``) and return against agent steps (2 per game step), and
every snapshot's TrueSkill from the run's league database.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from games.files import atomic_write_text
from league.db import LeagueDB
from selfplay.cli_common import first_paragraph, positive_int, run_tool

SEATS = 2  # agent steps per game step


def train(game: str, minutes: float, overrides: list[str], run_dir: Path) -> float:
    """Run ``selfplay train`` until ``minutes`` pass, then Ctrl-C it; returns seconds run."""
    cmd = [sys.executable, "-m", "selfplay.cli", "train", "--game", game,
           "--run-dir", str(run_dir), "--no-progress"]
    for item in overrides:
        cmd += ["--set", item]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd)
    try:
        code = proc.wait(timeout=minutes * 60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)  # checkpoint, then exit
        try:
            proc.wait(timeout=600)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    else:  # ended before its time: an error, said by the command itself
        if code != 0:
            raise SystemExit(code)
    return time.perf_counter() - start


def curve(run_dir: Path, points: int) -> list[dict[str, Any]]:
    """About ``points`` rows of the run's metrics: agent steps, episode length, return."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()
            if line.strip()]
    rows = [r for r in rows if "episode/length_mean" in r]
    if not rows:
        return []
    stride = max(1, len(rows) // points)
    picked = rows[stride - 1::stride]
    if picked[-1] is not rows[-1]:
        picked.append(rows[-1])
    t0 = rows[0]["time"]
    return [{"agent_steps": SEATS * int(r["step"]), "minutes": round((r["time"] - t0) / 60, 1),
             "episode_length": round(r["episode/length_mean"], 1),
             "return": round(r.get("episode/return_mean", float("nan")), 2),
             "steps_per_second": round(r.get("perf/steps_per_second", float("nan")))}
            for r in picked]


def snapshot_ratings(run_dir: Path) -> list[dict[str, Any]]:
    """Every snapshot of the run with its TrueSkill and Elo, oldest first."""
    path = run_dir / "league.db"
    if not path.is_file():
        return []
    with LeagueDB(path) as db:
        standings = {s.player_id: s for s in db.leaderboard()}
        out = []
        for player in db.players():
            if player.kind != "snapshot" or player.id not in standings:
                continue
            s = standings[player.id]
            steps = SEATS * int(player.metadata.get("env_steps", 0))
            out.append({"name": s.name, "agent_steps": steps,
                        "mu": round(s.mu, 2), "sigma": round(s.sigma, 2),
                        "conservative": round(s.conservative, 2), "elo": round(s.elo, 1),
                        "games": s.games})
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--game", default="pettingzoo/pong_v3")
    parser.add_argument("--minutes", type=float, default=50.0)
    parser.add_argument("--league-mix", action="store_true",
                        help="keep the league's opponent mix (past snapshots by PFSP, the "
                             "console's opponent) instead of pure latest-vs-latest self-play")
    parser.add_argument("--points", type=positive_int, default=12, help="rows of the printed curve")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--root", type=Path, default=Path("runs/bench"))
    args = parser.parse_args()
    overrides = ([] if args.league_mix else
                 ["league.self_play=1.0", "game.options.builtin_opponent_share=0.0"])
    overrides += args.set
    name = args.game.split("/")[-1]
    run_dir = args.root / f"{name}-learn-{time.strftime('%Y%m%d-%H%M%S')}"
    seconds = train(args.game, args.minutes, overrides, run_dir)
    rows = curve(run_dir, args.points)
    ratings = snapshot_ratings(run_dir)
    print(f"{args.game}: {seconds / 60:.1f} minutes of training in {run_dir}")
    print("agent steps   minutes   episode length   return   game-steps/s")
    for r in rows:
        print(f"{r['agent_steps']:>11,}   {r['minutes']:>7}   {r['episode_length']:>14}"
              f"   {r['return']:>6}   {r['steps_per_second']:>12}")
    print("snapshot                         agent steps      mu   sigma   mu-3sigma   games")
    for s in ratings:
        print(f"{s['name']:<32} {s['agent_steps']:>11,}  {s['mu']:>6}  {s['sigma']:>6}"
              f"  {s['conservative']:>10}  {s['games']:>6}")
    if args.json_out:
        summary = {"game": args.game, "minutes": args.minutes, "seconds": round(seconds, 1),
                   "overrides": overrides, "run_dir": str(run_dir), "curve": rows,
                   "snapshots": ratings, "machine": f"{platform.machine()} {platform.node()}",
                   "cpus": len(os.sched_getaffinity(0)), "date": time.strftime("%Y-%m-%d")}
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(summary, indent=1))


if __name__ == "__main__":
    run_tool(main)
