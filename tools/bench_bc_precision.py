"""The cloning update's seconds in float32 and in bfloat16 (``precision``), on one collected
rollout of live teachers, alternating, each ``--repeats`` times.

    .venv/bin/python tools/bench_bc_precision.py --game lux \\
        --set "bc.teachers=[heuristic-raider,heuristic]" --set "bc.imitate=[heuristic-raider]" \\
        --set bc.epochs=3 --set bc.minibatches=8 --set "network.grid_cells=[128]" \\
        --set network.grid_cell_bins=40 --set network.grid_cell_context=true

Both precisions learn from the same positions (the network goes on learning between the
timings, as a run does); the policy loss of each update is reported beside its seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import time

from selfplay.bc import build_cloner
from selfplay.cli_common import first_paragraph, positive_int, run_tool
from selfplay.config_files import build_config

PRECISIONS = ("float32", "bfloat16")


def measure(game: str, overrides: list[str], repeats: int, seed: int = 1) -> dict[str, object]:
    """``{precision: [seconds of each learn()]}`` and the policy losses, alternating."""
    config = build_config(game, overrides=["log.progress=false", "bc.validate_every=0",
                                           "bc.snapshot_every=0", *overrides], seed=seed)
    cloner = build_cloner(config, None)
    seconds: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    losses: dict[str, list[float]] = {p: [] for p in PRECISIONS}
    try:
        cloner.collect()
        for _ in range(repeats):
            for precision in PRECISIONS:
                cloner.config = dataclasses.replace(config, precision=precision)
                start = time.perf_counter()
                metrics = cloner.learn()
                seconds[precision].append(round(time.perf_counter() - start, 3))
                losses[precision].append(round(metrics["loss/bc_policy"], 4))
    finally:
        cloner.close()
    best = {p: min(v) for p, v in seconds.items()}
    return {"game": game, "set": overrides, "seconds": seconds, "policy_loss": losses,
            "speedup": round(best["float32"] / best["bfloat16"], 3),
            "machine": platform.node(), "date": time.strftime("%Y-%m-%d %H:%M")}


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--game", default="lux")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--repeats", type=positive_int, default=2)
    args = parser.parse_args(argv)
    result = measure(args.game, args.set, args.repeats)
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    run_tool(main)
