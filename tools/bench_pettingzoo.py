"""Throughput of the PettingZoo Atari adapter against CleanRL's SuperSuit pipeline.

Both sides step ``--games`` two-player games (8 by default: CleanRL's ``--num-envs 16`` agent
rows) with uniformly random actions; the timed loop includes drawing the actions. Reported:
agent-steps/s (each game step moves both seats) and the ratio to the peer.

- ``supersuit``: CleanRL ``ppo_pettingzoo_ma_atari``'s env: ``pettingzoo.atari.<game>
  .parallel_env()`` + ``max_observation_v0(2)``, ``frame_skip_v0(4)``, ``clip_reward_v0``,
  ``color_reduction_v0("B")``, ``resize_v1(84, 84)``, ``frame_stack_v1(4)``,
  ``agent_indicator_v0``, ``pettingzoo_env_to_vec_env_v1``, ``concat_vec_envs_v1(games,
  num_cpus=0, base_class="gymnasium")``; ROMs from ale-py (``auto_rom_install_path``);
- ``adapter``: ``games.pettingzoo`` (``make_game("pettingzoo/<game>", num_envs=games)``) with
  the same preprocessing (grayscale instead of the blue channel), episode statistics included;
- ``adapter xN``: the same with ``num_threads=N`` (only where ``--threads`` asks for it).

Pipelines run interleaved (one measurement of each per repeat) and the median is reported, so
that load from other processes affects them alike.
Run: ``python tools/bench_pettingzoo.py [--game pong_v3] [--games 8] [--seconds 5]
[--repeats 3] [--threads 2] [--json]``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from games.pettingzoo.catalog import resolve, rom_directory  # noqa: E402
from games.registry import make_game  # noqa: E402
from selfplay.cli_common import (
    first_paragraph,
    nonnegative_int,
    positive_float,
    positive_int,
    run_tool,
)

# one loop iteration; returns the number of agent steps it made
Step = Callable[[], int]


def supersuit_pipeline(game: str, games: int) -> Any:
    """CleanRL's ``ppo_pettingzoo_ma_atari`` vector env over ``games`` games."""
    import supersuit as ss

    info = resolve(game)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = importlib.import_module(f"pettingzoo.atari.{info.name}")
    env = module.parallel_env(auto_rom_install_path=str(rom_directory()))
    env = ss.max_observation_v0(env, 2)
    env = ss.frame_skip_v0(env, 4)
    env = ss.clip_reward_v0(env, lower_bound=-1, upper_bound=1)
    env = ss.color_reduction_v0(env, mode="B")
    env = ss.resize_v1(env, x_size=84, y_size=84)
    env = ss.frame_stack_v1(env, 4)
    env = ss.agent_indicator_v0(env, type_only=False)
    env = ss.pettingzoo_env_to_vec_env_v1(env)
    return ss.concat_vec_envs_v1(env, games, num_cpus=0, base_class="gymnasium")


def supersuit_step(game: str, games: int, rng: np.random.Generator) -> tuple[Step, Any]:
    envs = supersuit_pipeline(game, games)
    envs.reset(seed=0)
    rows, n = envs.num_envs, int(envs.action_space.n)

    def step() -> int:
        envs.step(rng.integers(0, n, rows))
        return rows

    return step, envs


def adapter_step(game: str, games: int, rng: np.random.Generator,
                 threads: int) -> tuple[Step, Any]:
    env = make_game(f"pettingzoo/{game}", num_envs=games, seed=0,
                    options={"num_threads": threads})
    env.reset()
    shape = (env.spec.num_envs, env.spec.num_seats)
    n = env.spec.action_space.n  # type: ignore[union-attr]
    rows = shape[0] * shape[1]

    def step() -> int:
        env.step(rng.integers(0, n, shape))
        return rows

    return step, env


def measure(step: Step, seconds: float, warmup: int) -> float:
    """Agent steps per second over ``seconds`` after ``warmup`` iterations."""
    for _ in range(warmup):
        step()
    count = 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        count += step()
    return count / elapsed


def run(game: str, games: int, seconds: float, repeats: int, warmup: int,
        threads: list[int]) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    load_before = os.getloadavg()[0]
    pipelines: dict[str, tuple[Step, Any]] = {
        "supersuit": supersuit_step(game, games, rng),
        "adapter": adapter_step(game, games, rng, 1),
    }
    for n in threads:
        if n > 1:
            pipelines[f"adapter x{n}"] = adapter_step(game, games, rng, n)
    samples: dict[str, list[float]] = {name: [] for name in pipelines}
    for _ in range(repeats):
        for name, (step, _) in pipelines.items():
            samples[name].append(measure(step, seconds, warmup))
    for _, env in pipelines.values():
        env.close()
    peer = statistics.median(samples["supersuit"])
    rows = []
    for name, values in samples.items():
        median = statistics.median(values)
        rows.append({"pipeline": name, "games": games, "agent_steps_per_s": round(median, 1),
                     "game_steps_per_s": round(median / 2, 1),
                     "samples": [round(v, 1) for v in values],
                     "vs_supersuit": round(median / peer, 2)})
    load = [round(load_before, 2), round(os.getloadavg()[0], 2)]
    return {"game": game, "games": games, "seconds": seconds, "repeats": repeats,
            "cpus": os.cpu_count(), "load_avg_before_after": load, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--game", default="pong_v3", help="PettingZoo Atari game")
    parser.add_argument("--games", type=positive_int, default=8, help="games stepped together")
    parser.add_argument("--seconds", type=positive_float, default=5.0,
                        help="seconds per measurement")
    parser.add_argument("--repeats", type=positive_int, default=3)
    parser.add_argument("--warmup", type=nonnegative_int, default=20,
                        help="untimed steps per measurement")
    parser.add_argument("--threads", type=int, nargs="*", default=[],
                        help="also measure the adapter with these num_threads")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    result = run(args.game, args.games, args.seconds, args.repeats, args.warmup, args.threads)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    before, after = result["load_avg_before_after"]
    print(f"{args.game}, {args.games} games, random actions, median of {args.repeats} x "
          f"{args.seconds:g} s; {result['cpus']} CPUs, 1-min load average {before} before, "
          f"{after} after")
    print(f"| {'pipeline':<12} | {'agent-steps/s':>13} | {'game-steps/s':>12} | "
          f"{'vs supersuit':>12} |")
    print(f"|{'-' * 14}|{'-' * 15}|{'-' * 14}|{'-' * 14}|")
    for row in result["rows"]:
        print(f"| {row['pipeline']:<12} | {row['agent_steps_per_s']:>13,.0f} | "
              f"{row['game_steps_per_s']:>12,.0f} | {row['vs_supersuit']:>11.2f}x |")
    return 0


if __name__ == "__main__":
    run_tool(main)
