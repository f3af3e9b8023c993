"""Rating bookkeeping of a league run (:class:`~selfplay.league_training.LeagueHook`).

:class:`SnapshotFit` knows which snapshots of the league database fit the run's network (runs of
other networks may share the database: their snapshots are loaded once to find out, a misfit
reported once and kept out). :class:`SnapshotRatings` decides which rating tournament a
snapshot plays (the last ``eval_pool`` snapshots registered before it, and the anchors), plays
it between updates or hands it to the rater (``league.eval_process``: a process of this
machine, :class:`~selfplay.league_rating.BackgroundRater`, or with ``distributed.backend: ray`` a
Ray actor, :class:`~selfplay.remote_rating.RayRater`), and after a resume hands the rater again
the tournaments the previous process did not finish.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch

from games.core import GameError, GameSpec
from games.files import CheckpointError
from games.options import to_mapping
from games.registry import family_of
from league.db import LeagueDB, LeagueError
from league.records import Player
from league.snapshots import (
    Snapshot,
    load_player_snapshot,
    load_snapshot,
    save_snapshot,
    snapshot_name,
    snapshot_run,
)
from league.tournament import IncompatiblePlayer
from selfplay.config import ConfigError, LeagueConfig, NetworkConfig, NormalizeConfig, TrainConfig
from selfplay.config_files import saved_config_from_mapping
from selfplay.distributed_config import DistributedConfig
from selfplay.league_rating import (
    BackgroundRater,
    Rated,
    Rater,
    RatingJob,
    calibrate_anchors,
    rate_snapshot,
    rated,
    snapshot_agent,
)
from selfplay.networks import ActorCritic
from selfplay.tracking import MetricSink


class RatedRun(Protocol):
    """What the rating bookkeeping reads of the run whose snapshots it rates (a training run,
    :class:`~selfplay.ppo.TrainingContext`, or a cloning run)."""

    config: TrainConfig
    spec: GameSpec
    device: torch.device
    update: int


def register_anchors(db: LeagueDB, spec: GameSpec, config: LeagueConfig, seed: int,
                     options: Mapping[str, Any]) -> list[str]:
    """Register ``league.anchors`` in ``db``; their names as the league calls them. Frozen
    (``league.freeze_anchors``) anchors new to the league start at ratings of their own,
    from ``league.anchor_calibration_games`` games between the anchors in the training
    game's ``options``. A name the game does not know, or an engine bot where the family
    cannot rate against one, is a :class:`ConfigError`."""
    family = family_of(spec.name)
    anchors: list[str] = []
    for name in config.anchors:
        try:
            setup = family.match_setup(spec.name, name, 1, seed)
        except GameError as exc:
            raise ConfigError(f"league.anchors: {exc}") from exc
        if setup.scripted is None and not family.plays_engine_bots():
            raise ConfigError(f"league.anchors: {name} plays inside the {spec.name} engine; "
                              "rating games against it are not supported")
        anchors.append(setup.opponent_name or name)
    calibrated = (calibrate_anchors(db, spec.name, options, anchors,
                                    config.anchor_calibration_games, config.eval_envs, seed)
                  if config.freeze_anchors else {})
    for name in anchors:
        try:
            there: Player | None = db.player(name)
        except LeagueError:
            there = None
        if there is not None and there.kind == "bot" and there.frozen != config.freeze_anchors:
            # a bot a tournament rated (moving), or a frozen anchor of another run's settings
            print(f"warning: league.anchors: {name} is already in {db.path} with a rating "
                  f"that is {'frozen' if there.frozen else 'not frozen (a tournament player)'}"
                  "; this run rates against it as it is", file=sys.stderr)
            continue
        db.add_player(name, "bot", frozen=config.freeze_anchors, rating=calibrated.get(name))
    return anchors


def register_snapshot(db: LeagueDB, directory: Path, run_name: str, run: RatedRun,
                      weights: Mapping[str, Any], global_step: int, parent: str | None,
                      role: str) -> int:
    """Freeze ``weights`` as snapshot ``<run_name>@<run.update>`` in ``directory`` and
    register it; returns its player id.

    A snapshot already registered under that name (by a process killed after it, before
    the checkpoint this run resumed from) is kept as it is: its stored rating matches were
    played by its weights."""
    name = snapshot_name(run_name, run.update)
    try:
        existing: Player | None = db.player(name)
    except LeagueError:
        existing = None
    other = None if existing is None else other_runs_folder(existing, directory)
    if other is not None:
        raise LeagueError(
            f"snapshot {name} in {db.path} belongs to another run ({other}): runs sharing a "
            f"league database need different run folder names (this one: {run_name}); pick "
            "another --run-dir or league.db")
    if (existing is not None and existing.broken is None and existing.path is not None
            and readable_snapshot(Path(existing.path))):
        return existing.id
    pid = save_snapshot(db, directory, name, weights, to_mapping(run.config), global_step,
                        parent=parent, update=run.update, role=role)
    if existing is not None and existing.broken is not None:
        db.mark_broken(pid, None)  # its file is written again
    return pid


def other_runs_folder(player: Player, directory: Path) -> Path | None:
    """The folder of another run that holds snapshot ``player`` (named like this run's,
    whose snapshots go to ``directory``), None if it is this run's: kept in ``directory``,
    or its file gone (this run's folder moved since it was registered)."""
    if player.path is None:
        return None
    path = Path(player.path)
    if not path.is_absolute() or path.parent == directory.resolve() or not path.is_file():
        return None
    return path.parent


def follow_moved_run(db: LeagueDB, players: Sequence[Player], run_name: str,
                     directory: Path) -> None:
    """Point this run's snapshots whose files are gone from where they were registered, and
    are in ``directory`` (its folder was moved, or mounted elsewhere), at their files there."""
    for player in players:
        if (player.kind != "snapshot" or snapshot_run(player.name) != run_name
                or player.path is None):
            continue
        old = Path(player.path)
        here = directory.resolve() / old.name
        if old.parent != directory.resolve() and not old.is_file() and here.is_file():
            db.move_file(player.id, here)


def own_snapshots_problem(players: Sequence[Player], db_path: Path, run_name: str,
                          directory: Path, config: TrainConfig, new_run: bool) -> str:
    """Why this run cannot take the snapshots named after it in the database (empty when it
    can): snapshots ``<run_name>@…`` kept in another folder belong to another run of the same
    folder name (it would play them as its own); those of an earlier start of a new run
    (stopped before its first checkpoint) are its own only if that start had its settings."""
    from selfplay.run_dirs import RESUMABLE_CHANGES, config_differences

    own = [p for p in players if p.kind == "snapshot" and snapshot_run(p.name) == run_name
           and p.path is not None]
    foreign = sorted({str(folder) for p in own
                      if (folder := other_runs_folder(p, directory)) is not None})
    if foreign:
        return (f"{db_path} holds snapshots {run_name}@… of another run ({foreign[0]}): runs "
                f"sharing a league database need different run folder names (this one: "
                f"{run_name}); pick another --run-dir or league.db")
    if not new_run:
        return ""
    for player in own:
        try:
            earlier = saved_config_from_mapping(load_snapshot(str(player.path)).config)
        except (CheckpointError, ConfigError):
            continue  # unreadable: written again when this run reaches its update
        differ = [key for key in config_differences(earlier, config)
                  if key not in RESUMABLE_CHANGES]  # a longer run, say: the same course
        if differ:
            return (f"{db_path} holds snapshots of an earlier start of this run ({player.name}, "
                    f"...) with other settings ({', '.join(differ[:6])}); a run that stopped "
                    "before its first checkpoint starts again only with its own settings: "
                    "give them, or pick another --run-dir or league.db")
        break  # one snapshot tells the settings of that start
    return ""


def readable_snapshot(path: Path) -> bool:
    """Whether the snapshot file at ``path`` loads (a resumed run writes one that does not,
    cut short by a kill or a full disk, again from the same update's weights)."""
    try:
        load_snapshot(path)
    except CheckpointError:
        return False
    return True


class SnapshotFit:
    """Which snapshots of ``db`` fit the network of run ``run_name`` (its own always do)."""

    def __init__(self, db: LeagueDB, run_name: str, spec: GameSpec, network: NetworkConfig,
                 normalize: NormalizeConfig) -> None:
        self.db = db
        self.run_name = run_name
        self.spec = spec
        self.network = network
        self.normalize = normalize
        self.incompatible: set[int] = set()  # snapshots of other networks (shared databases)
        self.compatible: set[int] = set()  # other runs' snapshots known to fit this network

    def agent_of(self, pid: int, snapshot: Snapshot) -> ActorCritic:
        """This run's network with ``snapshot``'s weights; :class:`IncompatiblePlayer` (and the
        snapshot kept out of this run's pool, once reported) if they do not fit it: a run
        sharing the database with another network."""
        try:
            return snapshot_agent(self.spec, self.network, self.normalize, snapshot)
        except IncompatiblePlayer as exc:
            if pid not in self.incompatible:
                self.incompatible.add(pid)
                name = self.db.player(pid).name
                print(f"warning: snapshot {name} {exc}; it stays out of this run's pool",
                      file=sys.stderr)
            raise

    def fits(self, player: Player) -> bool:
        """Whether ``player``'s snapshot fits this run's network. Another run's snapshot is
        loaded once to find out (reported once if it does not fit), here rather than in the
        rater process, which would leave it in every later pool; an unreadable file counts as
        fitting: the rating tournament reports and flags it."""
        if player.id in self.incompatible:
            return False
        if snapshot_run(player.name) == self.run_name or player.id in self.compatible:
            return True
        snapshot = load_player_snapshot(self.db, player.id)
        if snapshot is None:
            return True
        try:
            self.agent_of(player.id, snapshot)
        except IncompatiblePlayer:
            return False
        self.compatible.add(player.id)
        return True


def make_rater(distributed: DistributedConfig) -> Rater:
    """The rater where the run's workers are: a process of this machine, or a Ray actor on
    the run's Ray connection (the league database stays in this process)."""
    if distributed.backend != "ray":
        return BackgroundRater()
    from games.workers.ray_cluster import connect
    from selfplay.remote_rating import RayRater

    session = connect(distributed.address, distributed.num_cpus, distributed.object_store_mb,
                      distributed.connect_timeout_s)
    return RayRater(session, distributed.max_restarts)


class SnapshotRatings:
    """The rating tournaments of one run's snapshots, played here or in a rater process."""

    def __init__(self, db: LeagueDB, run: RatedRun, config: LeagueConfig,
                 anchors: list[str], fit: SnapshotFit, logged: set[str] | None = None
                 ) -> None:
        """``logged``: the snapshots whose rating the run's metrics already hold (a resumed
        run's, up to its checkpoint): each is logged once."""
        self.db = db
        self.run = run
        self.config = config
        self.anchors = anchors
        self.fit = fit
        self.rater = (make_rater(run.config.distributed) if config.eval_process
                      else None)
        self._sink: MetricSink | None = None
        self._unlogged: list[Rated] = []
        self.logged: set[str] = set(logged or ())
        self._rated: set[int] = set()  # snapshots rated (or handed to the rater) here
        self.newest: Rated | None = None
        """the rating finished last"""

    def log_to(self, sink: MetricSink) -> None:
        """Log every finished rating to ``sink`` at its snapshot's step (those finished
        before, such as an ``init_from`` snapshot's, first)."""
        self._sink = sink
        self._log([])

    def _log(self, finished: list[Rated]) -> list[Rated]:
        """Log ``finished`` (each snapshot once: a rating the metrics hold is not repeated);
        returns it."""
        self.newest = finished[-1] if finished else self.newest
        for rating in finished:
            if rating.snapshot not in self.logged:
                self.logged.add(rating.snapshot)
                self._unlogged.append(rating)
        if self._sink is not None:
            for rating in self._unlogged:
                self._sink.log_rating(rating.step, rating.snapshot, rating.metrics)
            self._unlogged = []
        return finished

    def job(self, pid: int) -> RatingJob | None:
        """The rating tournament of snapshot ``pid``: against the last ``eval_pool`` snapshots
        registered before it (a replay after a resume meets the pool the crashed run met) and
        the anchors; ``None`` if that pool is empty."""
        earlier = [p for p in self.db.players()
                   if p.kind == "snapshot" and p.broken is None and p.id < pid]
        snapshots = [p.name for p in earlier if self.fit.fits(p)]
        pool = snapshots[max(0, len(snapshots) - self.config.eval_pool):] + self.anchors
        if not pool:
            return None
        run = self.run
        player = self.db.player(pid)
        return RatingJob(db_path=str(self.db.path), spec=run.spec,
                         options=dict(run.config.game.options),
                         network=run.config.network, normalize=run.config.normalize,
                         latest=player.name, pool=tuple(pool),
                         games_per_pair=self.config.eval_games, num_envs=self.config.eval_envs,
                         seed=int(player.metadata.get("update", run.update)),
                         run_seed=run.config.seed, device=str(run.device),
                         snapshots=len(snapshots) + 1,
                         step=int(player.metadata.get("env_steps", 0)))

    def rate(self, pid: int) -> list[Rated]:
        """Rating matches of snapshot ``pid`` against earlier ones and the anchors: played
        now (its rating returned), or handed to the rater process (``league.eval_process``;
        :meth:`collect` returns it once finished)."""
        if pid in self._rated:  # still the newest at the next rating update
            return []
        job = self.job(pid)
        if job is None:
            return []
        self._rated.add(pid)
        if self.rater is not None:
            self.rater.submit(job)
            return []
        try:
            return self._log([rated(job, rate_snapshot(job, self.db, self.fit.agent_of))])
        except Exception as exc:  # noqa: BLE001 - rating must never stop training
            print(f"warning: rating {job.latest} failed: {exc}", file=sys.stderr)
            return []

    def resubmit_unfinished(self, own: list[Player], every: int | None = None) -> None:
        """Hand the rater the tournaments of this run's snapshots ``own`` (up to the
        checkpoint resumed from) that the previous process's rater did not finish, or
        finished without its rating reaching the run's metrics (:attr:`logged`; the trainer
        was killed first); each plays only its matches not yet stored."""
        assert self.rater is not None
        every = every or self.config.eval_every
        rated: set[int] = set()  # the snapshot that was the newest at each rating update
        for update in range(0, self.run.update + 1, every):  # 0: an init_from snapshot
            newest = [p.id for p in own if int(p.metadata.get("update", 0)) <= update]
            if newest:
                rated.add(max(newest))
        for player in own:
            if player.id not in rated:
                continue
            job = self.job(player.id)
            if job is None:
                continue
            stored = len(self.db.match_keys(f"eval@{player.name}/"))
            if stored < len(job.pool) * job.games_per_pair or player.name not in self.logged:
                self._rated.add(player.id)
                self.rater.submit(job)

    def collect(self) -> list[Rated]:
        """The rater's tournaments finished since the last call (none without a rater)."""
        return self._log(self.rater.collect()) if self.rater is not None else []

    def finish(self) -> list[Rated]:
        """At the end of training: wait for the rater's tournaments; those finished since the
        last :meth:`collect`."""
        if self.rater is None:
            return []
        if self.rater.pending:
            print(f"waiting for {self.rater.pending} snapshot rating tournament(s)",
                  file=sys.stderr, flush=True)
        return self._log(self.rater.collect(wait=True))

    def close(self) -> None:
        """Stop the rater process (its tournament in flight resumes with the run)."""
        if self.rater is not None:
            self.rater.close()
