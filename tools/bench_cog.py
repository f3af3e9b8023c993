"""The CoG map benchmark: a microRTS checkpoint on the competition's 8 Open maps against
WorkerRush, LightRush, CoacAI and Mayari, beside RAISocketAI's published win rates.

    .venv/bin/python tools/bench_cog.py --checkpoint RUN_DIR_OR_FILE [--games 20]
        [--maps a,b,...] [--bots a,b,...] [--max-steps N] [--deterministic] [--seed 0]
        [--processes P] [--json OUT]

RAISocketAI (rl-algo-impls, winner of the IEEE-CoG 2023 microRTS competition) was benchmarked
as a "single player round-robin" (Goodfriend, arXiv 2402.08112, Table "Single player
round-robin benchmark win rates"): 100 games per (map, bot), 50 on each side, win rate with
draws counting half. This tool plays ``--games`` per (map, bot), half as engine player 0 and
half as player 1, through ``selfplay play``'s own machinery (:func:`selfplay.play.play`: the
checkpoint's game options, a bot env per game, the normal checkpoint loading), in
``--processes`` spawned workers that each take shares of (map, bot) cells, largest maps first.

Game length (``--max-steps``, default per map): the cycles of RAISocketAI's round-robin
(rl-algo-impls ``rl_algo_impls/microrts/java/src/tournaments/RAIRoundRobinTournament.java``):
3,000 on 8x8 maps, 4,000 up to 16x16 (NoWhereToRun9x8 too), 5,000 on 24x24, 6,000 on 32x32
and 8,000 on (4)BloodBath.scmB; other maps by their longest side the same way. A game still
running then is a draw.

Differences from that benchmark: its rushes were POWorkerRush and POLightRush (with full
observability, as in the competition; ``--bots POWorkerRush,POLightRush,CoacAI,Mayari``
replays that, and their published figures are shown for either spelling); its unit type
table was ``VERSION_ORIGINAL_FINETUNED`` (our engine uses the default one); our players get
no 100 ms per-cycle limit. A checkpoint with the pooled critic (``network.grid_critic:
pool``, the default) plays every map; one with the flatten critic only its own board size
(elsewhere the loader's one-line error ends the run).

Zero-shot: maps the checkpoint never trained on (its recorded ``boards``, else its config's
maps) and bots it never met in training (its config's bot envs) are marked ``*``, and the
means over those cells and over the others are reported apart.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from games.core import GameError
from games.files import atomic_write_text
from games.microrts.bots import resolve_bot
from games.microrts.maps import MapInfo, resolve_map
from games.options import OptionError
from games.pools import detached_worker_init, stop_process_pool
from games.registry import family_of
from selfplay.checkpoint import CheckpointError, load_checkpoint, resolve_checkpoint
from selfplay.cli_common import first_paragraph, positive_int, run_tool
from selfplay.config import ConfigError
from selfplay.evaluate import trained_config
from selfplay.play import play, wilson_interval

MAPS = ("basesWorkers8x8A", "FourBasesWorkers8x8", "NoWhereToRun9x8", "basesWorkers16x16A",
        "TwoBasesBarracks16x16", "DoubleGame24x24", "BWDistantResources32x32",
        "(4)BloodBath.scmB")
BOTS = ("WorkerRush", "LightRush", "CoacAI", "Mayari")

# RAISocketAI's win rates in % (draws count half; 100 games per cell, 50 per side) from
# Goodfriend, "A Competition Winning Deep Reinforcement Learning Agent in microRTS" (IEEE CoG
# 2024, arXiv 2402.08112), Table "Single player round-robin benchmark win rates"
# (tab:single-player-winrate in rl-algo-impls papers/cog2024/cog2024.tex, commit edc4fac9).
# Its WorkerRush and LightRush columns were played by POWorkerRush and POLightRush (the paper's
# appendix "Single player round-robin benchmark setup"). BWDistantResources32x32: the DoubleCone
# model's figures, which the paper's averages use (its squnet model: 93, 73, 23, 58; overall 61).
PUBLISHED: dict[str, tuple[int, int, int, int]] = {  # the map's row, in the order of BOTS
    "basesWorkers8x8A": (95, 100, 99, 100),
    "FourBasesWorkers8x8": (100, 100, 100, 98),
    "NoWhereToRun9x8": (100, 100, 93, 99),
    "basesWorkers16x16A": (100, 100, 90, 98),
    "TwoBasesBarracks16x16": (100, 89, 99, 100),
    "DoubleGame24x24": (100, 98, 94, 100),
    "BWDistantResources32x32": (99, 90, 88, 99),
    "(4)BloodBath.scmB": (98, 0, 0, 0),
}
# the same table's "Overall" column, "AI Average" row and overall average, as printed
PUBLISHED_MAP_MEANS = {"basesWorkers8x8A": 99, "FourBasesWorkers8x8": 100,
                       "NoWhereToRun9x8": 98, "basesWorkers16x16A": 97,
                       "TwoBasesBarracks16x16": 97, "DoubleGame24x24": 98,
                       "BWDistantResources32x32": 94, "(4)BloodBath.scmB": 25}
PUBLISHED_BOT_MEANS = {"WorkerRush": 99, "LightRush": 85, "CoacAI": 83, "Mayari": 87}
PUBLISHED_OVERALL = 88
PUBLISHED_SOURCE = ("Goodfriend 2024, arXiv 2402.08112, Table 'Single player round-robin "
                    "benchmark win rates' (rl-algo-impls papers/cog2024/cog2024.tex)")
_COLUMN = {"POWorkerRush": "WorkerRush", "POLightRush": "LightRush"}  # the paper's columns


def published(map_name: str, bot: str) -> int | None:
    """RAISocketAI's published win rate (%) on ``map_name`` against ``bot``; None if none."""
    column = _COLUMN.get(bot, bot)
    row = PUBLISHED.get(map_name)
    return None if row is None or column not in BOTS else row[BOTS.index(column)]


def competition_max_steps(info: MapInfo) -> int:
    """The game length of RAISocketAI's round-robin on a map of this size (see the module
    docstring): by the longest side, 8 -> 3,000, 16 -> 4,000, 24 -> 5,000, 32 -> 6,000,
    larger -> 8,000 cycles."""
    side = max(info.shape)
    for limit, steps in ((8, 3000), (16, 4000), (24, 5000), (32, 6000)):
        if side <= limit:
            return steps
    return 8000


@dataclass(frozen=True)
class Share:
    """Some of a cell's games, played by one worker (an even number: half on each side)."""

    map_spec: str  # as given (a shipped map's name or an XML path)
    map_name: str
    bot: str
    games: int
    seed: int
    max_steps: int
    area: int


@dataclass
class Cell:
    """A (map, bot) cell's results, summed over its shares."""

    wins: int = 0
    draws: int = 0
    losses: int = 0
    sides: list[dict[str, int]] = field(default_factory=list)  # by engine player
    seconds: float = 0.0

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def rate(self) -> float:
        return (self.wins + self.draws / 2) / self.games if self.games else math.nan

    def add(self, result: dict[str, Any], seconds: float) -> None:
        self.wins += result["wins"]
        self.draws += result["draws"]
        self.losses += result["losses"]
        for k, side in enumerate(result["sides"]):
            if k == len(self.sides):
                self.sides.append({"games": 0, "wins": 0, "draws": 0, "losses": 0})
            for key in self.sides[k]:
                self.sides[k][key] += side[key]
        self.seconds += seconds


def plan(maps: Sequence[tuple[str, MapInfo]], bots: Sequence[str], games: int, processes: int,
         seed: int, max_steps: int | None) -> list[Share]:
    """Every cell's games in shares, enough for ``processes`` workers; largest maps first."""
    pairs = games // 2
    per_cell = max(1, min(pairs, -(-processes // (len(maps) * len(bots)))))
    shares = []
    for i, (spec, info) in enumerate(maps):
        steps = max_steps or competition_max_steps(info)
        for j, bot in enumerate(bots):
            for k in range(per_cell):
                n = 2 * (pairs // per_cell + (k < pairs % per_cell))
                index = (i * len(bots) + j) * per_cell + k
                shares.append(Share(spec, info.name, bot, n, seed + 10_007 * index, steps,
                                    info.height * info.width))
    return sorted(shares, key=lambda s: -s.area)


def play_share(checkpoint: str, share: Share, deterministic: bool
               ) -> tuple[dict[str, Any], float]:
    """A share's games (in a worker process): ``play``'s result and the seconds they took."""
    start = time.perf_counter()
    result = play(checkpoint, share.bot, games=share.games, map_name=share.map_spec,
                  seed=share.seed, deterministic=deterministic,
                  options={"max_steps": share.max_steps, "workers": 1})
    return result, time.perf_counter() - start


def _worker_init() -> None:
    detached_worker_init()
    import torch

    torch.set_num_threads(1)  # one core per worker


def run(checkpoint: str, shares: list[Share], deterministic: bool, processes: int,
        on_result: Callable[[Share, dict[str, Any], float], None]) -> None:
    """Play every share: here with one process, else in ``processes`` spawned workers (a
    worker's error stops the others and is raised here)."""
    if processes == 1:
        for share in shares:
            on_result(share, *play_share(checkpoint, share, deterministic))
        return
    pool = ProcessPoolExecutor(processes, mp_context=get_context("spawn"),
                               initializer=_worker_init)
    try:
        inflight: dict[Future[tuple[dict[str, Any], float]], Share] = {
            pool.submit(play_share, checkpoint, s, deterministic): s for s in shares}
        while inflight:
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            for future in done:
                on_result(inflight.pop(future), *future.result())
    except BaseException:
        stop_process_pool(pool, kill=True)
        raise
    pool.shutdown()


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def trained_on(state: dict[str, Any], options: dict[str, Any], num_envs: int
               ) -> tuple[set[str], set[str]]:
    """The maps and the engine bots a checkpoint met in training (``state``: the checkpoint;
    ``options`` and ``num_envs``: its config's game)."""
    boards = state.get("boards")
    if isinstance(boards, dict) and boards:
        maps = {str(m) for m in boards}
    else:
        maps = {resolve_map(str(m)).name for m in (options.get("maps") or [options["map"]])}
    has_bot_envs = num_envs > int(options.get("num_selfplay_envs") or 0)
    bots = {resolve_bot(str(b)).name for b in (options.get("bots") or []) if has_bot_envs}
    return maps, bots


def summary(cells: dict[tuple[str, str], Cell], maps: list[str], bots: list[str],
            seen: tuple[set[str], set[str]] = (set(), set())) -> dict[str, Any]:
    """Every figure: the cells (with 95 % Wilson intervals of the win rate, draws half), the
    per-map and per-bot means of the cells' win rates and the overall mean, and the published
    figures beside them (a mean's only over the paper's own maps or bots)."""
    rows: list[dict[str, Any]] = []
    for m in maps:
        for b in bots:
            c = cells[(m, b)]
            low, high = wilson_interval(c.wins + c.draws / 2, c.games)
            rows.append({"map": m, "bot": b, "games": c.games, "wins": c.wins,
                         "draws": c.draws, "losses": c.losses, "win_rate": c.rate,
                         "ci95": [low, high], "sides": c.sides,
                         "seconds": round(c.seconds, 1), "published": published(m, b),
                         "zero_shot": m not in seen[0] or b not in seen[1]})
    columns = [_COLUMN.get(b, b) for b in bots]
    all_bots = sorted(columns) == sorted(BOTS)
    all_maps = sorted(maps) == sorted(MAPS)
    return {
        "cells": rows,
        "map_means": {m: {"win_rate": _mean([cells[(m, b)].rate for b in bots]),
                          "published": PUBLISHED_MAP_MEANS.get(m) if all_bots else None}
                      for m in maps},
        "bot_means": {b: {"win_rate": _mean([cells[(m, b)].rate for m in maps]),
                          "published": PUBLISHED_BOT_MEANS.get(col) if all_maps else None}
                      for b, col in zip(bots, columns, strict=True)},
        "overall": {"win_rate": _mean([c.rate for c in cells.values()]),
                    "published": PUBLISHED_OVERALL if all_bots and all_maps else None},
        "zero_shot": {"cells": sum(r["zero_shot"] for r in rows),
                      "win_rate": _mean([r["win_rate"] for r in rows if r["zero_shot"]])},
        "trained": {"cells": sum(not r["zero_shot"] for r in rows),
                    "win_rate": _mean([r["win_rate"] for r in rows if not r["zero_shot"]])},
        "trained_maps": sorted(seen[0]), "trained_bots": sorted(seen[1]),
    }


def _pub(value: int | None) -> str:
    return "-" if value is None else str(value)


def table(figures: dict[str, Any], maps: list[str], bots: list[str]) -> str:
    """The maps x bots table: each cell ``win% [95 % interval] W-D-L | published%``."""
    seen_maps, seen_bots = set(figures["trained_maps"]), set(figures["trained_bots"])
    width = max(len(m) for m in [*maps, "mean"]) + 3
    cell_w = 30
    lines = [f"{'map':<{width}}" + "".join(f"{_star(b, seen_bots):<{cell_w}}" for b in bots)
             + "mean"]
    by_cell = {(r["map"], r["bot"]): r for r in figures["cells"]}
    for m in maps:
        text = []
        for b in bots:
            r = by_cell[(m, b)]
            low, high = r["ci95"]
            text.append(f"{100 * r['win_rate']:5.1f} [{100 * low:.0f}-{100 * high:.0f}] "
                        f"{r['wins']}-{r['draws']}-{r['losses']} | {_pub(r['published'])}")
        lines.append(f"{_star(m, seen_maps):<{width}}" + "".join(f"{t:<{cell_w}}" for t in text)
                     + _mean_text(figures["map_means"][m]))
    means = [_mean_text(figures["bot_means"][b]) for b in bots]
    lines.append(f"{'mean':<{width}}" + "".join(f"{t:<{cell_w}}" for t in means)
                 + _mean_text(figures["overall"]))
    zero, known = figures["zero_shot"], figures["trained"]
    lines.append(f"\n* never met in training. Zero-shot cells (a map or a bot never met): "
                 f"{zero['cells']}, mean {_percent(zero['win_rate'])}; cells of trained maps "
                 f"and bots: {known['cells']}, mean {_percent(known['win_rate'])}")
    return "\n".join(lines)


def _star(name: str, seen: set[str]) -> str:
    return name if name in seen else f"{name}*"


def _percent(rate: float) -> str:
    return "-" if math.isnan(rate) else f"{100 * rate:.1f} %"


def _mean_text(mean: dict[str, Any]) -> str:
    return f"{100 * mean['win_rate']:5.1f} | {_pub(mean['published'])}"


def _checked_checkpoint(spec: str) -> tuple[Path, tuple[set[str], set[str]]]:
    """The checkpoint file ``spec`` names and the maps and bots it trained on, loaded once
    here so that a missing, corrupt or non-microRTS checkpoint is a one-line
    :class:`CheckpointError` before any game."""
    path = resolve_checkpoint(spec)
    state = load_checkpoint(path)
    config, _ = trained_config(state, path)
    if family_of(config.game.name).name != "microrts":
        raise CheckpointError(f"{path} plays {config.game.name}, not microrts")
    return path, trained_on(state, dict(config.game.options), config.game.num_envs)


def _names(value: str, what: str) -> list[str]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        raise GameError(f"--{what}: give at least one")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=first_paragraph(__doc__))
    parser.add_argument("--checkpoint", required=True,
                        help="a checkpoint file, or a run directory (its newest checkpoint)")
    parser.add_argument("--maps", default=",".join(MAPS),
                        help="comma-separated shipped maps or XML paths (default: %(default)s)")
    parser.add_argument("--bots", default=",".join(BOTS),
                        help="comma-separated engine bots (default: %(default)s)")
    parser.add_argument("--games", type=positive_int, default=20,
                        help="games per (map, bot), half on each side (default: %(default)s)")
    parser.add_argument("--max-steps", type=positive_int, default=None,
                        help="cycles before a game is a draw (default: the benchmark's, by "
                        "map size: 3000 on 8x8 ... 8000 on 64x64)")
    parser.add_argument("--deterministic", action="store_true",
                        help="the most likely actions (default: sampled)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--processes", type=int, default=os.cpu_count() or 1,
                        help="worker processes (default: the number of CPUs)")
    parser.add_argument("--json", type=Path, default=None, metavar="OUT",
                        help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    try:
        if args.games < 2 or args.games % 2:
            raise GameError(f"--games must be a positive even number (half on each side), "
                            f"got {args.games}")
        if args.processes < 1 or (args.max_steps is not None and args.max_steps < 1):
            raise GameError("--processes and --max-steps must be >= 1")
        maps: dict[str, tuple[str, MapInfo]] = {}
        for spec in _names(args.maps, "maps"):
            info = resolve_map(spec)
            maps.setdefault(info.name, (spec, info))
        bots = list(dict.fromkeys(resolve_bot(b).name for b in _names(args.bots, "bots")))
        checkpoint, seen = _checked_checkpoint(args.checkpoint)
        out = args.json
        if out is not None and (out.is_dir() or out.parent.exists()
                                and not os.access(out.parent, os.W_OK)):
            raise GameError(f"--json {out}: cannot write there; give a file name")
        shares = plan(list(maps.values()), bots, args.games, args.processes, args.seed,
                      args.max_steps)
        processes = min(args.processes, len(shares))
        cells = {(m, b): Cell() for m in maps for b in bots}
        start = time.perf_counter()

        def on_result(share: Share, result: dict[str, Any], seconds: float) -> None:
            cell = cells[(share.map_name, share.bot)]
            cell.add(result, seconds)
            done = sum(c.games for c in cells.values())
            print(f"  {share.map_name} vs {share.bot}: {cell.wins}-{cell.draws}-{cell.losses} "
                  f"({done}/{len(cells) * args.games} games, "
                  f"{time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)

        run(str(checkpoint), shares, args.deterministic, processes, on_result)
        figures = summary(cells, list(maps), bots, seen)
    except (GameError, CheckpointError, OptionError, ConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    elapsed = time.perf_counter() - start
    steps = {name: args.max_steps or competition_max_steps(info)
             for name, (_, info) in maps.items()}
    policy = "most likely actions" if args.deterministic else "sampled actions"
    print(f"\nCoG benchmark of {checkpoint}: {args.games} games per cell "
          f"({args.games // 2} per side), {policy}, seed {args.seed}, max cycles "
          + ", ".join(f"{m} {s}" for m, s in steps.items())
          + f"; {processes} process{'es' if processes > 1 else ''}, {elapsed:.0f} s")
    print("cell: win % (draws count half) [95 % Wilson interval] wins-draws-losses | "
          f"RAISocketAI's published win %\npublished: {PUBLISHED_SOURCE}\n")
    print(table(figures, list(maps), bots))
    if args.json is not None:
        result = {"checkpoint": str(checkpoint), "maps": list(maps), "bots": bots,
                  "games": args.games, "max_steps": steps, "deterministic": args.deterministic,
                  "seed": args.seed, "processes": processes, "seconds": round(elapsed, 1),
                  "published_source": PUBLISHED_SOURCE, **figures}
        try:
            args.json.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(args.json, json.dumps(result, indent=1) + "\n")
        except OSError as exc:
            print(f"error: cannot write {args.json}: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    run_tool(main)
