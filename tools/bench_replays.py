"""Replay benchmarks: recording speed beside the same bots' native games, shard size, and how
fast a shard decodes into labelled training samples.

    python -m tools.bench_replays --players CoacAI Mayari --map basesWorkers16x16A --games 40

Recording: ``selfplay record``'s code in one process, games per core-hour; the peer is the
same pairings played natively by the engine's bots (``play_bot_games``, one process, no
recording). Decoding: a :class:`~games.microrts.replays.ReplayGame` of ``--envs`` games replaying
the folder, labelled seat-steps per second (what a cloning update consumes). Prints one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from selfplay.cli_common import first_paragraph, run_tool


def bench_recording(players: list[str], map_name: str, games: int, max_steps: int,
                    folder: Path) -> dict[str, Any]:
    from games.microrts.botmatch import BotGame, play_bot_games
    from games.microrts.recorder import RecordPlan, check_plan, record

    plan = check_plan(RecordPlan(tuple(players), (map_name,), games, shard_games=games,
                                 max_steps=max_steps, parallel=16))
    summary = record(plan, folder)
    pairs = plan.shard_games_of(0)
    start = time.perf_counter()
    native = play_bot_games([BotGame(a, b, map_name, max_steps, seed=i)
                             for i, (a, b) in enumerate(pairs)], parallel=16)
    native_s = time.perf_counter() - start
    shard = next(folder.glob("shard-*.npz"))
    return {"games": games, "record_s": summary["seconds"],
            "record_games_per_core_hour": summary["games_per_hour"],
            "native_s": native_s, "native_games_per_core_hour": games / native_s * 3600,
            "record_vs_native": native_s / summary["seconds"],
            "native_mean_length": float(np.mean([r.length for r in native])),
            "shard_bytes": shard.stat().st_size,
            "bytes_per_game": shard.stat().st_size / games}


def bench_decoding(folder: Path, map_name: str, envs: int, seconds: float) -> dict[str, Any]:
    from games.family import Teachers
    from games.registry import family_of

    game = family_of("microrts").teacher_game(
        "microrts", Teachers(replays=folder, validation_share=0.0), envs, 0,
        {"map": map_name})
    try:
        game.reset()
        for _ in range(200):  # JIT warm-up
            game.step(game.teacher_actions)  # type: ignore[attr-defined]
        steps = labelled = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            labelled += int(game.imitate.sum())  # type: ignore[attr-defined]
            game.step(game.teacher_actions)  # type: ignore[attr-defined]
            steps += 1
        elapsed = time.perf_counter() - start
    finally:
        game.close()
    return {"envs": envs, "env_steps_per_s": steps * envs / elapsed,
            "labelled_seat_steps_per_s": labelled / elapsed}


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--players", nargs="+", default=["CoacAI", "Mayari"])
    parser.add_argument("--map", default="basesWorkers16x16A")
    parser.add_argument("--games", type=int, default=40)
    parser.add_argument("--max-steps", type=int, default=2000)
    parser.add_argument("--envs", type=int, default=24)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--out", type=Path, help="keep the recorded folder here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.out or Path(tmp) / "replays"
        result: dict[str, Any] = {"machine": platform.processor() or platform.machine(),
                                  "date": time.strftime("%Y-%m-%d"), "map": args.map,
                                  "players": args.players}
        result["recording"] = bench_recording(args.players, args.map, args.games,
                                              args.max_steps, folder)
        result["decoding"] = bench_decoding(folder, args.map, args.envs, args.seconds)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    run_tool(main)
