"""``selfplay record``: scripted players' games into replay shards."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from selfplay.cli_common import UserError, emit, seed_flag


def add_record_command(sub: Any) -> None:
    """The ``record`` subcommand's parser (``sub``: the CLI's subparsers)."""
    rec = sub.add_parser("record", help="record scripted players' games as replays (for "
                         "behaviour cloning)")
    rec.add_argument("--game", required=True)
    rec.add_argument("--players", nargs="+", required=True,
                     help="scripted players; every two play each other on both sides")
    rec.add_argument("--maps", nargs="+", help="maps the shards cycle over (one size)")
    rec.add_argument("--games", type=int, required=True, help="games in all")
    rec.add_argument("--out", required=True, help="replay folder (a rerun resumes it)")
    rec.add_argument("--processes", type=int, default=1, help="worker processes")
    rec.add_argument("--shard-games", type=int, default=100, help="games per shard")
    rec.add_argument("--max-steps", type=int, help="game length limit (default 2000)")
    rec.add_argument("--parallel", type=int, default=16, help="games at once per process")
    rec.add_argument("--opening", type=int, default=60,
                     help="each game opens with up to N cycles of random legal moves (never "
                          "learned), so that deterministic bots play different games; 0: none")
    rec.add_argument("--ray", metavar="ADDRESS", nargs="?", const="local",
                     help="play the games as Ray tasks (pip install 'selfplay[ray]'): local (a "
                          "private instance of --processes CPUs; the default), auto or "
                          "HOST:PORT; only this process writes files")
    rec.add_argument("--focus", nargs="+", default=[], metavar="PLAYER",
                     help="record only the pairings with these players (the teacher a clone "
                          "will imitate plays every game)")
    rec.add_argument("--seed", type=int, default=0)
    rec.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    rec.set_defaults(func=cmd_record)


def cmd_record(args: argparse.Namespace) -> int:
    """``selfplay record``: scripted players' games into replay shards."""
    from games.family import RecordRequest
    from games.registry import family_of, resolve

    if args.games < 1:
        raise UserError("--games must be >= 1")
    if args.max_steps is not None and args.max_steps < 1:
        raise UserError(f"--max-steps must be >= 1, got {args.max_steps}")
    if min(args.processes, args.shard_games, args.parallel) < 1 or args.opening < 0:
        raise UserError("--processes, --shard-games and --parallel must be >= 1, --opening "
                        ">= 0")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise UserError(f"--out {args.out} is a file; name a folder for the replays")
    if args.ray is not None:
        from selfplay.distributed_config import DistributedConfig, distributed_checks

        bad = [message for ok, message in distributed_checks(
            DistributedConfig(backend="ray", address=args.ray)) if not ok]
        if bad:
            raise UserError(bad[0].replace("distributed.address", "--ray"))
    game = resolve(args.game).name
    request = RecordRequest(tuple(args.players), Path(args.out), args.games,
                            tuple(args.maps or ()), args.processes, seed_flag(args.seed) or 0,
                            args.max_steps, args.shard_games, args.parallel, args.opening,
                            args.ray, tuple(args.focus))

    line_open = False  # a progress line without its newline: an error starts a new line

    def progress(done: int, total: int) -> None:
        nonlocal line_open
        if not args.json:
            print(f"\r  {done}/{total} games", end="" if done < total else "\n",
                  file=sys.stderr, flush=True)
            line_open = done < total

    try:
        result = dict(family_of(game).record(game, request, progress))
    except BaseException:
        if line_open:
            print(file=sys.stderr, flush=True)
        raise
    emit(result, args.json,
          f"{result['recorded']} games recorded ({result['kept']} kept from before) in "
          f"{result['shards']} shards under {result['folder']}; "
          f"{result['games_per_hour']:,.0f} games/hour on {result['cores']} process(es)")
    return 0


