"""A cloning run's snapshots in a league database, rated as a training run's are.

With ``bc.snapshot_every`` a cloning run (:class:`~selfplay.cloning.Cloner`) freezes its
network every that many updates as snapshot ``<run>@<update>`` of ``league.db`` (else
RUN_DIR/league.db) and rates it at once: rating matches against ``league.eval_pool`` earlier
snapshots and ``league.anchors``, played in a rater process with ``league.eval_process``
(:class:`~selfplay.snapshot_ratings.SnapshotRatings`). Nothing is matched against the
teachers' games: cloning has no opponents to draw. A training run started from the clone
(``selfplay train --init-from``) with the same ``league.db`` rates its own snapshots on the
same scale, so a run's rating can be followed from the first cloned snapshot to the last
trained one.

Resuming: the updates replayed from the last checkpoint reuse the snapshots the killed
process registered (:func:`~selfplay.snapshot_ratings.register_snapshot`), and the rater is
handed again the tournaments it did not finish, each playing only its matches not stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from torch import Tensor

from league.db import LeagueDB, database_file
from league.ratings import RatingConfig
from league.records import Player
from league.snapshots import snapshot_run
from selfplay.config import ConfigError, LeagueConfig
from selfplay.snapshot_ratings import (
    RatedRun,
    SnapshotFit,
    SnapshotRatings,
    register_anchors,
    register_snapshot,
)
from selfplay.tracking import MetricSink, RunDir, logged_ratings


class ClonedRun(RatedRun, Protocol):
    """What :class:`CloneLeague` reads of the cloning run."""

    global_step: int

    def learner_weights(self) -> dict[str, Tensor]: ...


class CloneLeague:
    """Snapshots of one cloning run every ``every`` updates, each rated when taken."""

    def __init__(self, run: ClonedRun, run_path: Path, config: LeagueConfig, every: int) -> None:
        if run.spec.num_seats != 2:
            raise ConfigError(f"bc.snapshot_every needs a two-seat game; {run.spec.name} has "
                              f"{run.spec.num_seats} seat(s)")
        self.run = run
        self.every = every
        self.run_name = run_path.name
        self.snapshot_dir = run_path / "snapshots"
        # league.elo_k: the K of a database made here (an existing one keeps its own)
        rating = None if config.elo_k is None else RatingConfig(elo_k=config.elo_k)
        self.db = LeagueDB(database_file(config.db) if config.db else run_path / "league.db",
                           game=run.spec.name, config=rating)
        try:
            anchors = register_anchors(self.db, run.spec, config, run.config.seed,
                                       run.config.game.options)
            fit = SnapshotFit(self.db, self.run_name, run.spec, run.config.network,
                              run.config.normalize)
            logged = logged_ratings(RunDir(run_path).metrics_file, run.global_step)
            self.ratings = SnapshotRatings(self.db, run, config, anchors, fit, logged)
            own = self._own_snapshots()
            self.latest: int | None = own[-1].id if own else None
            if self.ratings.rater is not None:  # a resumed run: what the last one left
                self.ratings.resubmit_unfinished(own, every)
        except BaseException:
            self.db.close()
            raise

    def _own_snapshots(self) -> list[Player]:
        """This run's readable snapshots up to the update it is at, oldest first."""
        return [p for p in self.db.players() if p.kind == "snapshot" and p.broken is None
                and snapshot_run(p.name) == self.run_name
                and int(p.metadata.get("update", 0)) <= self.run.update]

    def after_update(self) -> dict[str, float]:
        """Snapshot and rate when due (each rating is logged at its snapshot's step once
        finished: :meth:`log_ratings_to`); no metrics of the update itself."""
        run = self.run
        metrics: dict[str, float] = {}
        if run.update % self.every == 0:
            parent = (self.db.player(self.latest).name if self.latest is not None
                      else run.config.init_from)
            self.latest = register_snapshot(self.db, self.snapshot_dir, self.run_name, run,
                                            run.learner_weights(), run.global_step, parent,
                                            "main")
            self.ratings.rate(self.latest)
        self.ratings.collect()  # logged at the snapshots' steps (log_ratings_to)
        return metrics

    def log_ratings_to(self, sink: MetricSink) -> None:
        """Log each snapshot's rating, once its tournament is finished, to ``sink`` at the
        snapshot's step."""
        self.ratings.log_to(sink)

    def finish(self) -> dict[str, float]:
        """At the end of cloning: wait for the rater's tournaments (each logged); the newest
        rating finished in this process."""
        self.ratings.finish()
        newest = self.ratings.newest
        return newest.metrics if newest is not None else {}

    def describe(self) -> dict[str, Any]:
        """The database, this run's snapshot count and its newest snapshot's rating."""
        out: dict[str, Any] = {"league_db": str(self.db.path), "snapshots": sum(
            p.kind == "snapshot" and snapshot_run(p.name) == self.run_name
            for p in self.db.players())}
        if self.latest is not None:
            rating = self.db.rating(self.latest)
            out.update({"league/mu": rating.mu, "league/sigma": rating.sigma})
        return out

    def close(self) -> None:
        self.ratings.close()
        self.db.close()
