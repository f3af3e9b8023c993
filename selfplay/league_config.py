"""Settings of training inside a league: the ``league`` section of a training config, and
the checks that refuse contradictory or out-of-range ones before a run starts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from league.ratings import MAX_ELO_K


@dataclass(frozen=True)
class LeagueConfig:
    enabled: bool = False
    """Train inside a league (two-seat games): snapshots, PFSP opponents, ratings."""
    db: str | None = None
    """League database file (default: league.db in the run directory); runs that share one
    file play each other's snapshots."""
    role: Literal["main", "main_exploiter", "league_exploiter"] = "main"
    """main: self-play plus PFSP over every snapshot in the league. main_exploiter: plays the
    main agent's newest snapshot (PFSP over its snapshots while it wins < exploiter_threshold);
    needs league.db naming the main run's database. league_exploiter: PFSP over every
    snapshot, no self-play. Every role's snapshots join the league."""
    target: str | None = None
    """main_exploiter: the run (directory name) whose snapshots are the main agent (default:
    every snapshot of role main in league.db)."""
    self_play: float = 0.5
    """Share of games against the latest learner; the rest against past snapshots (PFSP).
    Main role only: exploiters never play themselves."""
    weighting: Literal["hard", "variance", "linear", "linear_capped"] | None = None
    """PFSP weighting of this run's role over its candidate snapshots; default AlphaStar's
    for the role: hard (main), variance (main_exploiter), linear_capped (league_exploiter)."""
    exploiter_threshold: float = 0.1
    """main_exploiter: below this win rate against the main agent's newest snapshot, play PFSP
    over the main agent's earlier snapshots instead."""
    max_active_opponents: int = 4
    """Snapshot policies loaded at once (each costs one forward pass per step). While every
    one plays unfinished games, the least recently drawn starts no new game so that its slot
    frees for the next snapshot drawn; with 1 the snapshot loaded first plays every game
    against a snapshot (no slot to turn over to: use 2 or more for PFSP over the league)."""
    snapshot_every: int = 10
    """Freeze the learner as a snapshot every this many updates."""
    eval_every: int = 10
    """Rate the newest snapshot every this many updates (matches beside training)."""
    eval_games: int = 4
    """Rating games per opponent of the pool (both sides)."""
    eval_pool: int = 4
    """Most recent earlier snapshots in the rating pool."""
    eval_envs: int = 8
    """Games played at once in rating matches."""
    eval_process: bool = True
    """Play the rating matches in a rater process beside training (spawned, its own engine),
    so training does not wait for them; each rating is logged when its games are done, at its
    snapshot's step. False plays them in the training process between updates."""
    anchors: list[str] = field(default_factory=list)
    """Scripted bots in every snapshot's rating pool (microRTS: engine bots)."""
    bots: list[str] = field(default_factory=list)
    """Scripted bots the learner trains against, picked by PFSP (games whose bots play a seat,
    e.g. tic-tac-toe; microRTS engine bots play in the bot envs, see game.options.bots)."""
    bot_share: float = 0.0
    """Share of the contested envs' games against league.bots (taken from the PFSP share)."""
    bot_env_pfsp: bool = False
    """microRTS: at each episode end in a bot env, draw that env's next engine bot from
    game.options.bots by PFSP (league.weighting, hard by default) over the learner's decayed
    results against each bot, so it meets the bots it loses to more often. False: each bot
    env keeps its bot of the env layout for the whole run."""
    freeze_anchors: bool = True
    """Anchors keep their starting rating for good: a fixed yardstick across the whole run.
    False lets the snapshots' games move them too (from the TrueSkill prior)."""
    anchor_calibration_games: int = 10
    """Frozen anchors: games per pair of anchors (both sides) played when anchors join a
    league, their ratings from these games their starting ones (a new anchor against those
    already there), so that the yardstick's marks are apart; 0 starts every anchor at the
    prior (random and the strongest bot at one μ)."""
    elo_k: float | None = None
    """Elo K-factor of a league database this run creates (None: 32). A database keeps the K
    it was created with; a run asking another K of an existing one is refused."""


def league_checks(league: LeagueConfig) -> list[tuple[bool, str]]:
    """``(ok, message)`` for every rule of ``league`` alone that saved runs keep too
    (:func:`selfplay.config.validate` raises the first failing one)."""
    return [
        (0.0 <= league.self_play <= 1.0, "league.self_play must be in [0, 1]"),
        (league.bot_share >= 0.0 and league.self_play + league.bot_share <= 1.0 + 1e-9,
         "league.bot_share must be >= 0 with league.self_play + league.bot_share <= 1"),
        (league.bot_share == 0.0 or bool(league.bots),
         "league.bot_share > 0 needs league.bots (the scripted bots to play)"),
        (league.max_active_opponents >= 1, "league.max_active_opponents must be >= 1"),
        (league.snapshot_every >= 1 and league.eval_every >= 1,
         "league.snapshot_every and league.eval_every must be >= 1"),
        (0.0 <= league.exploiter_threshold <= 1.0,
         "league.exploiter_threshold must be in [0, 1]"),
        (league.elo_k is None or league.elo_k > 0,
         f"league.elo_k must be > 0 (or null: 32), got {league.elo_k}"),
        (league.target is None or league.role == "main_exploiter",
         f"league.target is only used with league.role=main_exploiter (league.role is "
         f"{league.role}); remove league.target or set the role"),
        (not league.enabled or league.role != "main_exploiter" or league.db is not None,
         "league.role=main_exploiter needs league.db: the main run's league database, e.g. "
         "--set league.db=runs/main/league.db"),
    ]


def new_league_checks(league: LeagueConfig) -> list[tuple[bool, str]]:
    """The rules of a league config being made, beyond :func:`league_checks`: settings older
    versions accepted, so that runs saved with them still load, play and resume."""
    asked = [f"league.role={league.role}"] if league.role != "main" else []
    asked += [f"league.db={league.db}"] if league.db is not None else []
    asked += ["league.bot_env_pfsp=true"] if league.bot_env_pfsp else []
    return [
        (league.enabled or not asked,
         f"league.enabled is false, yet {' and '.join(asked)} ask for a league: set "
         "league.enabled=true, or drop them"),
        (_distinct(league.bots), f"league.bots names a bot twice: {league.bots}"),
        (_distinct(league.anchors), f"league.anchors names a bot twice: {league.anchors}"),
        (league.eval_games >= 1, f"league.eval_games must be >= 1 (rating games per opponent, "
                                 f"both sides), got {league.eval_games}"),
        (league.eval_pool >= 0, f"league.eval_pool must be >= 0 (earlier snapshots in the "
                                f"rating pool; 0: the anchors only), got {league.eval_pool}"),
        (league.eval_pool >= 1 or bool(league.anchors),
         "league.eval_pool=0 without league.anchors rates the snapshots against no one: "
         "raise league.eval_pool or name anchors"),
        (league.eval_envs >= 1, f"league.eval_envs must be >= 1, got {league.eval_envs}"),
        (league.anchor_calibration_games >= 0,
         f"league.anchor_calibration_games must be >= 0 (0: anchors start at the prior), got "
         f"{league.anchor_calibration_games}"),
        (league.elo_k is None or league.elo_k <= MAX_ELO_K,
         f"league.elo_k must be in (0, {MAX_ELO_K:g}] (or null: 32; chess uses 10-40), got "
         f"{league.elo_k}"),
        (not league.enabled or league.role != "league_exploiter" or league.db is not None,
         "league.role=league_exploiter needs league.db: the main run's league database (an "
         "exploiter of its own database has no one to exploit), e.g. "
         "--set league.db=runs/main/league.db"),
    ]


def _distinct(names: list[str]) -> bool:
    """No name twice (bot names are case-insensitive)."""
    return len({name.lower() for name in names}) == len(names)
