"""Self-play training inside a league: snapshots, PFSP opponents, ratings beside training.

:class:`LeagueHook` attaches to a training run whose game has two seats, through its
:class:`~selfplay.ppo.TrainingContext` (the seats' owners, episode ends, update hooks).
Seat 0 of every two-seat env is the learner; seat 1 is re-assigned at each episode end by the
matchmaker, according to the run's ``league.role`` (AlphaStar's roles):

* ``main``: the learner itself (latest-vs-latest, share ``self_play``) or a snapshot of the
  league chosen by prioritized fictitious self-play (PFSP) from the decayed payoff table;
* ``main_exploiter``: the main agent, played as the newest snapshot of role ``main`` in the
  league database (of run ``league.target`` when set); while the exploiter wins less than
  ``exploiter_threshold`` against it, PFSP over all of the main agent's snapshots (a game
  against the newest of them counts as one against the main agent too, so the exploiter
  returns to it once it wins enough);
* ``league_exploiter``: PFSP over every snapshot of the league, its own included.

Every role's snapshots are registered in the league database with their role, and every run
re-reads the database after each update, so runs sharing one ``league.db`` file play each
other's new snapshots (the main agent meets the exploiters' snapshots through PFSP). At most
``max_active_opponents`` snapshot policies are loaded at a time (one forward pass each per
step). Every ``snapshot_every`` updates the learner's weights are frozen as a snapshot (a run
started from another network, ``init_from``, also at update 0, so the league rates the network
it started from first); every ``eval_every`` updates the newest snapshot plays rating matches
against the reference pool (earlier snapshots and scripted anchors), and its TrueSkill rating
is logged (the tournaments' bookkeeping: :mod:`selfplay.snapshot_ratings`). Anchors may be
bots that play inside the engine: their matches are played by the family's own match runner
(:meth:`games.family.Family.match_runner`).

Bot envs (one seat: an engine bot plays the other side) keep the bot of the env layout unless
``league.bot_env_pfsp`` is set: then each one's next bot is drawn by PFSP
(:mod:`selfplay.league_bot_envs`). The learner keeps its side of each env.

Resuming after a crash: a registered snapshot is never rewritten. The updates replayed from the
last checkpoint reuse the snapshots the crashed process registered under the same names (their
stored matches were played by those weights), and a snapshot's rating tournament, named after
it, plays only its matches not yet stored, each recorded in one transaction: no rating match is
lost, half-written or stored twice. Training games are not stored in the database; their payoff
table, the matchmaker's RNG, each env's opponent and the loaded opponents are saved in the
trainer's checkpoints (``extra["league"]``), so a resumed run draws the same opponents as an
uninterrupted one.

Data-parallel ranks (``torchrun``): rank 0 owns the league (the database, snapshots, ratings
and the pool); every rank draws the opponents of its own envs with its own RNG from a copy of
rank 0's pool and payoff table. After each update the other ranks' finished games go to rank
0's payoff table and rank 0's pool comes back to every rank, so all ranks sample from the same
table. The ranks read the database and the snapshot files (the run directory must be visible
to every rank, as for resuming). Checkpoints hold every rank's draws; a run resumed on another
number of ranks keeps the pool and payoff table and draws its envs' opponents afresh.
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from games.core import (
    EpisodeStats,
    GameError,
    HasSides,
    Outcome,
    ScriptedPolicy,
)
from games.registry import family_of
from league.db import LeagueDB, database_file
from league.matchmaking import Matchmaker, MatchmakingConfig
from league.ratings import RatingConfig
from league.records import Player
from league.snapshots import (
    load_player_snapshot,
    snapshot_run,
)
from league.tournament import IncompatiblePlayer
from selfplay.acting import StepListener
from selfplay.config import ConfigError, LeagueConfig
from selfplay.league_bot_envs import LEARNER, BotEnvDraws
from selfplay.policy import FrozenPolicy
from selfplay.ppo import TrainingContext
from selfplay.snapshot_ratings import (
    SnapshotFit,
    SnapshotRatings,
    follow_moved_run,
    own_snapshots_problem,
    register_anchors,
    register_snapshot,
)
from selfplay.tracking import MetricSink, RunDir, logged_ratings

MAIN = -2  # a main exploiter's stand-in for the main agent, played as its newest snapshot


class LeagueHook:
    """Opponent assignment, snapshots and ratings for one training run."""

    def __init__(self, trainer: TrainingContext, run_path: Path, config: LeagueConfig) -> None:
        if not trainer.spec.decided:
            raise ConfigError(f"league.enabled needs games with a winner; {trainer.spec.name}'s "
                              "have none (cooperative or mixed): set league.enabled=false")
        if trainer.spec.num_seats != 2:
            raise ConfigError(f"league.enabled needs a two-seat game; {trainer.spec.name} has "
                              f"{trainer.spec.num_seats} seat(s) as configured: set "
                              "league.enabled=false (or, in a game with engine bots, give it "
                              "self-play envs)")
        self.trainer = trainer
        self.config = config
        self.ranks = ranks = trainer.ranks
        self.role = config.role
        self.run_name = run_path.name
        self.snapshot_dir = run_path / "snapshots"
        db_path = database_file(config.db) if config.db else run_path / "league.db"
        # league.elo_k: the K of a database made here; an existing one keeps its own (another
        # K is refused, naming both)
        rating = None if config.elo_k is None else RatingConfig(elo_k=config.elo_k)
        if not ranks.is_main:  # rank 0 creates the database and registers the players first
            ranks.barrier()
        resuming = trainer.restored_extra.get("league") is not None
        if resuming and (not db_path.is_file() or db_path.stat().st_size == 0):
            raise ConfigError(f"league.db {db_path} is missing or empty: the league this run "
                              "resumes (its players, matches and ratings) was there; restore "
                              "the file, or point league.db at it in config.yaml")
        if config.role != "main" and not db_path.is_file():  # a typo made a new database
            raise ConfigError(f"league.db: no league database at {db_path}; an exploiter "
                              f"(league.role={config.role}) joins the main run's: start "
                              "that run first, or fix the path")
        self.db = LeagueDB(db_path, game=trainer.spec.name, config=rating)
        seed = ranks.seed(trainer.config.seed)  # this rank's draws
        bot_share = config.bot_share if config.bots else 0.0
        defaults = MatchmakingConfig()  # AlphaStar's weighting of each role
        self.matchmaker = Matchmaker(MatchmakingConfig(
            self_play=config.self_play, pfsp=max(0.0, 1.0 - config.self_play - bot_share),
            bots=bot_share, weighting=config.weighting or defaults.weighting,
            main_exploiter_weighting=config.weighting or defaults.main_exploiter_weighting,
            league_exploiter_weighting=config.weighting or defaults.league_exploiter_weighting,
            exploiter_threshold=config.exploiter_threshold))
        if config.role == "main_exploiter":
            self.matchmaker.add_learner(MAIN, "main")
        self.matchmaker.add_learner(LEARNER, config.role)
        if ranks.world > 1:  # this rank's games, for rank 0's payoff table
            self.matchmaker.journal = []
        self.rng = np.random.default_rng(seed + 17)
        self.slots: OrderedDict[int, int] = OrderedDict()  # player id -> owner slot (LRU)
        self.draining: int | None = None
        """the loaded snapshot given no new games, so that its slot frees for the snapshots
        drawn while every slot was busy (see :meth:`_slot_for`)"""
        self.redraws = 0  # snapshot draws replaced since the last update (every slot busy)
        self.opponent = np.full(trainer.spec.num_envs, LEARNER, np.int64)  # [E] pick of seat 1
        self.pooled: set[int] = set()  # snapshot ids ever added to the matchmaker
        self.fit = SnapshotFit(self.db, self.run_name, trainer.spec, trainer.config.network,
                               trainer.config.normalize)
        # snapshots dropped because their file could not be read -> the file's mtime then
        # (None: missing); they rejoin once the file changes or another process reads it
        self.dropped: dict[int, float | None] = {}
        self.targets: list[int] = []  # main exploiter: the main agent's snapshots, oldest first
        self.latest: int | None = None  # this run's newest snapshot
        # envs whose seat 1 is played by a policy (bot envs have the bot inside the engine)
        game = trainer.game
        self.contested = (game.players[:, 1] >= 0 if isinstance(game, HasSides)
                          else np.ones(trainer.spec.num_envs, bool))  # [E]
        family = family_of(trainer.spec.name)
        # league.bots checked before the anchors are placed (games played for a run refused)
        setups = []
        for k, name in enumerate(config.bots):
            try:
                setup = family.match_setup(trainer.spec.name, name, 1, seed + 31 * k)
            except GameError as exc:
                raise ConfigError(f"league.bots: {exc}") from exc
            if setup.scripted is None:
                raise ConfigError(f"league.bots: {name} plays inside the {trainer.spec.name} "
                                  "engine, not in a seat; give engine bots their own envs "
                                  "(game.options.bots), drawn by PFSP with "
                                  "league.bot_env_pfsp=true")
            setups.append((name, setup.scripted, setup.opponent_name))
        self.anchors = register_anchors(self.db, trainer.spec, config, trainer.config.seed,
                                        trainer.config.game.options)
        # scripted training opponents: player id -> (owner slot, policy); each has its own
        # slot after the snapshots' (a bot needs no network, so it never takes theirs)
        self.bots: dict[int, tuple[int, ScriptedPolicy]] = {}
        unplayed = ("a main_exploiter plays only the main agent's snapshots"
                    if config.role == "main_exploiter" else "league.bot_share is 0"
                    if config.role == "main" and config.bot_share == 0 else "")
        if config.bots and unplayed and ranks.is_main:
            print(f"warning: league.bots ({', '.join(config.bots)}) are not played: {unplayed}",
                  file=sys.stderr)
        for k, (name, scripted, opponent_name) in enumerate(setups):
            bot_name = opponent_name or name
            pid = self.db.add_player(bot_name, "bot", frozen=config.freeze_anchors
                                     and bot_name in self.anchors)
            slot = config.max_active_opponents + 1 + k
            self.bots[pid] = (slot, scripted)
            trainer.seats.set_policy(slot, scripted)
            self.matchmaker.add_bot(pid)
        if ranks.is_main:
            ranks.barrier()
        # bot envs (league.bot_env_pfsp): engine bots drawn per game, outside the pool (they
        # play in envs of their own)
        self.bot_envs = np.flatnonzero(~self.contested)  # [B]
        self.bot_draws = (BotEnvDraws(trainer.game, self.bot_envs, self.matchmaker, seed)
                          if config.bot_env_pfsp else None)
        restored = trainer.restored_extra.get("league")
        mine = None  # this rank's draws in the checkpoint (None: draw afresh)
        if restored is not None:  # a resumed checkpoint: the league continues exactly
            mine = self._load_state(restored)
        problem = ""
        if ranks.is_main:
            # a restored pool already holds the checkpoint's snapshots; snapshots registered
            # since (by runs sharing the database) join at the next update, as they did the
            # first time
            follow_moved_run(self.db, self.db.players(), self.run_name, self.snapshot_dir)
            players = self.db.players() if restored is not None else self.sync_pool()
            if config.role == "main_exploiter" and not self.targets:
                whose = f" of run {config.target!r}" if config.target else ""
                runs = sorted({snapshot_run(p.name) for p in players if p.kind == "snapshot"
                               and p.metadata.get("role", "main") == "main"})
                problem = (f"league.role=main_exploiter: {db_path} holds no snapshot of a "
                           f"main agent{whose} (runs with main snapshots: "
                           f"{', '.join(runs) or 'none'}); point league.db at the main "
                           "run's league database, or fix league.target")
            problem = problem or own_snapshots_problem(
                players, db_path, self.run_name, self.snapshot_dir, trainer.config,
                new_run=restored is None)
            if restored is None:
                own = self._own_snapshots(players)
                self.latest = own[-1].id if own else None  # newest at the checkpoint
        problem = self._share_pool(problem)
        if problem:
            self.db.close()
            raise ConfigError(problem)
        if self.bot_draws is not None:
            self.bot_draws.start(None if mine is None else mine.get("bot_envs"))
        if mine is None:  # a new run (or another number of ranks): draw opponents afresh
            trainer.seats.assign(np.arange(trainer.spec.num_envs), 1, 0)
            self.assign(np.flatnonzero(self.contested))
        else:
            self._reload_slots(mine["slots"])
            draining = mine.get("draining")  # absent from checkpoints of before
            if draining is not None and int(draining) in self.slots:
                self.draining = int(draining)
        # a run started from another network (init_from): that network is the run's first
        # snapshot (update 0), rated before training moves it
        first = None
        if restored is None and trainer.update == 0 and trainer.config.init_from is not None:
            first = self.latest = self.snapshot(trainer) if ranks.is_main else None
            self._share_pool()
        logged = logged_ratings(RunDir(run_path).metrics_file, trainer.learned_step)
        self.ratings = (SnapshotRatings(self.db, trainer, config, self.anchors, self.fit,
                                        logged) if ranks.is_main else None)
        if self.ratings is not None and self.ratings.rater is not None:
            # the first snapshot's tournament among them
            self.ratings.resubmit_unfinished(self._own_snapshots(self.db.players()))
        elif self.ratings is not None and first is not None:
            self.ratings.rate(first)  # logged once a sink is attached (log_ratings_to)
        # the opponent each game was played against, read as it ended (an async rollout's
        # games reach on_episodes after the rollout: the env has been given its next one)
        trainer.add_episode_listener(StepListener(lambda stats: self.opponent[stats.env].copy(),
                                                  self.on_episodes))
        trainer.add_update_hook(self.after_update)
        trainer.add_state("league", self.state_dict)

    # ----------------------------------------------------------------- checkpoints

    def state_dict(self) -> dict[str, Any]:
        """What a checkpoint holds to continue exactly: the pool (:meth:`pool_state`), and each
        rank's draws: the sampling RNG, each env's opponent and the loaded opponent slots;
        with ``league.bot_env_pfsp`` the bot envs' draws (:meth:`BotEnvDraws.state_dict`).
        Rank 0's draws are at the top level, the other ranks' under ``ranks``, their number
        under ``world`` (every rank calls this; rank 0's result is the one saved)."""
        draws = {"rng": self.rng.bit_generator.state,
                 "opponent": self.opponent.copy(),
                 "slots": [[pid, slot] for pid, slot in self.slots.items()],
                 "draining": self.draining,
                 "redraws": self.redraws,
                 "bot_rngs": {pid: policy.rng.bit_generator.state
                              for pid, (_, policy) in self.bots.items()},
                 **({"bot_envs": self.bot_draws.state_dict()}
                    if self.bot_draws is not None else {})}
        every = self.ranks.gather(draws) or [draws]
        return {**self.pool_state(), **every[0],
                **({"world": self.ranks.world, "ranks": every[1:]} if self.ranks.world > 1
                   else {})}

    def pool_state(self) -> dict[str, Any]:
        """The league every rank shares: the matchmaker (pool and payoff table), the snapshots
        pooled and targeted, and this run's newest snapshot."""
        return {"matchmaker": self.matchmaker.state_dict(), "pooled": sorted(self.pooled),
                "targets": list(self.targets), "latest": self.latest}

    def _load_pool(self, state: Mapping[str, Any]) -> None:
        self.matchmaker.load_state_dict(state["matchmaker"])
        self.pooled = {int(pid) for pid in state["pooled"]}
        self.targets = [int(pid) for pid in state["targets"]]
        self.latest = None if state["latest"] is None else int(state["latest"])

    def _load_state(self, state: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """Restore a checkpoint's pool and this rank's draws; returns those draws, or None
        when the checkpoint was saved by another number of ranks (then they start afresh)."""
        self._load_pool(state)
        if int(state.get("world", 1)) != self.ranks.world:
            return None
        rank = self.ranks.rank
        mine = state if rank == 0 else state["ranks"][rank - 1]
        self.rng.bit_generator.state = mine["rng"]
        self.opponent[:] = mine["opponent"]
        self.redraws = int(mine.get("redraws", 0))
        for pid, rng_state in mine.get("bot_rngs", {}).items():
            if int(pid) in self.bots:
                self.bots[int(pid)][1].rng.bit_generator.state = rng_state
        return mine

    def _share_pool(self, problem: str = "") -> str:
        """With several ranks: rank 0's pool (:meth:`pool_state`) and ``problem`` (a reason
        to stop, or empty) on every rank; returns the problem."""
        if self.ranks.world == 1:
            return problem
        shared = self.ranks.broadcast({"pool": self.pool_state(), "problem": problem}
                                      if self.ranks.is_main else None)
        if not self.ranks.is_main:
            self._load_pool(shared["pool"])
        return str(shared["problem"])

    def _merge_games(self) -> None:
        """With several ranks: the other ranks' games of this update go to rank 0's payoff
        table, in rank order (rank 0's own are in it already)."""
        journal = self.matchmaker.journal
        assert journal is not None
        self.matchmaker.journal = None
        for games in self.ranks.gather(journal)[1:]:
            for a, b, outcome in games:
                self.matchmaker.record(a, b, outcome)
        self.matchmaker.journal = []

    def _reload_slots(self, slots: list[list[int]]) -> None:
        """Load the opponents the checkpointed run had loaded, in the same LRU order. One whose
        snapshot is now missing or corrupt is dropped; its envs play self-play until their
        episodes end."""
        trainer = self.trainer
        for pid, slot in slots:
            pid, slot = int(pid), int(slot)
            if not self._load_into(pid, slot):
                lost = np.flatnonzero(trainer.seats.of_seat(1) == slot)
                trainer.seats.assign(lost, 1, 0)
                self.opponent[lost] = LEARNER

    def _after_checkpoint(self, player: Player) -> bool:
        """Whether ``player`` is one of this run's snapshots taken after the checkpoint it
        resumed from (by a process that crashed later): it rejoins the pool when the replayed
        update re-registers it, as it first did."""
        return (self._own(player)
                and int(player.metadata.get("update", 0)) > self.trainer.update)

    # ----------------------------------------------------------------- the pool

    def _own(self, player: Player) -> bool:
        return snapshot_run(player.name) == self.run_name

    def _own_snapshots(self, players: list[Player]) -> list[Player]:
        """This run's readable snapshots up to the checkpoint it resumed from, oldest first."""
        return [p for p in players if p.kind == "snapshot" and self._own(p)
                and p.broken is None and not self._after_checkpoint(p)]

    def _is_target(self, player: Player) -> bool:
        """Whether ``player`` is a snapshot of the main agent a main exploiter plays."""
        target = self.config.target
        return (player.metadata.get("role", "main") == "main"
                and (target is None or snapshot_run(player.name) == target))

    def sync_pool(self) -> list[Player]:
        """Add the database's snapshots not yet in the pool (runs sharing the file add
        theirs while this one trains); returns every player."""
        players = self.db.players()
        for player in players:
            if player.id in self.dropped:
                self._retry_dropped(player)
                continue
            if (player.kind != "snapshot" or player.broken is not None
                    or player.id in self.pooled or player.id in self.fit.incompatible
                    or self._after_checkpoint(player)):
                continue
            self.pooled.add(player.id)
            self._add_to_pool(player)
        return players

    def _add_to_pool(self, player: Player) -> None:
        if self._own(player):
            self.matchmaker.add_snapshot(player.id, LEARNER)
        elif self.role == "main_exploiter" and self._is_target(player):
            self.matchmaker.add_snapshot(player.id, MAIN)
            self.targets.append(player.id)
        else:
            self.matchmaker.add_snapshot(player.id, None)

    def _retry_dropped(self, player: Player) -> None:
        """Bring back a snapshot dropped for an unreadable file, once the file has changed (or
        another process has read it and cleared its flag) and it loads again."""
        if player.broken is not None and _mtime(player.path) == self.dropped[player.id]:
            return
        if load_player_snapshot(self.db, player.id) is None:  # still unreadable: flagged
            self.dropped[player.id] = _mtime(player.path)
            return
        del self.dropped[player.id]
        self._add_to_pool(player)

    # ----------------------------------------------------------------- opponents

    def sample(self, n: int) -> np.ndarray:
        """Matchmaker picks ``int64 [n]``: LEARNER (self-play), MAIN, a snapshot's or a
        scripted bot's id."""
        return self.matchmaker.sample_opponents(n, self.rng, learner=LEARNER)

    def player_of(self, pick: int) -> int | None:
        """The database player who plays ``pick`` (None: the learner itself)."""
        if pick == MAIN:
            return self.targets[-1] if self.targets else None
        return None if pick == LEARNER else pick

    def _slot_for(self, pid: int) -> int:
        """The owner slot playing ``pid``, loading it (evicting an idle one) if needed; 0 if
        no slot can be had (every slot busy, or its snapshot unreadable).

        While every slot plays unfinished games, the least recently drawn snapshot is
        *drained*: it starts no new game, so its slot frees as its games end and the next
        snapshot drawn gets it. Without this the envs, which end their games at different
        times, kept every slot busy for ever, and the run played its first
        ``max_active_opponents`` snapshots only (redrawing every other draw among them)."""
        trainer = self.trainer
        if pid in self.bots:
            return self.bots[pid][0]
        if pid in self.slots and pid != self.draining:
            self.slots.move_to_end(pid)
            return self.slots[pid]
        if pid in self.slots:
            return 0  # draining: its games end, then another snapshot takes its slot
        in_use = trainer.seats.in_use()
        if len(self.slots) >= self.config.max_active_opponents:
            idle = [p for p, slot in self.slots.items() if slot not in in_use]
            if not idle:
                if self.draining is None and len(self.slots) > 1:
                    self.draining = next(iter(self.slots))  # the least recently drawn
                return 0
            evicted = self.draining if self.draining in idle else idle[0]
            if evicted == self.draining:
                self.draining = None
            slot = self.slots.pop(evicted)
        else:
            slot = next(s for s in range(1, self.config.max_active_opponents + 1)
                        if s not in self.slots.values())
        return slot if self._load_into(pid, slot) else 0

    def _load_into(self, pid: int, slot: int) -> bool:
        """Load snapshot ``pid`` as the policy of owner ``slot``; False (and ``pid`` dropped
        from the pool) if its file is missing or corrupt, which the store reports."""
        trainer = self.trainer
        snapshot = load_player_snapshot(self.db, pid)
        if snapshot is None:
            self.dropped[pid] = _mtime(self.db.player(pid).path)
        try:
            agent = None if snapshot is None else self.fit.agent_of(pid, snapshot)
        except IncompatiblePlayer:
            agent = None
        if agent is None:
            self.matchmaker.remove(pid)
            if pid in self.targets:
                self.targets.remove(pid)
            return False
        trainer.seats.set_policy(slot, FrozenPolicy(agent.to(trainer.device),
                                                    generator=trainer.act_gen))
        self.slots[pid] = slot
        return True

    # ----------------------------------------------------------------- training games

    def on_episodes(self, stats: EpisodeStats, played: np.ndarray | None = None) -> None:
        """Record the learner's finished games (``played``: each one's opponent, ``[K]``;
        default: the envs' current ones) and pick the next opponent of those envs."""
        if self.bot_draws is not None:
            self.bot_draws.games_ended(stats, self.contested)
        if played is None:
            played = self.opponent[stats.env]
        seat0 = (stats.seat == 0) & self.contested[stats.env]
        envs = stats.env[seat0]
        if len(envs) == 0:
            return
        # a main exploiter's game against the main agent's newest snapshot, drawn among its
        # snapshots, is also a game against the main agent: below exploiter_threshold it
        # plays only snapshots, and its win rate against the main agent must move on
        newest_main = (self.targets[-1] if self.role == "main_exploiter" and self.targets
                       else None)
        for pick, outcome in zip(played[seat0].tolist(), stats.outcome[seat0].tolist(),
                                 strict=True):
            pick = int(pick)
            if pick != LEARNER and outcome != Outcome.NONE:
                self.matchmaker.record(LEARNER, pick, int(outcome))
                if pick == newest_main:
                    self.matchmaker.record(LEARNER, MAIN, int(outcome))
        self.assign(envs)

    def assign(self, envs: np.ndarray) -> None:
        """Draw the next opponent of ``envs`` ``[K]`` and give it their seat 1.

        A drawn snapshot that cannot be loaded (every one of the ``max_active_opponents``
        slots is playing unfinished games, or its file is unreadable) is replaced by a PFSP
        draw among the snapshots loaded (the role's weighting), so the share of self-play
        stays the one configured (none for exploiters); counted in
        ``league/opponent_redraws``."""
        picks = self.sample(len(envs))  # [K]
        seats = self.trainer.seats
        seats.assign(envs, 1, 0)  # their previous opponents' slots may be reused
        self.opponent[envs] = LEARNER
        unplaced = []
        # one slot lookup per distinct opponent, in the order drawn: a slot that frees goes to
        # the first snapshot drawn, not to the lowest id (the oldest snapshots)
        _, first = np.unique(picks, return_index=True)
        for pick in picks[np.sort(first)].tolist():
            pid = self.player_of(pick)
            if pid is None:  # self-play
                continue
            slot = self._slot_for(pid)
            group = envs[picks == pick]
            if slot:
                seats.assign(group, 1, slot)
                self.opponent[group] = pick
            else:
                unplaced.append(group)
        if unplaced:
            self._redraw_among_loaded(np.concatenate(unplaced))

    def _redraw_among_loaded(self, envs: np.ndarray) -> None:
        """Give ``envs`` ``[K]``, whose drawn snapshot got no slot, a loaded snapshot by PFSP
        (self-play only when none is loaded)."""
        self.redraws += len(envs)
        loaded = np.fromiter((p for p in self.slots if p != self.draining), np.int64)  # [S]
        if len(loaded) == 0:
            return
        matchmaker = self.matchmaker
        picks = matchmaker.sample_among(loaded, len(envs), self.rng, learner=LEARNER,
                                        weighting=matchmaker.weighting_of(LEARNER))  # [K]
        for pid in np.unique(picks).tolist():
            group = envs[picks == pid]
            self.slots.move_to_end(pid)
            self.trainer.seats.assign(group, 1, self.slots[pid])
            self.opponent[group] = pid

    # ----------------------------------------------------------------- snapshots and ratings

    def after_update(self) -> dict[str, float]:
        trainer = self.trainer
        metrics: dict[str, float] = {}
        if self.ranks.world > 1:
            self._merge_games()
        if self.ratings is not None:  # rank 0: the pool, snapshots and ratings
            self.sync_pool()
            if trainer.update % self.config.snapshot_every == 0:
                self.latest = self.snapshot(trainer)
            if self.latest is not None and trainer.update % self.config.eval_every == 0:
                self.ratings.rate(self.latest)
            self.ratings.collect()  # logged at the snapshots' steps (log_ratings_to)
        self._share_pool()
        # of the envs whose seat 1 a policy plays (a bot env's is the engine's, owner 0 too)
        contested = trainer.seats.of_seat(1)[self.contested]
        if len(contested):  # bot envs only: no share to tell
            metrics["league/opponent_share_selfplay"] = float((contested == 0).mean())
        metrics["league/opponent_redraws"] = float(self.redraws)
        self.redraws = 0
        if self.bot_draws is not None:  # which bots the bot envs play now
            metrics.update(self.bot_draws.metrics())
        if self.role == "main_exploiter":
            metrics["league/win_rate_vs_main"] = float(
                self.matchmaker.payoff.win_rates(LEARNER, np.array([MAIN]))[0])
        return metrics

    def snapshot(self, trainer: TrainingContext) -> int:
        """Freeze the learner as ``<run>@<update>`` (:func:`register_snapshot`: one left by
        a crashed process is kept); returns its player id."""
        parent = (self.db.player(self.latest).name if self.latest is not None
                  else trainer.config.init_from)  # the first: what the run started from
        pid = register_snapshot(self.db, self.snapshot_dir, self.run_name, trainer,
                                trainer.learner_weights(), trainer.learned_step, parent,
                                self.role)
        if pid not in self.pooled:
            self.pooled.add(pid)
            self.matchmaker.add_snapshot(pid, LEARNER)
        return pid

    def log_ratings_to(self, sink: MetricSink) -> None:
        """Log each snapshot's rating, once its tournament is finished, to ``sink`` at the
        snapshot's step (rank 0; the other ranks rate nothing)."""
        if self.ratings is not None:
            self.ratings.log_to(sink)

    def finish(self) -> dict[str, float]:
        """At the end of training: wait for the rater's tournaments (each logged); the newest
        rating finished in this process (rank 0; the other ranks have none)."""
        if self.ratings is None:
            return {}
        self.ratings.finish()
        if self.latest is None:  # a short run: say why the league does not rate it
            print(f"league: this run has no snapshot yet (one every league.snapshot_every="
                  f"{self.config.snapshot_every} updates; it has done {self.trainer.update}): "
                  "it is not rated in the league", file=sys.stderr)
        newest = self.ratings.newest
        return newest.metrics if newest is not None else {}

    def close(self) -> None:
        if self.ratings is not None:
            self.ratings.close()
        self.db.close()


def _mtime(path: str | None) -> float | None:
    """A file's modification time, None if it is missing."""
    try:
        return os.stat(path).st_mtime if path else None
    except OSError:
        return None


def attach(trainer: TrainingContext, run_path: Path) -> LeagueHook | None:
    """A :class:`LeagueHook` when the config enables the league, else ``None``."""
    config = trainer.config.league
    if not config.enabled:
        return None
    return LeagueHook(trainer, run_path, config)


def describe(hook: LeagueHook | None) -> dict[str, Any]:
    if hook is None:
        return {}
    return {"league_db": str(hook.db.path), "league_role": hook.role, "snapshots": sum(
        p.kind == "snapshot" for p in hook.db.players())}
