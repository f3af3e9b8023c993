"""Rating tournaments whose games a Ray actor plays, the league database staying with the learner.

With ``distributed.backend: ray`` the rater is a Ray actor (:class:`MatchPlayer`, one engine
of its own, e.g. one JVM for microRTS) that may run on any node: it never opens the league
database or a snapshot file. The learner's process keeps both. A thread of the learner's
(:class:`RayRater`) runs each rating job's tournament as :func:`rate_snapshot` does in the
training process: it loads the players (snapshot weights included) from the database, draws
the schedule, and hands the matches and the players' policies to the actor. The actor streams
each finished match back as it ends, and the thread stores it in one transaction under the
tournament's key. So a run killed mid-tournament keeps every match that had ended, and the
resumed run plays only the rest. The matches a schedule hands out before it needs a result
(all of them for the round robin that rating jobs use) go out as one round: the actor plays
them in one game of ``eval_envs`` envs, in the order the in-process rater does. So the games,
and the ratings, equal the in-process rater's (tested).

An actor lost with its process or node is restarted by Ray; the job it was playing is handed
to it once more (it plays only the matches not yet stored), as with the local rater process.
"""

from __future__ import annotations

import queue
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from games.core import Policy
from games.family import MatchConditions
from games.matches import MatchResult, MatchRunner, MatchSpec
from games.registry import family_of
from league.db import LeagueDB
from league.snapshots import Snapshot
from selfplay.league_rating import (
    Rated,
    RatingJob,
    match_games,
    rate_snapshot,
    rated,
    snapshot_agent,
)
from selfplay.networks import ActorCritic

_END = object()


class MatchPlayer:
    """The Ray actor's body: plays the matches it is handed, one result per finished match."""

    def __init__(self) -> None:
        import torch

        torch.set_num_threads(1)

    def play(self, game: str, conditions: MatchConditions, policies: Mapping[int, Policy],
             matches: list[MatchSpec]) -> Iterator[tuple[MatchSpec, MatchResult]]:
        """Play ``matches`` between ``policies`` (by league player id) with the family's
        match runner; yields ``(match, result)`` as each game ends."""
        runner = family_of(game).match_runner(game, policies, conditions,
                                              match_games(game, dict(conditions.options)))
        pending = list(reversed(matches))
        results: queue.Queue[Any] = queue.Queue()

        def run() -> None:
            try:
                runner.run(lambda: pending.pop() if pending else None,
                           lambda match, result: results.put((match, result)))
                results.put(_END)
            except BaseException as exc:  # noqa: BLE001 - handed to the learner
                results.put(exc)

        threading.Thread(target=run, daemon=True, name="match-player").start()
        while (item := results.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            yield item


@dataclass
class RemoteRunner:
    """A :class:`MatchRunner` on the learner's side whose games the actor plays."""

    actor: Any
    ray: Any
    game: str
    conditions: MatchConditions
    policies: Mapping[int, Policy]

    def run(self, next_match: Callable[[], MatchSpec | None],
            on_result: Callable[[MatchSpec, MatchResult], None]) -> None:
        """Rounds of every match the schedule hands out before it needs results, each
        result stored (``on_result``) as the actor reports it."""
        while True:
            matches: list[MatchSpec] = []
            while (match := next_match()) is not None:
                matches.append(match)
            if not matches:
                return
            stream = self.actor.play.options(num_returns="streaming").remote(
                self.game, self.conditions, self.policies, matches)
            for ref in stream:
                try:
                    done, result = self.ray.get(ref)
                except self.ray.exceptions.RayTaskError as exc:  # the game's own error
                    cause = exc.cause if isinstance(exc.cause, Exception) else None
                    if cause is None:
                        raise
                    raise cause from None
                on_result(done, result)


def _cpu_agent(job: RatingJob) -> Callable[[int, Snapshot], ActorCritic]:
    def agent_of(_pid: int, snapshot: Snapshot) -> ActorCritic:
        return snapshot_agent(job.spec, job.network, job.normalize, snapshot)

    return agent_of


class RayRater:
    """Rating jobs played one at a time by a Ray actor; the same interface as
    :class:`~selfplay.league_rating.BackgroundRater`.

    ``session`` is the run's Ray connection (:func:`games.workers.ray_cluster.connect`). The
    actor asks for no CPU of its own (rating games run beside training, as the local rater
    process does) and is restarted by Ray up to ``max_restarts`` times; lost once more, it is
    replaced by a new actor (with as many restarts), as a dead local rater process is."""

    def __init__(self, session: Any, max_restarts: int = 3) -> None:
        self.ray = session.ray
        self._remote = self.ray.remote(MatchPlayer).options(num_cpus=0,
                                                             max_restarts=max_restarts)
        self.max_restarts = max_restarts
        self._losses = 0  # of the current actor
        self.actor = self._remote.remote()
        self._jobs: queue.Queue[tuple[RatingJob, int] | None] = queue.Queue()
        self._lock = threading.Lock()
        self._queued = 0
        self._results: list[Rated] = []
        self._closed = False
        self._thread = threading.Thread(target=self._serve, daemon=True, name="ray-rater")
        self._thread.start()

    @property
    def pending(self) -> int:
        with self._lock:
            return self._queued

    def submit(self, job: RatingJob, tries: int = 0) -> None:
        """Queue ``job`` (its snapshot networks go to the actor on the CPU)."""
        with self._lock:
            self._queued += 1
        self._jobs.put((replace(job, device="cpu"), tries))

    def collect(self, wait: bool = False) -> list[Rated]:
        """Every job finished since the last call, in the order they were played; a failed
        job is reported on stderr and never stops training. ``wait``: finish every job
        first."""
        if wait:
            self._jobs.join()
        with self._lock:
            done, self._results = self._results, []
        return done

    def _serve(self) -> None:
        while (item := self._jobs.get()) is not None:
            job, tries = item
            try:
                if not self._closed:
                    self._play(job, tries)
            finally:
                with self._lock:
                    self._queued -= 1
                self._jobs.task_done()
        self._jobs.task_done()

    def _play(self, job: RatingJob, tries: int) -> None:
        """One job, stored through the thread's own connection to the database."""
        def remote(policies: Mapping[int, Policy], conditions: MatchConditions) -> MatchRunner:
            return RemoteRunner(self.actor, self.ray, job.spec.name, conditions, policies)

        try:
            with LeagueDB(job.db_path, game=job.spec.name, create=False) as db:
                metrics = rate_snapshot(job, db, _cpu_agent(job), remote=remote)
        except self.ray.exceptions.RayActorError:
            if self._closed:
                return
            self._losses += 1
            renewed = self._losses > self.max_restarts  # Ray restarts it no more
            if renewed:
                self.actor, self._losses = self._remote.remote(), 0
            if tries == 0:
                who = "a new one" if renewed else "Ray restarts it and it"
                print(f"warning: the Ray rater was lost during rating {job.latest}; "
                      f"{who} plays the rest", file=sys.stderr)
                self._play(job, 1)
            else:
                print(f"warning: rating {job.latest} failed: the Ray rater was lost twice "
                      "during it", file=sys.stderr)
            return
        except Exception as exc:  # noqa: BLE001 - rating must never stop training
            if not self._closed:
                text = str(exc).strip()
                line = text.splitlines()[0][:200] if text else type(exc).__name__
                print(f"warning: rating {job.latest} failed: {line}", file=sys.stderr)
            return
        with self._lock:
            self._results.append(rated(job, metrics))

    def close(self) -> None:
        """Stop at once: queued jobs are dropped and the actor is killed (the matches stored
        stay, each whole; a resumed run plays the rest)."""
        if self._closed:
            return
        self._closed = True
        try:
            while True:
                self._jobs.get_nowait()
                with self._lock:
                    self._queued -= 1
                self._jobs.task_done()
        except queue.Empty:
            pass
        self._jobs.put(None)
        try:
            self.ray.kill(self.actor, no_restart=True)
        except Exception:  # noqa: BLE001, S110 - Ray already shut down: the actor is gone
            pass
        self._thread.join(timeout=10.0)
