"""``selfplay import-replays``: games recorded elsewhere (Kaggle episodes) into replay shards."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from selfplay.cli_common import UserError, emit


def add_import_command(sub: Any) -> None:
    """The ``import-replays`` subcommand's parser (``sub``: the CLI's subparsers)."""
    imp = sub.add_parser("import-replays", help="convert replays of another format (Lux: "
                         "Kaggle episode JSON) into a replay folder for behaviour cloning")
    imp.add_argument("--game", required=True)
    imp.add_argument("paths", nargs="+", help="replay files, or folders of *.json files")
    imp.add_argument("--out", required=True, help="replay folder (a rerun adds to it; files "
                     "already in it are skipped)")
    imp.add_argument("--format", default="kaggle", help="the files' format (default kaggle)")
    imp.add_argument("--shard-games", type=int, default=100, help="games per shard")
    imp.add_argument("--skip-bad", action="store_true",
                     help="skip files that do not replay (one warning each) instead of stopping")
    imp.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    imp.set_defaults(func=cmd_import)


def _files(paths: list[str]) -> list[Path]:
    """Files as given, folders as their ``*.json`` files (sorted); a missing path is an error."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(sorted(path.glob("*.json")))
        elif path.is_file():
            out.append(path)
        else:
            raise UserError(f"{path}: no such file or folder")
    if not out:
        raise UserError(f"no .json files in {', '.join(paths)}")
    return out


def cmd_import(args: argparse.Namespace) -> int:
    """``selfplay import-replays``: convert, then print what was written."""
    from games.registry import family_of, resolve

    if args.shard_games < 1:
        raise UserError("--shard-games must be >= 1")
    game = resolve(args.game).name
    result = dict(family_of(game).import_replays(game, args.format, _files(args.paths),
                                                 Path(args.out), args.shard_games,
                                                 args.skip_bad))
    skipped = result.get("skipped") or []
    emit(result, args.json,
         f"{result['games']} games ({result['steps']} steps) written to {result['folder']} in "
         f"{result['shards']} shards; {result['duplicates']} already there, {len(skipped)} "
         "skipped")
    return 0
