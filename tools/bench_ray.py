"""Ray rollout workers against the built-in local worker processes, same machine, same run.

    .venv/bin/python tools/bench_ray.py --workers 2 --rounds 3 --updates 4 \\
        --json-out runs/bench/ray.json

Two measurements, each alternating the backends round by round (local, ray, then ray, local,
...) so both see the same machine:

- **stepping**: the microRTS game alone (``game.options.workers`` workers, the default 16x16
  map and 24 envs), ``--steps`` lockstep steps of random legal actions: the transport's
  per-step cost (shared memory and pipes, or Ray's object store and actor calls);
- **training**: ``selfplay train --game microrts``'s default settings (hyperparams/microrts.yaml;
  the league's rating games off: they are not training), ``--updates`` collect + learn cycles
  after one warm-up update, env-steps per second.

The Ray backend runs on a private local instance (``distributed.address: local``; its start-up
is not timed). Reported: per round and median, env-steps/s of each backend and ray / local
(the issue's target for training: >= 0.85).

``--collection`` measures instead ``collection: async`` against ``sync`` (training only, the
backend ``--backend``), alternating round by round: async / sync.

``--scaling 1,2,4,8 --envs-per-worker 16`` measures instead each backend at each worker count
(the envs growing with the workers; add ``--set device=cuda`` on a GPU machine), each figure
against linear scaling from the first count (the issue's target at 8 workers: >= 0.7).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from games.files import atomic_write_text
from games.microrts.adapter import random_legal_actions
from selfplay.cli_common import first_paragraph, positive_int, run_tool
from selfplay.config import TrainConfig
from selfplay.config_files import build_config
from selfplay.train import build_trainer
from selfplay.worker_backend import build_game


def config_for(backend: str, workers: int, overrides: list[str]) -> TrainConfig:
    return build_config("microrts", seed=1, overrides=[
        "league.enabled=false", "log.progress=false", f"game.options.workers={workers}",
        f"distributed.backend={backend}", *overrides])


def stepping(config: TrainConfig, steps: int) -> float:
    """Env-steps per second of ``steps`` lockstep steps (random legal actions)."""
    game = build_game(config)
    try:
        batch = game.reset(seed=1)
        rng = np.random.default_rng(0)
        for _ in range(10):  # warm-up
            assert batch.action_mask is not None
            batch = game.step(random_legal_actions(batch.action_mask, rng))
        begin = time.perf_counter()
        for _ in range(steps):
            assert batch.action_mask is not None
            batch = game.step(random_legal_actions(batch.action_mask, rng))
        seconds = time.perf_counter() - begin
        return steps * game.spec.num_envs / seconds
    finally:
        game.close()


def training(config: TrainConfig, updates: int) -> float:
    """Env-steps per second of ``updates`` updates after one warm-up (the steps they learn
    from: with ``collection: async`` the next rollout is under way meanwhile)."""
    trainer = build_trainer(config, None)
    try:
        trainer.run_update()
        begin = time.perf_counter()
        for _ in range(updates):
            trainer.run_update()
        return updates * trainer.steps_per_update / (time.perf_counter() - begin)
    finally:
        if trainer.overlap is not None:
            trainer.overlap.wait()
        trainer.game.close()


def paired(measure: Any, rounds: int, arms: tuple[str, str] = ("local", "ray")
           ) -> dict[str, Any]:
    """``measure(arm)`` of both arms each round, in alternating order; ``ratio``: the second
    arm's over the first's."""
    first, second = arms
    rows = []
    for r in range(rounds):
        order = arms if r % 2 == 0 else arms[::-1]
        row = {arm: round(measure(arm), 1) for arm in order}
        row["ratio"] = round(row[second] / row[first], 3)
        rows.append(row)
        print(f"  round {r + 1}: {row}", flush=True)
    return {"rounds": rows,
            "median": {k: statistics.median(row[k] for row in rows)
                       for k in (first, second, "ratio")}}


def scaling(counts: list[int], envs_per_worker: int, steps: int, updates: int,
            overrides: list[str]) -> dict[str, Any]:
    """Env-steps/s of each backend with each worker count (``envs_per_worker`` envs each, so
    the envs grow with the workers), stepping and training; each figure against linear
    scaling from the first count."""
    rows = []
    for count in counts:
        sized = [f"game.num_envs={count * envs_per_worker}", *overrides]
        row: dict[str, Any] = {"workers": count}
        for backend in ("local", "ray"):
            config = config_for(backend, count, sized)
            row[f"stepping_{backend}"] = round(stepping(config, steps), 1)
            row[f"training_{backend}"] = round(training(config, updates), 1)
        rows.append(row)
        print(f"  {row}", flush=True)
    base = rows[0]
    for row in rows:
        factor = row["workers"] / base["workers"]
        for key in [k for k in row if k != "workers" and not k.endswith("_linear")]:
            row[f"{key}_linear"] = round(row[key] / (base[key] * factor), 3)
    return {"envs_per_worker": envs_per_worker, "rows": rows}


def _counts(text: str) -> list[int]:
    """``--scaling``: comma-separated worker counts, each >= 1."""
    try:
        counts = [int(c) for c in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected worker counts such as 1,2,4,8, got {text!r}"
                                         ) from None
    if min(counts) < 1:
        raise argparse.ArgumentTypeError(f"worker counts must be >= 1, got {text!r}")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--workers", type=positive_int, default=2)
    parser.add_argument("--scaling", type=_counts,
                        help="comma-separated worker counts (e.g. 1,2,4,8): "
                        "each backend at each count, --envs-per-worker envs per worker, "
                        "against linear scaling from the first count")
    parser.add_argument("--envs-per-worker", type=positive_int, default=16)
    parser.add_argument("--collection", action="store_true",
                        help="training with collection: async against sync")
    parser.add_argument("--backend", default="local", choices=("local", "ray"),
                        help="--collection: the backend")
    parser.add_argument("--rounds", type=positive_int, default=3)
    parser.add_argument("--steps", type=positive_int, default=300, help="stepping: lockstep steps")
    parser.add_argument("--updates", type=positive_int, default=4, help="training: timed updates")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    if args.scaling:
        counts = args.scaling
        print(f"scaling over {counts} workers (env-steps/s):", flush=True)
        result = scaling(counts, args.envs_per_worker, args.steps, args.updates, args.set)
        result.update({"machine": f"{platform.machine()} {platform.node()}",
                       "cpus": len(os.sched_getaffinity(0)),
                       "date": time.strftime("%Y-%m-%d")})
        for row in result["rows"]:
            print(f"  {row['workers']} workers: training local x{row['training_local_linear']}"
                  f" of linear, ray x{row['training_ray_linear']}", flush=True)
        if args.json_out:
            args.json_out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(args.json_out, json.dumps(result, indent=1))
        return
    if args.collection:
        print(f"training on {args.backend} workers, async / sync (env-steps/s):", flush=True)
        result = paired(lambda mode: training(config_for(
            args.backend, args.workers, [*args.set, f"collection={mode}"]), args.updates),
            args.rounds, ("sync", "async"))
        result.update({"workers": args.workers, "backend": args.backend,
                       "overrides": args.set, "machine": f"{platform.machine()}",
                       "cpus": len(os.sched_getaffinity(0)),
                       "date": time.strftime("%Y-%m-%d %H:%M")})
        print(f"median async / sync: {result['median']['ratio']}", flush=True)
        if args.json_out:
            args.json_out.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(args.json_out, json.dumps(result, indent=1))
        return
    print("stepping (env-steps/s):", flush=True)
    step = paired(lambda b: stepping(config_for(b, args.workers, args.set), args.steps),
                  args.rounds)
    print("training (env-steps/s):", flush=True)
    train = paired(lambda b: training(config_for(b, args.workers, args.set), args.updates),
                   args.rounds)
    print(f"median ray / local: stepping {step['median']['ratio']}, training "
          f"{train['median']['ratio']}", flush=True)
    summary = {"workers": args.workers, "overrides": args.set, "stepping": step,
               "training": train, "machine": f"{platform.machine()} {platform.node()}",
               "cpus": len(os.sched_getaffinity(0)), "date": time.strftime("%Y-%m-%d")}
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(summary, indent=1))


if __name__ == "__main__":
    run_tool(main)
