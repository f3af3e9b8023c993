"""Learning benchmarks: train a game for several seeds and report the returns reached.

    .venv/bin/python tools/bench_learning.py --game CartPole-v1 --steps 100000 --seeds 1 2 3 \
        --threshold 475
    .venv/bin/python tools/bench_learning.py --game HalfCheetah-v5 --steps 1000000 \
        --seeds 1 2 3 --threshold 1500 --json-out runs/bench/halfcheetah.json

Uses the game's hyperparams/<family>.yaml settings (plus any --set). For each seed it reports
the mean return of the last `--window` training episodes at the end, the first step at which
that mean reached `--threshold`, wall time and steps/s. Run dirs go under runs/bench/.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

from games.files import atomic_write_text
from selfplay.cli_common import first_paragraph, run_tool
from selfplay.config_files import build_config
from selfplay.tracking import MetricSink, RunDir
from selfplay.train import build_trainer


def train_seed(game: str, steps: int, seed: int, window: int, threshold: float | None,
               overrides: list[str], root: Path) -> dict[str, Any]:
    config = build_config(game, overrides=[f"log.return_window={window}", "log.progress=false",
                                           *overrides], seed=seed, total_steps=steps)
    run = RunDir(root / f"{game.replace('/', '-')}-s{seed}-{time.strftime('%Y%m%d-%H%M%S')}")
    run.path.mkdir(parents=True, exist_ok=True)
    run.write_config(config)
    trainer = build_trainer(config, run)
    sink = MetricSink(run, config)
    reached = None
    curve = []
    start = time.perf_counter()
    try:
        while trainer.update < trainer.num_updates:
            trainer.collect()
            metrics = trainer.learn()
            trainer.update += 1
            metrics.update(trainer.episodes.summary())
            sink.log(trainer.global_step, metrics)
            ret = metrics.get("episode/return_mean")
            if ret is not None:
                curve.append((trainer.global_step, ret))
                if threshold is not None and reached is None and ret >= threshold \
                        and len(trainer.episodes.returns) >= window:
                    reached = trainer.global_step
    finally:
        sink.close()
        trainer.game.close()
    elapsed = time.perf_counter() - start
    final = trainer.episodes.summary().get("episode/return_mean")
    return {"seed": seed, "final_mean_return": final, "steps": trainer.global_step,
            "first_step_reaching_threshold": reached, "seconds": round(elapsed, 1),
            "steps_per_second": round(trainer.global_step / elapsed, 1), "run_dir": str(run.path),
            "curve": curve[:: max(1, len(curve) // 50)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--game", required=True)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--window", type=int, default=20, help="episodes in the reported mean")
    parser.add_argument("--threshold", type=float)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json-out", type=Path)
    parser.add_argument("--root", type=Path, default=Path("runs/bench"))
    args = parser.parse_args()
    results = []
    for seed in args.seeds:
        result = train_seed(args.game, args.steps, seed, args.window, args.threshold, args.set,
                            args.root)
        results.append(result)
        final = result["final_mean_return"]  # None: no episode finished
        shown = "none (no episode finished)" if final is None else f"{final:.1f}"
        print(f"{args.game} seed {seed}: mean return (last {args.window}) "
              f"{shown} at {result['steps']} steps; threshold "
              f"{args.threshold} first reached at {result['first_step_reaching_threshold']}; "
              f"{result['seconds']} s, {result['steps_per_second']:.0f} steps/s", flush=True)
    summary = {"game": args.game, "steps": args.steps, "window": args.window,
               "threshold": args.threshold, "overrides": args.set,
               "machine": f"{platform.machine()} {platform.node()}",
               "date": time.strftime("%Y-%m-%d"), "results": results}
    if args.threshold is not None:
        summary["seeds_reaching_threshold"] = sum(
            r["final_mean_return"] is not None and r["final_mean_return"] >= args.threshold
            for r in results)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(summary, indent=1))
    print(json.dumps({k: v for k, v in summary.items() if k != "results"}))


if __name__ == "__main__":
    run_tool(main)
