"""Lux parity benchmark: the adapter's games in Jux against the official engine (luxai_s2).

    .venv/bin/python tools/bench_lux_parity.py --seeds 20 --steps 1000 \\
        --json-out runs/bench/lux_parity.json

Per seed, ``--steps`` main-phase steps of random legal orders drawn from the adapter's masks
(games following one another when one ends), played in both engines
(:func:`games.lux.parity.play_parity`): full states, rewards and dones compared every step,
the seats' observations and masks every ``--encode-every`` steps and at each game's end.
Reported: mismatches (the target is 0), Jux's two known differences counted apart, games,
steps and time.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from pathlib import Path

from games.files import atomic_write_text
from games.lux.parity import play_parity
from selfplay.cli_common import first_paragraph, positive_int, run_tool


def main() -> None:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--seeds", type=positive_int, default=20, help="seeds 0..N-1")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--steps", type=positive_int, default=1000,
                        help="main-phase steps per seed")
    parser.add_argument("--encode-every", type=positive_int, default=25)
    parser.add_argument("--json-out", type=Path)
    args = parser.parse_args()
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))

    def progress(done: int, total: int) -> None:
        if done % 500 == 0 or done == total:
            print(f"  {done}/{total} steps", file=sys.stderr, flush=True)

    report = play_parity(seeds, args.steps, encode_every=args.encode_every, progress=progress)
    print(f"{report.steps} steps, {report.games} games, seeds {seeds[0]}-{seeds[-1]}: "
          f"{report.mismatch_count} mismatches; Jux's known differences: {report.known_rubble} "
          f"rubble, {report.known_reward} reward; observations and masks compared at "
          f"{report.encoded} steps; most robots at once {report.units_seen}; "
          f"{report.seconds} s", flush=True)
    for line in report.mismatches[:20]:
        print("  ", line)
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(args.json_out, json.dumps(
            {"date": time.strftime("%Y-%m-%d"), "machine": platform.node(), "seeds": seeds,
             "steps_per_seed": args.steps, **dataclasses.asdict(report)}, indent=1))


if __name__ == "__main__":
    run_tool(main)
