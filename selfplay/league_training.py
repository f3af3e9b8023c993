"""Self-play training inside a league: snapshots, PFSP opponents, ratings beside training.

:class:`LeagueHook` attaches to a :class:`~selfplay.ppo.Trainer` whose game has two seats.
Seat 0 of every two-seat env is the learner; seat 1 is re-assigned at each episode end by the
matchmaker: the learner itself (latest-vs-latest), or a past snapshot chosen by prioritized
fictitious self-play from the decayed payoff table. At most ``max_active_opponents`` snapshot
policies are loaded at a time (one forward pass each per step). Every ``snapshot_every``
updates the learner's weights are frozen as a snapshot in the league database; every
``eval_every`` updates the newest snapshot plays rating matches against the reference pool
(earlier snapshots and scripted anchors), and its TrueSkill rating is logged.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

from games.core import EpisodeStats, Outcome, VecGame
from games.matchups import match_setup
from games.options import to_mapping
from games.registry import make_game
from league.db import LeagueDB
from league.matchmaking import Matchmaker, MatchmakingConfig
from league.snapshots import load_player_snapshot, save_snapshot, snapshot_name
from league.tournament import Policy as LeaguePolicy
from league.tournament import TournamentConfig, run_tournament
from selfplay.config import ConfigError, LeagueConfig
from selfplay.networks import ActorCritic
from selfplay.ppo import FrozenPolicy, Trainer

LEARNER = -1  # the learner's id in the matchmaker (not a database player)


class LeagueHook:
    """Opponent assignment, snapshots and ratings for one training run."""

    def __init__(self, trainer: Trainer, run_path: Path, config: LeagueConfig) -> None:
        if trainer.spec.num_seats != 2:
            raise ConfigError(f"league.enabled needs a two-seat game; {trainer.spec.name} has "
                              f"{trainer.spec.num_seats} seat(s)")
        self.trainer = trainer
        self.config = config
        self.run_name = run_path.name
        self.snapshot_dir = run_path / "snapshots"
        db_path = Path(config.db) if config.db else run_path / "league.db"
        self.db = LeagueDB(db_path, game=trainer.spec.name)
        self.matchmaker = Matchmaker(MatchmakingConfig(
            self_play=config.self_play, pfsp=1.0 - config.self_play, bots=0.0,
            weighting=config.weighting))
        self.matchmaker.add_learner(LEARNER)
        self.rng = np.random.default_rng(trainer.config.seed + 17)
        self.slots: OrderedDict[int, int] = OrderedDict()  # player id -> owner slot (LRU)
        self.latest: int | None = None
        # envs whose seat 1 is played by a policy (microRTS bot envs have the bot in the engine)
        players = getattr(trainer.game, "players", None)
        self.contested = (np.asarray(players)[:, 1] >= 0 if players is not None
                          else np.ones(trainer.spec.num_envs, bool))  # [E]
        self.anchors: list[str] = []
        for name in config.anchors:
            setup = match_setup(trainer.spec.name, name, 1, trainer.config.seed)
            if setup.scripted is None:
                raise ConfigError(f"league.anchors: {name} plays inside the {trainer.spec.name} "
                                  "engine; rating games against engine bots are not supported "
                                  "yet")
            self.db.add_player(setup.opponent_name or name, "bot")
            self.anchors.append(setup.opponent_name or name)
        for player in self.db.players():  # resume: earlier snapshots of this league
            if player.kind == "snapshot" and player.broken is None:
                self.matchmaker.add_snapshot(player.id, LEARNER)
                self.latest = player.id
        # the learner's payoff row is rebuilt from play: after a resume PFSP starts at p = 1/2
        trainer.owner[:, 1] = 0  # opponents are not in the checkpoint: restart with self-play
        trainer.on_episodes.append(self.on_episodes)
        trainer.after_update.append(self.after_update)

    # ----------------------------------------------------------------- opponents

    def _slot_for(self, pid: int) -> int:
        """The owner slot playing ``pid``, loading it (evicting an idle one) if needed; 0 if
        no slot can be had (the env then plays self-play)."""
        trainer = self.trainer
        if pid in self.slots:
            self.slots.move_to_end(pid)
            return self.slots[pid]
        in_use = set(np.unique(trainer.owner).tolist())
        if len(self.slots) >= self.config.max_active_opponents:
            idle = [p for p, slot in self.slots.items() if slot not in in_use]
            if not idle:
                return 0
            slot = self.slots.pop(idle[0])
        else:
            slot = next(s for s in range(1, self.config.max_active_opponents + 1)
                        if s not in self.slots.values())
        snapshot = load_player_snapshot(self.db, pid)
        if snapshot is None:  # missing or corrupt: reported by the store, dropped here
            self.matchmaker.remove(pid)
            return 0
        agent = ActorCritic(trainer.spec, trainer.config.network, trainer.config.normalize)
        agent.load_state_dict(snapshot.weights)
        trainer.opponents[slot] = FrozenPolicy(agent, generator=trainer.sample_gen)
        self.slots[pid] = slot
        return slot

    def on_episodes(self, trainer: Trainer, stats: EpisodeStats) -> None:
        """Record the learner's finished games and pick the next opponent of those envs."""
        seat0 = (stats.seat == 0) & self.contested[stats.env]
        envs = stats.env[seat0]
        if len(envs) == 0:
            return
        slot_to_pid = {slot: pid for pid, slot in self.slots.items()}
        for env, outcome in zip(envs.tolist(), stats.outcome[seat0].tolist(), strict=True):
            owner = int(trainer.owner[env, 1])
            if owner != 0 and outcome != Outcome.NONE and owner in slot_to_pid:
                self.matchmaker.record(LEARNER, slot_to_pid[owner], int(outcome))
        picks = self.matchmaker.sample_opponents(len(envs), self.rng)
        for env, pid in zip(envs.tolist(), picks.tolist(), strict=True):
            trainer.owner[env, 1] = 0 if pid == LEARNER else self._slot_for(int(pid))

    # ----------------------------------------------------------------- snapshots and ratings

    def after_update(self, trainer: Trainer) -> dict[str, float]:
        metrics: dict[str, float] = {}
        if trainer.update % self.config.snapshot_every == 0:
            parent = self.db.player(self.latest).name if self.latest is not None else None
            pid = save_snapshot(self.db, self.snapshot_dir,
                                snapshot_name(self.run_name, trainer.update),
                                trainer.agent.state_dict(), to_mapping(trainer.config),
                                trainer.global_step, parent=parent, update=trainer.update)
            self.matchmaker.add_snapshot(pid, LEARNER)
            self.latest = pid
        if self.latest is not None and trainer.update % self.config.eval_every == 0:
            metrics.update(self.rate_latest())
        metrics["league/opponent_share_selfplay"] = float((trainer.owner[:, 1] == 0).mean())
        return metrics

    def rate_latest(self) -> dict[str, float]:
        """Rating matches of the newest snapshot against earlier ones and the anchors."""
        assert self.latest is not None
        latest = self.db.player(self.latest).name
        snapshots = [p.name for p in self.db.players()
                     if p.kind == "snapshot" and p.broken is None and p.name != latest]
        pool = snapshots[-self.config.eval_pool:] + self.anchors
        if not pool:
            return {}
        trainer = self.trainer
        game_name = trainer.spec.name
        options = dict(trainer.config.game.options)

        def game_factory(envs: int, seed: int) -> VecGame:
            setup = match_setup(game_name, None, envs, seed)
            return make_game(game_name, num_envs=envs, seed=seed,
                             options={**options, **setup.options})

        def policy_factory(name: str) -> LeaguePolicy:
            player = self.db.player(name)
            if player.kind == "bot":
                scripted = match_setup(game_name, name, 1, trainer.config.seed).scripted
                if scripted is None:
                    raise ValueError(f"bot {name} plays inside the engine")
                return scripted
            snapshot = load_player_snapshot(self.db, player.id)
            if snapshot is None:
                raise ValueError(f"snapshot {name} is missing or corrupt")
            agent = ActorCritic(trainer.spec, trainer.config.network, trainer.config.normalize)
            agent.load_state_dict(snapshot.weights)
            return FrozenPolicy(agent)

        config = TournamentConfig(games_per_pair=self.config.eval_games,
                                  num_envs=self.config.eval_envs, seed=trainer.update,
                                  name=f"eval@{latest}")
        try:
            run_tournament(self.db, [latest, *pool], policy_factory, game_factory, config,
                           focus=[latest])
        except Exception as exc:  # noqa: BLE001 - rating must never stop training
            print(f"warning: rating {latest} failed: {exc}", file=sys.stderr)
            return {}
        rating = self.db.rating(latest)
        return {"league/mu": rating.mu, "league/sigma": rating.sigma,
                "league/conservative": rating.mu - 3 * rating.sigma, "league/elo": rating.elo,
                "league/snapshots": float(len(snapshots) + 1)}

    def close(self) -> None:
        self.db.close()


def attach(trainer: Trainer, run_path: Path) -> LeagueHook | None:
    """A :class:`LeagueHook` when the config enables the league, else ``None``."""
    config = trainer.config.league
    if not config.enabled:
        return None
    return LeagueHook(trainer, run_path, config)


def describe(hook: LeagueHook | None) -> dict[str, Any]:
    if hook is None:
        return {}
    return {"league_db": str(hook.db.path), "snapshots": sum(
        p.kind == "snapshot" for p in hook.db.players())}
