"""The ``selfplay`` command line: train, eval, play, league, bc, setup, games."""

from __future__ import annotations

import argparse
import importlib
import json
import signal
import sys
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from selfplay.cli_common import UserError, check_total_steps, emit, seed_flag, user_errors
from selfplay.import_command import add_import_command
from selfplay.interrupts import STOP_SIGNALS, Terminated, end_interrupted_process
from selfplay.record_command import add_record_command

if TYPE_CHECKING:
    from selfplay.run_loop import TrainingInterrupted


VIDEO_SUFFIXES = (".mp4", ".gif")


def _video_path(value: str | None) -> Path | None:
    """``--video``: checked before any game is played (a bad path would lose the results)."""
    if not value:
        return None
    path = Path(value)
    if path.is_dir():
        raise UserError(f"--video {value} is a directory; give a file name")
    if path.suffix.lower() not in VIDEO_SUFFIXES:
        raise UserError(f"--video {value}: use a {' or '.join(VIDEO_SUFFIXES)} file name")
    needed = ["imageio", "imageio_ffmpeg"] if path.suffix.lower() == ".mp4" else ["imageio"]
    for package in needed:  # checked before the games, not after them
        try:
            importlib.import_module(package)
        except ImportError:
            raise UserError(f"--video {value} needs the {package} package: pip install "
                            "'selfplay[video]'") from None
    existing = next(p for p in (path.parent, *path.parent.parents) if p.exists())
    if not existing.is_dir():
        raise UserError(f"--video {value}: {existing} is a file, not a folder")
    try:  # a file made and removed: permissions alone miss /proc, read-only mounts, root
        with tempfile.NamedTemporaryFile(dir=existing, prefix=".video-probe-"):
            pass
    except OSError as exc:
        raise UserError(f"--video {value}: cannot write to {existing} "
                        f"({exc.strerror or exc})") from None
    return path


# --------------------------------------------------------------------------- commands


def _config_outside_run_dir(config: str | None, run_dir: str | None) -> None:
    """``--config`` must not be the config.yaml ``--run-dir`` gets (the run writes its
    resolved settings there, over the user's file)."""
    if config and run_dir and (Path(config).resolve()
                               == (Path(run_dir) / "config.yaml").resolve()):
        raise UserError(f"--config {config} is the config.yaml the run writes into --run-dir "
                        f"{run_dir}: keep your settings file outside the run directory")


def _interrupted(stop: TrainingInterrupted, command: str) -> int:
    """Say where a run stopped by a signal left its checkpoint and how to continue it; the
    exit status (128 + the signal)."""
    from selfplay.data_parallel import world_from_environment
    from selfplay.train import resume_command

    rank, world, _ = world_from_environment()
    if rank != 0:  # rank 0 says it for the run
        return 128 + stop.signum
    where = f"checkpoint saved: {stop.checkpoint}" if stop.checkpoint else "no checkpoint"
    run = stop.checkpoint.parent.parent if stop.checkpoint else "RUN_DIR"
    print(f"interrupted by {signal.Signals(stop.signum).name}; {where}; "
          f"continue with: {resume_command(world, command)} --resume {run}", file=sys.stderr)
    return 128 + stop.signum


def cmd_train(args: argparse.Namespace) -> int:
    from selfplay.config_files import build_config
    from selfplay.data_parallel import world_from_environment
    from selfplay.run_loop import TrainingInterrupted
    from selfplay.train import run_training

    check_total_steps(args.total_steps)
    if args.resume is not None:
        if args.init_from is not None:
            raise UserError("--init-from starts a new run from a checkpoint's network and "
                            "--resume continues a run from its own: give one of them")
        if args.game or args.config or args.set or args.seed is not None:
            raise UserError("--resume continues a run with its saved config; "
                            "only --total-steps (and --no-progress, --json) may be given with it")
        if args.run_dir is not None:
            raise UserError("--resume names the run to continue; --run-dir is for a new run: "
                            "give one of them")
        config = None
    else:
        _config_outside_run_dir(args.config, args.run_dir)
        overrides = [*args.set, *(["log.progress=false"] if args.no_progress else [])]
        config = build_config(args.game, args.config, overrides, seed_flag(args.seed),
                              args.total_steps, args.init_from)
    try:
        if config is None:
            summary = run_training(None, resume=Path(args.resume),
                                   total_steps=args.total_steps,
                                   progress_bar=False if args.no_progress else None)
        else:
            summary = run_training(config, run_dir=Path(args.run_dir) if args.run_dir else None)
    except TrainingInterrupted as stop:
        return _interrupted(stop, "train")
    if world_from_environment()[0] != 0:  # rank 0 reports a data-parallel run
        return 0
    ret = summary.get("episode/return_mean")
    human = (f"{trained(summary)}; run dir {summary['run_dir']}"
             + (f"; mean return {ret:.2f}" if ret is not None else ""))
    emit(summary, args.json, human)
    return 0


def trained(summary: dict[str, Any]) -> str:
    """What this process trained: a resumed run's share apart from the run's totals."""
    steps, updates = summary["global_step"], summary["updates"]
    start, start_update = summary.get("start_step", 0), summary.get("start_update", 0)
    if not start:
        return f"trained {steps} steps in {updates} updates"
    if steps == start:
        return f"nothing to train: the run has its {steps} steps ({updates} updates)"
    return (f"resumed at step {start}: trained {steps - start} steps in "
            f"{updates - start_update} updates ({steps} steps, {updates} updates in all)")


def cmd_eval(args: argparse.Namespace) -> int:
    from selfplay.evaluate import evaluate

    if args.episodes < 1:
        raise UserError("--episodes must be >= 1")
    max_steps = _max_steps(args)

    def progress(done: int, total: int) -> None:  # long episodes (Atari) show they are alive
        if not args.json and (done == 1 or done % 10 == 0 or done == total):
            print(f"  {done}/{total} episodes", file=sys.stderr, flush=True)

    result = evaluate(args.checkpoint, args.episodes, _video_path(args.video),
                      deterministic=args.deterministic, seed=seed_flag(args.seed),
                      map_name=args.map, max_steps=max_steps, progress=progress)
    human = (f"{result['game']}: mean return {result['mean_return']:.2f} "
             f"± {result['std_return']:.2f} over {result['episodes']} episodes")
    if result["against_itself"]:  # read as a strength figure, it is not one
        human += (" (seat 0's, the checkpoint playing itself; `selfplay play --vs BOT` for "
                  "results against an opponent)")
    if result["video"]:
        human += f"; video {result['video']}"
    human += _new_maps(result)
    emit(result, args.json, human)
    return 0


DEFAULT_SHARD_GAMES = 100


def _max_steps(args: argparse.Namespace) -> int | None:
    """``--max-steps``, checked."""
    if args.max_steps is not None and args.max_steps < 1:
        raise UserError(f"--max-steps must be >= 1, got {args.max_steps}")
    return args.max_steps  # type: ignore[no-any-return]


def _shard_games(args: argparse.Namespace) -> int:
    """``--shard-games``, which only ``--record`` uses, checked."""
    if args.shard_games is None:
        return DEFAULT_SHARD_GAMES
    if args.record is None:
        raise UserError("--shard-games sets the shards of --record: add --record DIR, or "
                        "drop it")
    if args.shard_games < 1:
        raise UserError("--shard-games must be >= 1")
    return int(args.shard_games)


def cmd_play(args: argparse.Namespace) -> int:
    from games.replays import folder_totals
    from selfplay.play import play

    if args.games < 1:
        raise UserError("--games must be >= 1")
    if not 0 < args.temperature < float("inf"):
        raise UserError(f"--temperature must be > 0, got {args.temperature}")
    if args.deterministic and args.temperature != 1.0:
        raise UserError("--deterministic takes the most likely action, which --temperature "
                        "does not change: give one of them")

    def progress(done: int, total: int) -> None:  # long games (Atari) show they are alive
        if not args.json and (done == 1 or done % 10 == 0 or done == total):
            print(f"  {done}/{total} games", file=sys.stderr, flush=True)

    shard_games = _shard_games(args)
    max_steps = _max_steps(args)
    seed = seed_flag(args.seed)
    if seed is None:  # a rerun recording into the same folder: other games, not copies
        seed = folder_totals(Path(args.record))[0] if args.record else 0
    result = play(args.checkpoint, args.vs, args.games, args.map,
                  _video_path(args.video), seed=seed,
                  deterministic=args.deterministic, temperature=args.temperature,
                  progress=progress, record=Path(args.record) if args.record else None,
                  shard_games=shard_games, max_steps=max_steps)
    low, high = result["ci95"]
    where = f" on {', '.join(result['maps'])}" if result["maps"] else ""
    sides = ", ".join(f"{k}: {c['wins']}/{c['losses']}/{c['draws']}"
                      for k, c in enumerate(result["sides"]) if c["games"])
    human = (f"{result['game']} vs {result['opponent']}{where}: {result['wins']} wins, "
             f"{result['losses']} losses, {result['draws']} draws in {result['games']} games; "
             f"win rate {result['win_rate']:.1%} (95% CI {low:.1%}-{high:.1%}); "
             f"by side (W/L/D) {sides}; mean return {result['return_mean']:.4g}")
    human += _new_maps(result)
    if "record" in result:
        human += "; " + _recorded(result["record"])
    emit(result, args.json, human)
    return 0


def _new_maps(result: dict[str, Any]) -> str:
    """The played maps the network never trained on, named with those it did."""
    trained = result.get("trained_on") or {}
    new = [m for m in result.get("maps") or [] if trained and m not in trained]
    if not new:
        return ""
    return (f"; new to the network: {', '.join(new)} (trained on "
            f"{', '.join(f'{m} {h}x{w}' for m, (h, w) in trained.items())})")


def _recorded(summary: dict[str, Any]) -> str:
    return (f"{summary['games']} games recorded in {summary['shards']} new shard(s) under "
            f"{summary['folder']}")


SIGMA_PRIOR = 25.0 / 3.0
"""TrueSkill's prior sigma (league.ratings.RatingConfig)"""
SIGMA_FLOOR = 0.8
"""below this no player's sigma goes: every game adds the drift tau (25/300) to it; even games
between two players level off near 0.78, lopsided ones higher"""


def cmd_league(args: argparse.Namespace) -> int:
    from league.records import visible
    from league.tournament import stall_window
    from selfplay import league_commands as lc

    if args.league_command == "tournament":
        if args.games_per_pair is not None and args.games_per_pair < 1:
            raise UserError("--games-per-pair must be >= 1")
        if args.until_sigma is not None and not SIGMA_FLOOR <= args.until_sigma < SIGMA_PRIOR:
            raise UserError(f"--until-sigma must be in [{SIGMA_FLOOR}, {SIGMA_PRIOR:.2f}): a "
                            f"new player starts at sigma {SIGMA_PRIOR:.2f} and TrueSkill's drift "
                            f"keeps it above about {SIGMA_FLOOR} however many games are "
                            f"played; got {args.until_sigma}")
        _max_steps(args)
        seed_flag(args.seed)
        if args.processes < 1:
            raise UserError("--processes must be >= 1")
        if not 0.0 <= args.min_quality < 1.0:
            raise UserError("--min-quality must be in [0, 1)")
        from league.ratings import MAX_ELO_K

        if args.elo_k is not None and not 0 < args.elo_k <= MAX_ELO_K:
            raise UserError(f"--elo-k must be in (0, {MAX_ELO_K:g}] (chess uses 10-40), got "
                            f"{args.elo_k}")
        shard_games = _shard_games(args)
        adaptive = args.until_sigma is not None
        result = lc.tournament(args.game, args.players, args.db,
                               10 if args.games_per_pair is None else args.games_per_pair,
                               args.until_sigma, args.map, args.num_envs, args.seed,
                               quiet=args.json, max_steps=args.max_steps,
                               opening_games_per_pair=(args.games_per_pair or 0) if adaptive
                               else 0, processes=args.processes,
                               min_quality=args.min_quality, elo_k=args.elo_k,
                               record=Path(args.record) if args.record else None,
                               shard_games=shard_games)
        human = (f"tournament {result['tournament']}: {result['played']} new matches "
                 f"({result['already_stored']} already stored)\n"
                 + lc.format_leaderboard(result["players"]))
        if result["other_players"]:
            human += (f"\n(ranks are league-wide: {result['other_players']} other players of "
                      "this league are not in the tournament; `selfplay league leaderboard "
                      "--db` lists them all)")
        if result.get("stalled_players"):
            human += (f"\nsigma target {args.until_sigma} not reached: the sigma of "
                      f"{', '.join(map(visible, result['stalled_players']))} stopped falling "
                      f"(no new low in {stall_window(len(result['players']))} matches: its "
                      "games are too one-sided to teach TrueSkill more than its drift adds); "
                      "--min-quality 0.05 leaves such pairings out")
        elif result.get("sigma_reached") is False:
            human += (f"\nsigma target {args.until_sigma} not reached: the tournament stopped "
                      "at its match limit or found no pairing above --min-quality")
        if result["skipped_players"]:
            skipped = ", ".join(map(visible, result["skipped_players"]))
            human += f"\nskipped (missing or corrupt): {skipped}"
        if "record" in result:
            human += "\n" + _recorded(result["record"])
    elif args.league_command == "matches":
        result = lc.matches(args.db, args.game, args.player)
        human = lc.format_matches(result["matches"])
    elif args.league_command == "leaderboard":
        result = lc.leaderboard(args.db, args.game)
        human = (f"league of {result['game']}: {visible(result['db'])}, "
                 f"{len(result['players'])} players, {result['matches']} matches\n"
                 + lc.format_leaderboard(result["players"]))
    else:
        result = lc.report(args.db, args.game, args.out)
        human = f"report written to {result['report']}"
    print(lc.dumps(result) if args.json else human)
    return 0


def cmd_setup(args: argparse.Namespace) -> int:
    """``selfplay setup FAMILY`` (argparse admits only the families that need set-up)."""
    from games.registry import family_named

    family = family_named(args.family)
    report = family.setup(quiet=args.json) or {}
    data = json.loads(json.dumps(dict(report), default=str))
    emit({"ok": True, **data}, args.json, f"{family.title or family.name} is ready")
    return 0


def cmd_games(args: argparse.Namespace) -> int:
    from games.registry import known_games

    names = known_games()
    emit({"games": names}, args.json, "\n".join(names))
    return 0


def _names(value: str | None, flag: str) -> list[str]:
    """``a,b`` -> ``["a", "b"]`` (blanks dropped); a :class:`UserError` when ``flag``'s
    ``value`` names no one (``--imitate ,`` meant everyone)."""
    names = [name.strip() for name in (value or "").split(",") if name.strip()]
    if value is not None and not names:
        raise UserError(f"{flag} {value!r} names no player: give comma-separated names")
    return names


def cmd_bc(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from selfplay.bc import run_cloning
    from selfplay.config import validate
    from selfplay.config_files import build_config
    from selfplay.data_parallel import world_from_environment
    from selfplay.run_loop import TrainingInterrupted

    if world_from_environment()[1] > 1:
        raise UserError("selfplay bc runs in one process (it has no data-parallel learner "
                        "yet): start it without torchrun")
    if args.teachers and args.replays:
        raise UserError("--teachers (live scripted players) and --replays (recorded games) "
                        "are exclusive: give one of them")
    if args.imitate and args.winners_only:
        raise UserError("--imitate (named players) and --winners-only are exclusive: give "
                        "one of them")
    check_total_steps(args.total_steps)
    from selfplay.config_files import parse_set

    game = parse_set(args.set or []).get("game")
    if isinstance(game, dict) and "num_envs" in game:  # --set game.num_envs=N, game={...}
        raise UserError("selfplay bc plays bc.num_envs games at once (game.num_envs is "
                        "selfplay train's): --set bc.num_envs=N")
    config = None
    if args.resume is not None:
        if args.init_from is not None:
            raise UserError("--init-from starts a new run from a checkpoint's network and "
                            "--resume continues a run from its own: give one of them")
        if (args.game or args.config or args.set or args.seed is not None or args.teachers
                or args.replays or args.imitate or args.winners_only):
            raise UserError("--resume continues a run with its saved config (teachers "
                            "included); only --total-steps (and --no-progress, --json) may be "
                            "given with it")
        if args.run_dir is not None:
            raise UserError("--resume names the run to continue; --run-dir is for a new run: "
                            "give one of them")
    else:
        _config_outside_run_dir(args.config, args.run_dir)
        overrides = [*args.set, *(["log.progress=false"] if args.no_progress else [])]
        config = build_config(args.game, args.config, overrides, seed_flag(args.seed),
                              init_from=args.init_from)
        bc = config.bc
        if args.teachers is not None:
            bc = replace(bc, teachers=_names(args.teachers, "--teachers"))
        if args.replays:
            bc = replace(bc, replays=str(Path(args.replays).expanduser().resolve()))
        if args.imitate is not None:
            bc = replace(bc, imitate=_names(args.imitate, "--imitate"))
        if args.winners_only:
            bc = replace(bc, winners_only=True)
        if args.total_steps is not None:
            bc = replace(bc, total_steps=args.total_steps)
        config = replace(config, bc=bc)
        validate(config)
    try:
        summary = run_cloning(config, run_dir=Path(args.run_dir) if args.run_dir else None,
                              resume=Path(args.resume) if args.resume else None,
                              total_steps=args.total_steps if args.resume else None,
                              progress_bar=False if args.resume and args.no_progress else None)
    except TrainingInterrupted as stop:
        return _interrupted(stop, "bc")
    human = (f"cloned {summary['global_step']} steps in {summary['updates']} updates; "
             f"run dir {summary['run_dir']}")
    for key, label in (("bc/accuracy/cell", "accuracy"), ("val/accuracy/cell",
                                                          "validation accuracy")):
        if key in summary:
            human += f"; {label} {summary[key]:.1%}"
    if "snapshots" in summary:
        human += f"; {summary['snapshots']} snapshots rated in {summary['league_db']}"
    emit(summary, args.json, human)
    return 0


# --------------------------------------------------------------------------- parser


class OneLineErrors(argparse.ArgumentParser):
    """argparse with bad flags as one ``error:`` line (its default prints the whole usage
    first), exit status 2; ``--help`` still shows the usage."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrors(
        prog="selfplay", description="Train game-playing agents by self-play.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    train = sub.add_parser("train", help="train an agent with PPO",
                           description="Train with PPO. Settings come from hyperparams/"
                           "<family>.yaml, then --config, then --set.")
    train.add_argument("--game", help="game name (see `selfplay games`)")
    train.add_argument("--config", help="YAML file with settings (may say `base: <family>`)")
    train.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override a setting, e.g. --set ppo.learning_rate=3e-4 (repeatable)")
    train.add_argument("--seed", type=int)
    train.add_argument("--total-steps", type=int, help="environment steps to train for")
    train.add_argument("--run-dir", help="directory for config, logs and checkpoints")
    train.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last "
                       "checkpoint")
    train.add_argument("--init-from", metavar="CHECKPOINT", help="start from this checkpoint's "
                       "network (a run directory means its newest checkpoint; e.g. a behaviour-"
                       "cloning run): weights and normalization statistics, a fresh optimizer")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    train.add_argument("--json", action="store_true", help="print one JSON summary on stdout")
    train.set_defaults(func=cmd_train)

    ev = sub.add_parser("eval", help="measure a checkpoint's returns")
    ev.add_argument("--checkpoint", required=True)
    ev.add_argument("--episodes", type=int, default=10)
    ev.add_argument("--video", help="write one episode to this .mp4/.gif")
    ev.add_argument("--deterministic", action="store_true", help="take the most likely action")
    ev.add_argument("--seed", type=int)
    ev.add_argument("--map", help="play this map instead of the training's (microRTS)")
    ev.add_argument("--max-steps", type=int, help="cut each episode after this many agent "
                    "steps (default: the game's length; an error for games without one)")
    ev.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    ev.set_defaults(func=cmd_eval)

    pl = sub.add_parser("play", help="play a checkpoint against a bot or another checkpoint",
                        description="Play N games, alternating sides; report wins, losses, "
                        "draws and a 95% confidence interval of the win rate.")
    pl.add_argument("--checkpoint", required=True)
    pl.add_argument("--vs", required=True, help="bot name (case-insensitive, e.g. coacai) or "
                    "another checkpoint")
    pl.add_argument("--games", type=int, default=100)
    pl.add_argument("--map", help="map name or file (microRTS)")
    pl.add_argument("--max-steps", type=int, help="cut each game after this many agent steps "
                    "(default: the game's length; an error for games without one)")
    pl.add_argument("--video", help="write the first game of env 0 to this .mp4/.gif")
    pl.add_argument("--seed", type=int,
                    help="seed of the games (default 0; with --record, the games the folder "
                    "holds already, so that a rerun appends new games)")
    pl.add_argument("--deterministic", action="store_true", help="take the most likely action")
    pl.add_argument("--temperature", type=float, default=1.0,
                    help="sample from the policy sharpened (< 1) or flattened (> 1)")
    pl.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    pl.set_defaults(func=cmd_play)

    league = sub.add_parser("league", help="tournaments, ratings, leaderboards and reports")
    league_sub = league.add_subparsers(dest="league_command", metavar="LEAGUE_COMMAND",
                                       required=True)
    tour = league_sub.add_parser("tournament", help="round-robin or TrueSkill-adaptive "
                                 "tournament; re-running resumes it")
    tour.add_argument("--game", required=True)
    tour.add_argument("--players", nargs="+", required=True,
                      help="checkpoints, run directories or bot names")
    tour.add_argument("--games-per-pair", type=int,
                      help="round-robin: games per pair, sides alternating (default 10); "
                      "with --until-sigma, the round robin that opens the adaptive tournament "
                      "(MicroRTS-Py's league protocol)")
    tour.add_argument("--until-sigma", type=float, help="adaptive: play the best-quality "
                      "pairings until every sigma is below this")
    tour.add_argument("--min-quality", type=float, default=0.0,
                      help="adaptive: skip pairings of lower TrueSkill match quality (0.05: the "
                      "favourite wins ~99%%; the weakest bot's sigma stalls on such games)")
    tour.add_argument("--map", help="map (microRTS)")
    tour.add_argument("--num-envs", type=int, default=16, help="games played at once")
    tour.add_argument("--processes", type=int, default=1,
                      help="microRTS engine bots only: worker processes, one game each at a "
                      "time (search bots then think on a whole core; default 1: --num-envs "
                      "games in this process)")
    tour.add_argument("--max-steps", type=int, help="game length limit (microRTS cycles, "
                      "Lux steps; default: the game's, 5000 for bot-only microRTS "
                      "tournaments; an error for games without a length option)")
    tour.add_argument("--seed", type=int, default=0)
    tour.add_argument("--elo-k", type=float, help="Elo K-factor of a new database (default "
                      "32); an existing database keeps the K it was created with, and "
                      "refuses another")
    for p in (pl, tour):
        p.add_argument("--record", metavar="DIR", help="also record the games as replays in "
                       "this folder (as `selfplay record` does; a rerun appends shards)")
        p.add_argument("--shard-games", type=int, default=None, help="with --record: games "
                       f"per shard (default {DEFAULT_SHARD_GAMES})")
    board = league_sub.add_parser("leaderboard", help="rank, player, mu, sigma, mu-3sigma, "
                                  "Elo, games, score, win rate")
    board.add_argument("--game")
    rep = league_sub.add_parser("report", help="one self-contained HTML page: ladder, rating "
                                "curves, payoff heatmap")
    rep.add_argument("--game")
    rep.add_argument("--out", required=True)
    games_list = league_sub.add_parser("matches", help="every stored match as CSV (or --json): "
                                       "players, seat, map, seed, outcome, length")
    games_list.add_argument("--game")
    games_list.add_argument("--player", help="only the matches of this player (its league name)")
    for p in (tour, board, rep, games_list):
        p.add_argument("--db", help="league database (default runs/league/<game>.db"
                       + ("" if p is tour else "; with no --game either, the only database in "
                          "runs/league/") + ")")
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    league.set_defaults(func=cmd_league)

    bc = sub.add_parser("bc", help="behaviour cloning: train the network on teachers' moves",
                        description="Behaviour cloning: the network `selfplay train` uses learns "
                        "the moves of live scripted teachers or of recorded games (masked "
                        "cross-entropy per cell) and, in its value head, the game's reward (or its "
                        "outcomes: bc.value_target). Its "
                        "checkpoints load wherever a training run's do (eval, play, league, "
                        "train --init-from). Settings: the bc section of hyperparams/"
                        "<family>.yaml, then --config, then --set, then these flags.")
    bc.add_argument("--game", help="game name (see `selfplay games`)")
    bc.add_argument("--teachers", metavar="A,B", help="live teachers: the game's scripted "
                    "players, spread over seats and envs (bc.teachers)")
    bc.add_argument("--replays", metavar="DIR", help="a folder of recorded games (bc.replays)")
    bc.add_argument("--imitate", metavar="A,B", help="learn only these players' moves "
                    "(bc.imitate; default: every teacher's)")
    bc.add_argument("--winners-only", action="store_true", help="learn only each game's "
                    "winner's moves (replays; bc.winners_only)")
    bc.add_argument("--config", help="YAML file with settings (may say `base: <family>`)")
    bc.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a setting, e.g. --set bc.learning_rate=1e-3 (repeatable)")
    bc.add_argument("--seed", type=int)
    bc.add_argument("--total-steps", type=int, help="environment steps to clone for "
                    "(bc.total_steps)")
    bc.add_argument("--run-dir", help="directory for config, logs and checkpoints")
    bc.add_argument("--resume", metavar="RUN_DIR", help="continue a cloning run from its last "
                    "checkpoint")
    bc.add_argument("--init-from", metavar="CHECKPOINT", help="start from this checkpoint's "
                    "network (a file or a run directory: its newest checkpoint), e.g. a clone "
                    "to go on cloning with bc.student_share; a fresh optimizer")
    bc.add_argument("--no-progress", action="store_true", help="no progress bar")
    bc.add_argument("--json", action="store_true", help="print one JSON summary on stdout")
    bc.set_defaults(func=cmd_bc)

    from games.registry import families

    needing = [f.name for f in families() if f.needs_setup]
    setup = sub.add_parser("setup", help="fetch engine files and check runtimes "
                           f"({', '.join(needing)})")
    setup.add_argument("family", choices=needing)
    setup.add_argument("--json", action="store_true")
    setup.set_defaults(func=cmd_setup)

    add_record_command(sub)
    add_import_command(sub)

    games = sub.add_parser("games", help="list the games selfplay knows")
    games.add_argument("--json", action="store_true")
    games.set_defaults(func=cmd_games)
    return parser


def _raise_on_termination() -> dict[int, Any]:
    """Turn SIGTERM and SIGHUP into :class:`Terminated` where their action is the default
    (an ignored SIGHUP, as under ``nohup``, stays ignored); returns the handlers replaced.
    ``selfplay train`` installs its own checkpoint-then-stop handlers while it trains."""
    def handler(signum: int, _frame: object) -> None:
        raise Terminated(signum)

    replaced: dict[int, Any] = {}
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and signal.getsignal(sig) is signal.SIG_DFL:
            replaced[sig] = signal.signal(sig, handler)
    return replaced


def out_of_memory(exc: RuntimeError) -> bool:
    """Whether ``exc`` is torch's failed allocation (the CPU allocator's, or CUDA's)."""
    import torch

    text = str(exc)
    return (isinstance(exc, torch.OutOfMemoryError) or "can't allocate memory" in text
            or "out of memory" in text.lower())


def stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (``| head``); it is then
    pointed at /dev/null, so that the interpreter's last flush does not fail as well."""
    import os
    import select

    try:
        fd = sys.stdout.fileno()
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        gone = any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError, AttributeError):  # not a file (a test's capture)
        return False
    if gone:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    return gone


INTERRUPTED_STATUSES = frozenset(128 + int(sig) for sig in STOP_SIGNALS)
"""the exit statuses of a command stopped by Ctrl-C, SIGTERM or SIGHUP"""


def run_command(argv: list[str] | None = None) -> int:
    """Parse ``argv`` and run its command; the exit status (errors as one line, 2)."""
    try:
        parser = build_parser()  # imports numpy and the registry: a second or so
    except KeyboardInterrupt:  # Ctrl-C while the command starts
        print("interrupted", file=sys.stderr)
        return 130
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    in_main = threading.current_thread() is threading.main_thread()
    replaced = _raise_on_termination() if in_main else {}
    try:
        return int(args.func(args))
    except BrokenPipeError as exc:
        if not stdout_closed():
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 141  # `selfplay league leaderboard | head`: the reader left, as 128 + SIGPIPE
    # a stop is matched before user_errors() is evaluated: that imports torch, which a stop
    # arriving while torch was being imported leaves half-initialized (importing it again
    # crashed the process, status 139)
    except Terminated as stop:
        print(f"interrupted by {signal.Signals(stop.signum).name}", file=sys.stderr)
        return 128 + stop.signum
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except user_errors() as exc:  # (evaluated as an exception arrives)
        from selfplay.data_parallel import SameOnEveryRank, echoes_rank_0

        if not (isinstance(exc, SameOnEveryRank) and echoes_rank_0()):
            print(f"error: {exc}", file=sys.stderr)
        return 2
    except MemoryError as exc:  # a size no check foresaw (numpy's arrays of a huge game)
        print(f"error: out of memory ({str(exc).strip() or 'an allocation failed'}): lower "
              "the settings that size the run (numbers of envs, steps, image sizes)",
              file=sys.stderr)
        return 2
    except RuntimeError as exc:
        if not out_of_memory(exc):
            raise
        print(f"error: out of memory ({str(exc).strip().splitlines()[0][:200]}): lower the "
              "settings that size the run (numbers of envs, steps, network widths)",
              file=sys.stderr)
        return 2
    finally:
        for sig, previous in replaced.items():
            signal.signal(sig, previous)


def main(argv: list[str] | None = None) -> int:
    """The ``selfplay`` command (``argv``: its arguments, default ``sys.argv``); its exit
    status. Run as the program (no ``argv``), an interrupted command (stopped by a signal,
    its own clean-up done) ends the process at once where a runtime loaded could crash
    interpreter exit (:func:`~selfplay.interrupts.end_interrupted_process`)."""
    status = run_command(argv)
    if argv is None and status in INTERRUPTED_STATUSES:
        end_interrupted_process(status)
    return status


if __name__ == "__main__":
    sys.exit(main())
