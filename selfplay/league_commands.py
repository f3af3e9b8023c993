"""``selfplay league``: tournaments, leaderboards and reports over a league database."""

from __future__ import annotations

import contextlib
import csv
import difflib
import io
import json
import sqlite3
import sys
import time
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

from games.core import EngineBot, GameError, Policy, VecGame
from games.family import Family, MatchConditions
from games.matches import MatchRunner, RecordTo
from games.options import OptionError
from games.registry import family_of, resolve
from games.replays import folder_totals
from league.db import (
    LEAGUE_DIR,
    LeagueDB,
    LeagueError,
    PlayerKind,
    database_file,
    default_path,
)
from league.ratings import RatingConfig
from league.records import Player, visible
from league.report import REPORT_MARK, printable, write_report
from league.tournament import TournamentConfig, match_seed, run_tournament
from selfplay.checkpoint import (
    CheckpointError,
    load_checkpoint,
    looks_like_path,
    resolve_checkpoint,
)
from selfplay.config import ConfigError
from selfplay.config_files import family_defaults
from selfplay.evaluate import load_agent, trained_config
from selfplay.policy import FrozenPolicy

MAX_SCHEDULED_MATCHES = 1_000_000
"""the most matches one round robin plans"""


def league_db_path(db: str | None, game: str | None) -> Path:
    """The file :func:`open_db` opens: a folder (one that exists, or a name ending in ``/``)
    means its ``league.db``."""
    if db is not None:
        return database_file(db)
    return database_file(str(only_league_db() if game is None
                             else default_path(resolve(game).name)))


def open_db(db: str | None, game: str | None, create: bool = True,
            elo_k: float | None = None) -> LeagueDB:
    """The league database at ``db`` (default: the game's; a training run's directory means
    its ``league.db``; with neither, the only one in ``runs/league/``); refuses another game's.
    ``elo_k`` is the Elo K of a new database; an existing one must have been created with it.
    ``create=False`` (leaderboards, reports) opens an existing database read-only."""
    path = league_db_path(db, game)  # a training run's directory means its league.db
    if not create and not path.is_file():
        raise LeagueError(f"no league database at {path}; run a tournament or training first")
    config = None if elo_k is None else RatingConfig(elo_k=elo_k)
    return LeagueDB(path, game=resolve(game).name if game else None, config=config,
                    create=create, read_only=not create)


def only_league_db(folder: Path = LEAGUE_DIR) -> Path:
    """The league database when neither ``--db`` nor ``--game`` is given: the only
    ``*.db`` file in ``folder`` (``runs/league``, relative to the working directory)."""
    found = sorted(folder.glob("*.db")) if folder.is_dir() else []
    if len(found) == 1:
        return found[0]
    if not found:
        raise LeagueError(f"no league database in {folder}/ (a tournament makes one: selfplay "
                          f"league tournament --game NAME --players ...); or give --db FILE "
                          f"(a training run's directory means its league.db)")
    raise LeagueError(f"{len(found)} league databases in {folder}/ "
                      f"({', '.join(p.name for p in found)}); pick one with --game NAME or "
                      f"--db FILE")


def resolve_player(spec: str, game: str) -> tuple[str, PlayerKind, Path | None]:
    """``(name, kind, path)`` of a ``--players`` entry: a bot, a checkpoint or a run dir.

    A checkpoint that is missing (a path that does not exist, a run directory without
    checkpoints) is still a checkpoint player: the tournament reports and skips it, as it
    does a corrupt one, and plays the others.
    """
    try:
        spec.encode("utf-8")
    except UnicodeEncodeError:
        raise LeagueError(f"player {printable(spec)!r}: the path is not valid UTF-8, which the "
                          "league cannot store; rename the file or folder") from None
    path = Path(spec)
    family = family_of(game)
    bots = {**family.bot_aliases(game),
            **{name.lower(): name for name in family.bot_names(game)}}
    if path.is_dir():
        try:
            found = resolve_checkpoint(path)
        except CheckpointError:
            if spec.lower() in bots and not looks_like_path(spec):
                return bots[spec.lower()], "bot", None  # a folder named like a bot: the bot
            return f"{path.name}/no-checkpoint", "checkpoint", path.resolve() / "checkpoints"
        return f"{path.name}/{found.stem}", "checkpoint", found.resolve()
    if path.is_file() or looks_like_path(spec):
        # a checkpoint never takes a bot's name in the league (nor does ./random, "random" to
        # Path): it would lock the bot out of the database
        name = str(path.resolve()) if str(path).lower() in bots else str(path)
        return name, "checkpoint", path.resolve()
    if spec.lower() in bots:
        return bots[spec.lower()], "bot", None
    raise LeagueError(f"player {spec!r} is neither a checkpoint, a run directory nor a bot of "
                      f"{game} (bots: {', '.join(sorted(set(bots.values()))) or 'none'})")


def register_player(db: LeagueDB, name: str, kind: PlayerKind,
                    path: Path | None) -> tuple[str, bool]:
    """Register a ``--players`` entry; its name in the league and whether it is new there.

    A bot already in the league (a training run's anchor, frozen) plays as it is; a checkpoint
    file already in the league under any name (a training run's snapshot, or the same file
    named by another path) is that player. A checkpoint whose short name (``run/update_N``) is
    taken by another file in this league (say ``expA/run1`` and ``expB/run1``) is registered
    under its full path instead.
    """
    players = db.players()
    if kind == "bot":
        for player in players:
            if player.name == name and player.kind == "bot":
                return name, False
    if path is not None:
        for player in players:
            if player.path is not None and _same_file(Path(player.path), path):
                return player.name, False
        twin = snapshot_twin(players, path)
        if twin is not None:
            print(f"note: {visible(name)} has the weights of the league's snapshot "
                  f"{visible(twin)}: it plays and is rated as that player", file=sys.stderr)
            return twin, False
    known = {p.name for p in players}
    try:
        db.add_player(name, kind, path=str(path) if path else None)
        return name, name not in known
    except LeagueError:
        if kind != "checkpoint" or path is None or name == str(path):
            raise
    db.add_player(str(path), kind, path=str(path))
    return str(path), str(path) not in known


def snapshot_twin(players: Sequence[Player], path: Path) -> str | None:
    """The snapshot player with the weights of checkpoint ``path`` (a run's checkpoint of the
    update at which the run saved that snapshot, given to a tournament on the run's own
    league), else None: one policy is one player. Only the snapshots of the checkpoint's
    update are compared; a file that does not load is left to the tournament to report."""
    candidates = [p for p in players if p.kind == "snapshot" and p.path is not None]
    if not candidates or not path.is_file():
        return None
    try:
        state = load_checkpoint(path)
        weights, update = state["agent"], state["counters"]["update"]
    except (CheckpointError, KeyError, TypeError):
        return None
    for player in candidates:
        if player.metadata.get("update") != update:
            continue
        try:
            other = load_checkpoint(Path(str(player.path)))["agent"]
        except (CheckpointError, KeyError, TypeError):
            continue
        if other.keys() == weights.keys() and all(
                isinstance(weights[k], torch.Tensor) and isinstance(other[k], torch.Tensor)
                and weights[k].shape == other[k].shape and torch.equal(weights[k], other[k])
                for k in weights):
            return player.name
    return None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _other_game(path: Path, game: str) -> str | None:
    """Why checkpoint ``path`` can never play ``game`` (it plays another), or None (also when
    it does not load: the tournament reports that, and keeps such a player broken until its
    file loads again)."""
    try:
        other = trained_config(load_checkpoint(path), path)[0].game.name
    except (CheckpointError, ConfigError):
        return None
    return None if other == game else f"{path} plays {other}, not {game}"


def _missing(path: Path | None) -> str | None:
    """Why a checkpoint player cannot be found (None: its file exists)."""
    if path is None or path.is_file():
        return None
    if path.name == "checkpoints":  # a run directory without checkpoints
        return f"{path.parent} holds no checkpoint"
    return f"checkpoint {path} not found"


def tournament(game: str, players: Sequence[str], db_path: str | None,
               games_per_pair: int, until_sigma: float | None, map_name: str | None,
               num_envs: int, seed: int, quiet: bool = False,
               max_steps: int | None = None,
               opening_games_per_pair: int = 0, processes: int = 1,
               min_quality: float = 0.0, elo_k: float | None = None,
               record: Path | None = None, shard_games: int = 100) -> dict[str, Any]:
    """Register ``players`` and play (or finish) their tournament; returns a summary.
    With ``until_sigma``, ``opening_games_per_pair`` > 0 opens it with a round robin.
    ``processes`` > 1 (engine bots only) plays one game per worker process.
    ``elo_k``: the Elo K of a new database (an existing one must have been made with it).
    ``record``: the matches played are also recorded into that replay folder (appending
    shards of ``shard_games``; ``record`` in the summary counts what was added), under the
    players' league names; a family that cannot record them is an error before any match."""
    game = resolve(game).name
    if len(players) < 2:
        raise LeagueError("a tournament needs at least two --players")
    if num_envs < 1:
        raise LeagueError(f"--num-envs must be >= 1, got {num_envs}")
    pairs = len(players) * (len(players) - 1) // 2
    per_pair = opening_games_per_pair if until_sigma is not None else games_per_pair
    planned = pairs * per_pair  # adaptive: only its opening round robin is planned
    if planned > MAX_SCHEDULED_MATCHES:  # the schedule is built whole before the first match
        raise LeagueError(f"--games-per-pair {per_pair} over "
                          f"{pairs} pairs plans {planned:,} matches; at most "
                          f"{MAX_SCHEDULED_MATCHES:,} at once (a tournament run again with "
                          "more games per pair plays only the new ones)")
    # every player named before the database is opened (or made): a typo changes nothing
    resolved = [resolve_player(spec, game) for spec in players]
    # one short name for two files (expA/run1 and expB/run1) is fine: the league tells them
    # apart by path (register_player); a bot named twice is not
    entries: dict[str, list[Path | None]] = {}
    for name, _, path in resolved:
        entries.setdefault(name, []).append(path)
    twice = sorted(name for name, paths in entries.items()
                   if len(paths) > 1 and any(path is None for path in paths))
    if twice:
        raise LeagueError(f"--players names {', '.join(twice)} more than once; each player "
                          "may appear only once in a tournament")
    files = [(spec, path) for spec, (_, _, path) in zip(players, resolved, strict=True)
             if path is not None and path.is_file()]
    for i, (spec, path) in enumerate(files):
        for other, other_path in files[i + 1:]:
            if _same_file(path, other_path):
                raise LeagueError(f"--players {spec} and {other} are the same checkpoint "
                                  f"({path}); each player may appear only once")
    family = family_of(game)
    if not family.two_player:  # refused before a database is made for it
        raise LeagueError(f"{game} is single-agent: a tournament needs a two-player game")
    if not family.plays_engine_bots():
        inside = [name for name, kind, _ in resolved if kind == "bot"
                  and isinstance(family.opponent(game, name, seed), EngineBot)]
        if inside:
            raise LeagueError(f"{', '.join(inside)} play(s) inside the {game} engine, not "
                              "through a seat: it cannot play tournament matches (selfplay "
                              f"play --vs {inside[0]} plays a checkpoint against it)")
    if not family.decided(game):
        raise LeagueError(f"{game}'s games have no winner (cooperative or mixed): there is "
                          "nothing to rate")
    if map_name is not None:  # one tournament however the map is spelled (and known)
        map_name = family.canonical_map(game, map_name)
    if max_steps is not None:
        family.with_game_length(game, {}, max_steps)  # a game without lengths: refused now
    db = open_db(db_path, game, elo_k=elo_k)
    new_players: list[int] = []
    try:
        with database_errors(db.path):
            return _tournament(db, game, list(zip(players, resolved, strict=True)),
                               games_per_pair, until_sigma, map_name,
                               num_envs, seed, quiet, max_steps, opening_games_per_pair,
                               processes, min_quality, record, shard_games, new_players)
    except BaseException:
        # the players this command registered and that played no match go again (the file
        # stays: another tournament may have opened the same new database meanwhile)
        with contextlib.suppress(sqlite3.Error, OSError):
            db.remove_unplayed(new_players)
        raise
    finally:
        db.close()


@contextmanager
def database_errors(path: Path) -> Iterator[None]:
    """SQLite's errors past opening (a file damaged inside, a read-only file, a lock held
    past the busy timeout) as one line naming the database."""
    try:
        yield
    except sqlite3.Error as exc:
        raise LeagueError(f"league database {path}: {exc} (SQLite {type(exc).__name__})"
                          ) from exc


def _tournament(db: LeagueDB, game: str,
                resolved: list[tuple[str, tuple[str, PlayerKind, Path | None]]],
                games_per_pair: int, until_sigma: float | None, map_name: str | None,
                num_envs: int, seed: int, quiet: bool, max_steps: int | None,
                opening_games_per_pair: int, processes: int, min_quality: float,
                record: Path | None, shard_games: int,
                new_players: list[int]) -> dict[str, Any]:
    """:func:`tournament` on the open database ``db``, its players resolved (each beside its
    ``--players`` entry; the ids of those
    it registers anew appended to ``new_players``). A checkpoint that cannot be found and is
    not in the league already is reported and skipped without being registered."""
    names: list[str] = []
    given_as: dict[str, str] = {}  # each --players entry's name -> its player in the league
    paths: dict[str, Path | None] = {}
    unfound: list[str] = []
    known_files = [Path(p.path) for p in db.players() if p.path is not None]
    for given, (name, kind, path) in resolved:
        missing = _missing(path) if kind == "checkpoint" else None
        if missing is None and kind == "checkpoint" and path is not None:
            missing = _other_game(path, game)  # it will never load here: never a player
        if missing is not None and not any(
                path is not None and _same_file(path, known) for known in known_files):
            print(f"warning: skipping player {name!r}: {visible(missing)}", file=sys.stderr)
            unfound.append(name)
            continue
        name, new = register_player(db, name, kind, path)
        if new:
            new_players.append(db.player(name).id)
        if name in names:  # a run's checkpoint and its own snapshot file, say
            first = next(g for g, n in given_as.items() if n == name)
            raise LeagueError(f"--players {visible(first)} and {visible(given)} are one player of "
                              f"this league ({visible(name)}: the same weights); name it once")
        given_as[given] = name
        names.append(name)
        paths[name] = path
    family = family_of(game)
    base_options = dict(family_defaults(family.name, game)
                        .get("game", {}).get("options", {}) or {})
    # the checkpoints play with the observation settings they were trained with (the first
    # checkpoint's; one game shows one view): a checkpoint trained otherwise is skipped
    view = first_view(family, game, [p for p in paths.values() if p is not None])
    base_options.update(view)
    # players that can play: bots and checkpoints whose file exists (the others are
    # reported and skipped by the tournament)
    playable = [p for p in paths.values() if p is None or p.is_file()]
    defaults = family.match_defaults(base_options, all(p is None for p in playable))
    map_name = map_name or defaults.map_name
    if map_name is not None:  # one tournament however the map is spelled
        map_name = family.canonical_map(game, map_name)
    if max_steps is not None:
        base_options = family.with_game_length(game, base_options, max_steps)
    recording = None if record is None else RecordTo(
        record, {db.player(name).id: name for name in names}, shard_games)
    config = TournamentConfig(games_per_pair=games_per_pair, until_sigma=until_sigma,
                              opening_games_per_pair=opening_games_per_pair,
                              min_quality=min_quality,
                              num_envs=num_envs, seed=seed, map=map_name or "",
                              settings=tournament_settings(max_steps, defaults.max_steps))
    # the same command plays the same games; one that goes on with a tournament (more games
    # per pair, a smaller --until-sigma) draws its games afresh, from the matches stored: from
    # --seed alone they replayed the first games (same orders, same outcomes), counted again
    stored = len(db.match_keys(config.tournament_id + "/"))
    seed = seed if not stored else match_seed(seed, f"continued/{stored}")
    conditions = MatchConditions(options=base_options, num_envs=num_envs, seed=seed,
                                 map_name=map_name, max_steps=max_steps or defaults.max_steps,
                                 processes=processes, record=recording)
    spec_cache: dict[str, Any] = {}

    match_games = family.match_games(game, base_options, map_name)

    def game_factory(envs: int, game_seed: int) -> VecGame:
        made = match_games(envs, game_seed)
        spec_cache.setdefault("spec", made.spec)
        return made

    def policy_factory(name: str) -> Policy:
        path = paths.get(name)
        if path is None:  # a bot: acts through the game's seats or inside its engine
            return family.opponent(game, name, seed)
        if path.name == "checkpoints":  # a run directory without checkpoints
            raise FileNotFoundError(f"{path.parent} holds no checkpoint")
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {path} not found")
        if "spec" not in spec_cache:
            game_factory(1, seed).close()
        state = load_checkpoint(path)
        other = trained_config(state, path)[0].game.name
        if other != game:
            raise CheckpointError(f"{path} plays {other}, not {game}")
        try:
            differ = family.observation_difference(trained_config(state, path)[0].game.options,
                                                   view)
        except (OptionError, GameError) as exc:  # the file's, not the tournament's: skipped
            raise CheckpointError(f"{path} holds game options this selfplay cannot read: "
                                  f"{exc}") from exc
        if view and differ is not None:
            key, own, first = differ
            raise CheckpointError(
                f"{path} was trained with game.options.{key}={own!r}, the tournament's first "
                f"checkpoint with {first!r}: one game cannot show both their observations; "
                "rate checkpoints trained alike together")
        _, agent, _ = load_agent(path, spec_cache["spec"], state)
        # sampled actions from --seed: the same command plays the same games
        generator = torch.Generator(next(agent.parameters()).device).manual_seed(
            match_seed(seed, name))
        return FrozenPolicy(agent, generator=generator)

    def progress(done: int, total: int | None) -> None:
        if not quiet and (done % 50 == 0 or done == total):
            print(f"  {done}/{total if total is not None else '?'} matches",
                  file=sys.stderr, flush=True)

    def runner(policies: Mapping[int, Policy]) -> MatchRunner:
        return family.match_runner(game, policies, conditions, game_factory)

    if any(p is not None for p in paths.values()):
        # the checkpoints load against the game's spec: a bad game option is the user's
        # error here, not a broken player inside the tournament
        game_factory(1, seed).close()
    before = folder_totals(record) if record is not None else (0, 0)
    summary = run_tournament(db, names, policy_factory, game_factory, config,
                             progress=progress, runner=runner)
    summary.skipped_players[:0] = unfound
    loaded = len(names) + len(unfound) - len(summary.skipped_players)
    if loaded < 2:
        raise LeagueError(f"only {loaded} of the players "
                          f"load (skipped: {', '.join(map(visible, summary.skipped_players))}):"
                          " no match "
                          "played")
    standings = db.leaderboard()
    board = [s.to_json() for s in standings if s.name in set(names)]
    result = {**summary.to_json(), "db": str(db.path), "players": board,
              "other_players": len(standings) - len(board)}
    if record is not None:
        after = folder_totals(record)
        result["record"] = {"folder": str(record), "games": after[0] - before[0],
                            "shards": after[1] - before[1]}
    return result


def first_view(family: Family, game: str, paths: Sequence[Path]) -> dict[str, Any]:
    """The observation settings (:meth:`Family.observation_settings`) of the first of the
    checkpoint ``paths`` that loads as a checkpoint of ``game`` (empty if none does: the
    tournament reports those)."""
    for path in paths:
        if not path.is_file():
            continue
        try:
            trained = trained_config(load_checkpoint(path), path)[0]
        except (CheckpointError, ConfigError):
            continue
        if trained.game.name != game:
            continue
        try:
            return family.observation_settings(trained.game.options)
        except (OptionError, GameError):  # options this version refuses: the player's skip
            continue
    return {}


def tournament_settings(max_steps: int | None, default_steps: object) -> str:
    """:attr:`TournamentConfig.settings` of a ``league tournament``: its game length when that
    is not the game's default (games of another length are another tournament; the default
    keeps the id that databases made before game lengths were part of it resume under)."""
    if max_steps is None or max_steps == default_steps:
        return ""
    return f"max_steps={max_steps}"


def leaderboard(db_path: str | None, game: str | None) -> dict[str, Any]:
    db = open_db(db_path, game, create=False)
    try:
        with database_errors(db.path), db.reading():  # players and matches of one moment
            roles = {p.id: p.metadata.get("role") for p in db.players()}  # snapshots' roles
            return {"game": db.game, "db": str(db.path),
                    "players": [{**s.to_json(), **({"role": roles[s.player_id]}
                                                   if roles.get(s.player_id) else {})}
                                for s in db.leaderboard()],
                    "matches": db.match_count()}
    finally:
        db.close()


MATCH_COLUMNS = ("id", "tournament", "player_a", "player_b", "side_a", "map", "seed",
                 "outcome_a", "length", "duration_s", "recorded_utc")
"""the columns of ``league matches``: ``outcome_a`` is player a's (1 win, 0 draw, -1 loss),
``side_a`` the seat player a played, ``tournament`` the id its key starts with"""


def matches(db_path: str | None, game: str | None, player: str | None) -> dict[str, Any]:
    """Every stored match (``player``: only that player's), oldest first, as rows of
    :data:`MATCH_COLUMNS`; a ``player`` the league does not know is an error naming it."""
    db = open_db(db_path, game, create=False)
    try:
        with database_errors(db.path), db.reading():
            names = {p.id: p.name for p in db.players()}
            wanted = None
            if player is not None:
                wanted = next((pid for pid, name in names.items() if name == player), None)
                if wanted is None:
                    close = difflib.get_close_matches(player, list(names.values()), n=3)
                    hint = f" (did you mean {', '.join(map(visible, close))}?)" if close else ""
                    raise LeagueError(f"--player {visible(player)!r} is not a player of this "
                                      f"league{hint}; `selfplay league leaderboard` lists them")
            rows = [{"id": m.id, "tournament": m.key.split("/", 1)[0] if "/" in m.key else "",
                     "player_a": names.get(m.player_a, str(m.player_a)),
                     "player_b": names.get(m.player_b, str(m.player_b)),
                     "side_a": m.side_a, "map": m.map, "seed": m.seed, "outcome_a": m.outcome,
                     "length": m.length, "duration_s": round(m.duration, 3),
                     "recorded_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                   time.gmtime(m.created))}
                    for m in db.matches()
                    if wanted is None or wanted in (m.player_a, m.player_b)]
        return {"game": db.game, "db": str(db.path), "matches": rows}
    finally:
        db.close()


def format_matches(rows: list[dict[str, Any]]) -> str:
    """The matches as CSV (a header line, then one line per match) for a spreadsheet or
    ``pandas.read_csv``; names with commas or quotes are quoted."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=MATCH_COLUMNS, lineterminator="\n")
    writer.writeheader()
    text = ("tournament", "player_a", "player_b", "map")  # names on a terminal: no raw ESC
    writer.writerows({k: visible(v) if k in text else v for k, v in row.items()}
                     for row in rows)
    return out.getvalue().rstrip("\n")


def format_leaderboard(rows: list[dict[str, Any]]) -> str:
    """The leaderboard as text; a broken player (its checkpoint missing or corrupt) says so."""
    header = f"{'rank':>4}  {'player':<40} {'mu':>6} {'sigma':>6} {'mu-3s':>6} {'elo':>7} " \
             f"{'games':>6} {'score':>6} {'win%':>6}  status"
    lines = [header, "-" * len(header)]
    for r in rows:
        name = _fit(visible(r["name"]), 40)
        status = (f"broken: {visible(r['broken'])}" if r.get("broken")
                  else "anchor" if r.get("frozen")
                  else visible(str(r["role"])) if r.get("role", "main") != "main" else "")
        lines.append(f"{r['rank']:>4}  {name} {r['mu']:6.2f} {r['sigma']:6.2f} "
                     f"{r['conservative']:6.2f} {r['elo']:7.1f} {r['games']:6d} "
                     f"{_percent(r.get('score'))} {_percent(r['win_rate'])}  {status}".rstrip())
    if not rows:
        lines.append("(no players yet: `selfplay league tournament` or a training run adds "
                     "them)")
    else:
        lines.append(LEADERBOARD_LEGEND)
    return "\n".join(lines)


LEADERBOARD_LEGEND = (
    "(ranked by mu-3s, TrueSkill's conservative rating; score: (wins + draws/2) / games; "
    "win%: wins / games; anchor: a rating frozen at its start, the league's yardstick; an "
    "exploiter's snapshots are marked with their role)")


def _percent(rate: float | None) -> str:
    """A rate as ``' 12.5%'``, or ``'     -'`` for a player without games."""
    return "     -" if rate is None else f"{100 * rate:5.1f}%"


def _width(text: str) -> int:
    """Terminal columns of ``text`` (East Asian wide characters take two, combining marks
    none)."""
    return sum(0 if unicodedata.combining(c) else
               2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _fit(text: str, columns: int) -> str:
    """``text`` padded to ``columns`` terminal columns, its start cut to ``...`` if wider."""
    if _width(text) > columns:
        while _width(text) > columns - 3:
            text = text[1:]
        text = "..." + text
    return text + " " * (columns - _width(text))


def _is_report(path: Path) -> bool:
    """Whether ``path`` is a report this command wrote (its first line), which it may
    replace."""
    try:
        with path.open("rb") as f:
            head = f.read(2048)
    except OSError:
        return False
    return head.startswith(REPORT_MARK.encode()) or (  # or one an earlier version wrote
        head.startswith(b"<!DOCTYPE html>") and b"<title>League report: " in head)


def report(db_path: str | None, game: str | None, out: str) -> dict[str, Any]:
    db = open_db(db_path, game, create=False)
    try:
        target = Path(out).resolve()
        if target in {Path(f"{db.path}{end}").resolve()
                      for end in ("", "-wal", "-shm", "-journal")}:
            raise LeagueError(f"--out {out} is the league database {db.path} (or its "
                              "journal); name an .html file")
        if target.is_dir():
            raise LeagueError(f"--out {out} is a folder; name an .html file")
        if target.exists() and not _is_report(target):
            raise LeagueError(f"--out {out} exists and is not a league report: it is left as "
                              "it is; name a new file (an earlier report is replaced)")
        above = next((p for p in target.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise LeagueError(f"--out {out}: {above} is a file, not a folder")
        try:
            with database_errors(db.path), db.reading():
                path = write_report(db, out)
        except OSError as exc:  # not the atomic write's temporary file: the --out given
            raise LeagueError(f"--out {out}: cannot write it ({exc.strerror or exc})") from exc
    finally:
        db.close()
    return {"report": str(path)}


def dumps(result: dict[str, Any]) -> str:
    return json.dumps(result, default=str)
