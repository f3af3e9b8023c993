"""microRTS learning benchmark: train against one bot for a wall-clock budget, then play it.

    .venv/bin/python tools/bench_microrts_learning.py --map basesWorkers10x10 \
        --bot RandomBiased --minutes 15 --games 100 --json-out runs/bench/mrts10_rb.json
    .venv/bin/python tools/bench_microrts_learning.py --map basesWorkers8x8 \
        --bot WorkerRush --minutes 60 --games 100

Training uses hyperparams/microrts.yaml with every env playing ``--bot`` (no self-play, no
league), plus any ``--set``. The learning rate anneals to zero as the budget runs out (the
step horizon is re-planned after every update from the measured speed; ``--horizon`` fixes it
instead). No update starts that would end past the budget (JVM start included). It saves a
checkpoint, and plays ``--games`` evaluation games against the bot with
sides alternating (``selfplay play``). Reported: the training curve (win rate of the last
games per update), the env / inference / learning split of the wall time, and the
evaluation's wins, losses, draws and 95 % interval.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from games.core import HasRewardComponents
from games.files import atomic_write_text
from selfplay.acting import StepListener
from selfplay.checkpoint import resolve_checkpoint
from selfplay.cli_common import first_paragraph, positive_int, run_tool
from selfplay.component_returns import ComponentReturns
from selfplay.config_files import build_config
from selfplay.league_training import attach, describe
from selfplay.play import play
from selfplay.tracking import MetricSink, RunDir
from selfplay.train import build_trainer


def fresh_run_dir(root: Path, prefix: str) -> RunDir:
    """A new run directory ``root/prefix-<date>-<time>`` (``-2``, ``-3``, ... after it when a
    run started in the same second has that name: two benchmarks side by side)."""
    root.mkdir(parents=True, exist_ok=True)
    name = f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"
    for n in range(1, 1000):
        path = root / (name if n == 1 else f"{name}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return RunDir(path)
    raise FileExistsError(f"{root}: no free run directory named {name}-N")


def train_for(minutes: float, overrides: list[str], seed: int, horizon: int | None,
              root: Path, game: str = "microrts") -> dict[str, Any]:
    """Train ``game`` until ``minutes`` of wall time have passed; returns the run's record. An
    ``init_from`` among ``overrides`` starts the network from that checkpoint, as
    ``selfplay train --init-from`` does."""
    start = time.perf_counter()
    config = build_config(game, overrides=["log.progress=false", *overrides], seed=seed,
                          total_steps=horizon or 10**9)
    run = fresh_run_dir(root, f"{game}-learn-s{seed}")
    run.write_config(config)
    trainer = build_trainer(config, run, None if config.init_from is None
                            else resolve_checkpoint(config.init_from))
    league = attach(trainer, run.path)  # snapshots and rating games, as `selfplay train` does
    played = trainer.game
    if isinstance(played, HasRewardComponents):  # reward terms logged one by one
        components = ComponentReturns(list(played.reward_component_names),
                                      config.log.return_window)
        trainer.add_episode_listener(StepListener(  # the components as the games ended
            lambda _: played.episode_reward_components().copy(), components.add))
        trainer.add_update_hook(components.metrics)
    league_info: dict[str, Any] = {}
    sink = MetricSink(run, config)
    if league is not None:  # each snapshot's rating at its step, as `selfplay train` logs it
        league.log_ratings_to(sink)
    curve: list[tuple[int, float, float | None]] = []
    split = {"env": 0.0, "inference": 0.0, "learn": 0.0}
    deadline = start + minutes * 60
    last = 0.0  # the previous update's duration: no update is started that would overrun
    try:
        while (time.perf_counter() + last < deadline and trainer.update < trainer.num_updates):
            begin = time.perf_counter()
            trainer.collect()
            tick = time.perf_counter()
            metrics = trainer.learn()
            trainer.timer.add("learn", tick)
            trainer.update += 1
            for name, seconds in trainer.timer.pop().items():
                split[name] = split.get(name, 0.0) + seconds
            metrics.update(trainer.episodes.summary())
            for hook in trainer.after_update:  # the league's snapshots and rating games
                metrics.update(hook())
            sink.log(trainer.global_step, metrics)
            curve.append((trainer.global_step, round(time.perf_counter() - start, 1),
                          metrics.get("episode/win_rate")))
            last = time.perf_counter() - begin
            if horizon is None:  # anneal the learning rate to zero when the budget ends
                updates_left = max(0, int((deadline - time.perf_counter()) / last))
                trainer.config = replace(trainer.config, total_steps=(
                    trainer.update + updates_left) * trainer.steps_per_update)
        checkpoint = trainer.save(final=True)
        if league is not None:  # the rater's last tournaments: every snapshot ends up rated
            league_info.update(league.finish())
        league_info.update(describe(league))
    finally:
        sink.close()
        trainer.game.close()
        if league is not None:
            league.close()
    elapsed = time.perf_counter() - start
    return {"run_dir": str(run.path), "checkpoint": str(checkpoint),
            "steps": trainer.global_step, "updates": trainer.update,
            "seconds": round(elapsed, 1), "steps_per_second": round(trainer.global_step / elapsed),
            "time_split": {k: round(v / elapsed, 3) for k, v in split.items()},
            "curve": curve, "league": league_info}


def evaluate(checkpoint: str, bot: str, games: int, seed: int,
             map_name: str | None = None, deterministic: bool = False) -> dict[str, Any]:
    """``games`` games of ``checkpoint`` against ``bot``, sides alternating (actions sampled,
    or the most likely with ``deterministic``); printed and returned (``selfplay play``'s
    result with ``seconds``)."""
    start = time.perf_counter()
    result = play(checkpoint, bot, games=games, map_name=map_name, seed=seed,
                  deterministic=deterministic)
    result["seconds"] = round(time.perf_counter() - start, 1)
    low, high = result["ci95"]
    where = f" on {map_name}" if map_name else ""
    where += " (most likely actions)" if deterministic else ""
    print(f"evaluation vs {bot}{where}: {result['wins']} wins, {result['losses']} losses, "
          f"{result['draws']} draws of {result['games']}; win rate {result['win_rate']:.1%} "
          f"(95% CI {low:.1%}-{high:.1%})", flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--map", default="basesWorkers10x10")
    parser.add_argument("--bot", default="RandomBiased")
    parser.add_argument("--minutes", type=float, default=15.0)
    parser.add_argument("--games", type=positive_int, default=100, help="evaluation games")
    parser.add_argument("--num-envs", type=positive_int, default=24)
    parser.add_argument("--horizon", type=int, default=None,
                        help="steps the learning-rate annealing is planned for (default: "
                             "re-planned after every update to reach zero when the budget "
                             "ends)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--root", type=Path, default=Path("runs/bench"))
    args = parser.parse_args()
    overrides = [f"game.num_envs={args.num_envs}", f"game.options.map={args.map}",
                 f"game.options.bots=[{args.bot}]", "game.options.num_selfplay_envs=0",
                 "league.enabled=false", *args.set]
    trained = train_for(args.minutes, overrides, args.seed, args.horizon, args.root)
    last = next((w for _, _, w in reversed(trained["curve"]) if w is not None), None)
    print(f"trained {trained['steps']} steps in {trained['seconds']} s "
          f"({trained['steps_per_second']} steps/s, split {trained['time_split']}); "
          f"training win rate at the end {last}", flush=True)
    result = evaluate(trained["checkpoint"], args.bot, args.games, args.seed + 1000, args.map)
    summary = {"map": args.map, "bot": args.bot, "minutes": args.minutes,
               "overrides": overrides, "machine": f"{platform.machine()} {platform.node()}",
               "cpus": len(__import__("os").sched_getaffinity(0)),
               "date": time.strftime("%Y-%m-%d"), "training": trained, "evaluation": result}
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(summary, indent=1))


if __name__ == "__main__":
    run_tool(main)
