"""Rating games of a training run's snapshots: in the training process, or in a rater process.

A :class:`RatingJob` says everything a snapshot's rating tournament needs (the league database,
the game and its options, the network config, the snapshot and its reference pool, the seed),
so it runs the same wherever it runs: :func:`rate_snapshot` plays it and returns the snapshot's
rating as metrics, :class:`Rated` (logged at the snapshot's own step). :class:`BackgroundRater`
plays the jobs one after another in one spawned process (its own engine, e.g. its own JVM for
microRTS) while training goes on, so training no longer waits for rating games
(``league.eval_process``). Each match is stored in one transaction under the tournament's key,
so a rater killed with its trainer loses at most the games in flight; the resumed run submits
the unfinished tournaments again and they play only what is missing.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch

from games.core import GameSpec, Policy, VecGame
from games.family import MatchConditions
from games.matches import MatchRunner
from games.pools import DetachedPool, stop_process_pool
from games.registry import family_of
from league.db import LeagueDB, LeagueError
from league.ratings import PlayerRating
from league.snapshots import Snapshot, load_player_snapshot
from league.tournament import IncompatiblePlayer, TournamentConfig, run_tournament
from selfplay.checkpoint import CheckpointError
from selfplay.config import ConfigError, NetworkConfig, NormalizeConfig, TrainConfig
from selfplay.config_files import saved_config_from_mapping
from selfplay.evaluate import load_weights
from selfplay.interrupts import signals_at_checks
from selfplay.networks import ActorCritic
from selfplay.policy import FrozenPolicy

AgentOf = Callable[[int, Snapshot], ActorCritic]  # (player id, snapshot) -> loaded network


@dataclass(frozen=True)
class RatingJob:
    """One snapshot's rating tournament against its reference pool (picklable)."""

    db_path: str
    spec: GameSpec
    options: Mapping[str, Any]
    """the training game's options (map, max steps, ...): rating games are played alike"""
    network: NetworkConfig
    normalize: NormalizeConfig
    latest: str
    """the snapshot rated"""
    pool: tuple[str, ...]
    """earlier snapshots and anchors it plays"""
    games_per_pair: int
    num_envs: int
    seed: int
    """the update of the snapshot: seed of the tournament's games"""
    run_seed: int
    """the run's seed (scripted bots' generators)"""
    device: str = "cpu"
    snapshots: int = 1
    """snapshots in the league up to this one (logged as league/snapshots)"""
    step: int = 0
    """the snapshot's environment steps: where its rating is logged"""


@dataclass(frozen=True)
class Rated:
    """A finished rating tournament: the snapshot, its environment steps and its rating as
    metrics (``league/*``, ``eval/*``), logged at that step
    (:meth:`~selfplay.tracking.MetricSink.log_rating`)."""

    snapshot: str
    step: int
    metrics: dict[str, float]


def rated(job: RatingJob, metrics: Mapping[str, float]) -> Rated:
    """``job``'s finished rating, with ``league/rated_update`` (the snapshot's update)."""
    return Rated(job.latest, job.step, {**metrics, "league/rated_update": float(job.seed)})


def rating_metrics(db: LeagueDB, name: str, snapshots: int) -> dict[str, float]:
    """``name``'s stored rating as training metrics (``league/*``), and its results in its
    rating games against each scripted bot of the pool (``eval/win_rate/<bot>``,
    ``eval/draw_rate/<bot>``): the periodic evaluation against a fixed bot set."""
    rating = db.rating(name)
    metrics = {"league/mu": rating.mu, "league/sigma": rating.sigma,
               "league/conservative": rating.mu - 3 * rating.sigma, "league/elo": rating.elo,
               "league/snapshots": float(snapshots)}
    return {**metrics, **bot_results(db, name)}


def bot_results(db: LeagueDB, name: str) -> dict[str, float]:
    """Win and draw rates of snapshot ``name`` in its rating tournament's games against each
    scripted bot (``eval/win_rate/<bot>``, ``eval/draw_rate/<bot>``)."""
    metrics = {}
    results = db.results_vs_bots(name, db.matches(f"eval@{name}/"))
    for bot, (wins, draws, games) in sorted(results.items()):
        metrics[f"eval/win_rate/{bot}"] = wins / games
        metrics[f"eval/draw_rate/{bot}"] = draws / games
    return metrics


RemoteRunnerFactory = Callable[[Mapping[int, Policy], MatchConditions], MatchRunner]
"""(the players' policies, the match conditions) -> a runner whose games are played elsewhere"""


def match_games(game_name: str, options: Mapping[str, Any]) -> Callable[[int, int], VecGame]:
    """``(envs, seed) -> game``: the games rating matches are played in (the training game's
    ``options`` with the family's match set-up)."""
    return family_of(game_name).match_games(game_name, options)


def rate_snapshot(job: RatingJob, db: LeagueDB, agent_of: AgentOf,
                  remote: RemoteRunnerFactory | None = None) -> dict[str, float]:
    """Play (or finish) ``job``'s tournament, storing every match in ``db``; the snapshot's
    rating afterwards as metrics (``league/mu``, ``league/sigma``, ...). ``remote``: the
    games are played by another process (a Ray actor), the matches stored here."""
    game_name = job.spec.name
    family = family_of(game_name)
    options = dict(job.options)
    game_factory = match_games(game_name, options)

    def policy_factory(name: str) -> Policy:
        player = db.player(name)
        if player.kind == "bot":
            return family.opponent(game_name, name, job.run_seed)
        snapshot = load_player_snapshot(db, player.id)
        if snapshot is None:
            raise CheckpointError(f"snapshot {name} is missing or corrupt")
        # its own generator, seeded by the run, the tournament and the player: the same games
        # whether the tournament runs in the trainer or in a rater process
        seed = np.random.SeedSequence([job.run_seed, job.seed, player.id]).generate_state(1)[0]
        generator = torch.Generator(device=job.device).manual_seed(int(seed))
        return FrozenPolicy(agent_of(player.id, snapshot).to(job.device), generator=generator)

    config = TournamentConfig(games_per_pair=job.games_per_pair, num_envs=job.num_envs,
                              seed=job.seed, name=f"eval@{job.latest}",
                              map=family.map_label(options))
    conditions = MatchConditions(options=options, num_envs=config.num_envs, seed=config.seed)

    def runner(policies: Mapping[int, Policy]) -> MatchRunner:
        if remote is not None:
            return remote(policies, conditions)
        return family.match_runner(game_name, policies, conditions, game_factory)

    run_tournament(db, [job.latest, *job.pool], policy_factory, game_factory, config,
                   focus=[job.latest], runner=runner)
    return rating_metrics(db, job.latest, job.snapshots)


def calibrate_anchors(db: LeagueDB, game_name: str, options: Mapping[str, Any],
                      names: Sequence[str], games_per_pair: int, num_envs: int,
                      seed: int) -> dict[str, PlayerRating]:
    """Ratings for the anchors of ``names`` not yet in ``db``, from a round robin among
    ``names`` (``games_per_pair`` per pair, both sides, ``num_envs`` at once) in the
    training game's conditions: the anchors already in the league keep their ratings
    there, the new ones start at the prior. Anchors frozen at the prior all sat at one μ
    (random and win_or_block alike), a yardstick with its marks in one place. The games are
    played in a scratch database (the league's holds the frozen ratings only)."""
    known = {name: db.rating(name) for name in names if _registered(db, name)}
    new = [name for name in names if name not in known]
    if not new or len(names) < 2 or games_per_pair < 1:
        return {}
    family = family_of(game_name)
    game_factory = match_games(game_name, dict(options))
    config = TournamentConfig(games_per_pair=games_per_pair, num_envs=num_envs, seed=seed,
                              name="anchor-calibration", map=family.map_label(options))
    conditions = MatchConditions(options=dict(options), num_envs=num_envs, seed=seed)

    def runner(policies: Mapping[int, Policy]) -> MatchRunner:
        return family.match_runner(game_name, policies, conditions, game_factory)

    pairs = sum(1 for i, a in enumerate(names) for b in names[i + 1:] if a in new or b in new)
    print(f"league: placing the new anchors ({', '.join(new)}) by {games_per_pair} games per "
          f"pair between the anchors ({pairs * games_per_pair} games; none: --set "
          "league.anchor_calibration_games=0)", file=sys.stderr, flush=True)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="selfplay-anchors-") as folder:
        with LeagueDB(Path(folder) / "calibration.db", game=game_name,
                      config=db.config) as scratch:
            for name in names:
                scratch.add_player(name, "bot", frozen=name in known, rating=known.get(name))
            with signals_at_checks() as check:  # a Ctrl-C stops it after the game it came in
                run_tournament(scratch, list(names),
                               lambda name: family.opponent(game_name, name, seed),
                               game_factory, config, focus=new if known else None,
                               runner=runner, progress=lambda _done, _total: check())
            placed = {name: scratch.rating(name) for name in new}
    shown = ", ".join(f"{name} μ {r.mu:.1f} ± {r.sigma:.1f}" for name, r in placed.items())
    print(f"league: anchors placed in {time.perf_counter() - start:.1f} s: {shown}",
          file=sys.stderr, flush=True)
    return placed


def _registered(db: LeagueDB, name: str) -> bool:
    try:
        db.player(name)
        return True
    except LeagueError:
        return False


def snapshot_agent(spec: GameSpec, network: NetworkConfig, normalize: NormalizeConfig,
               snapshot: Snapshot) -> ActorCritic:
    """The run's network with ``snapshot``'s weights; :class:`IncompatiblePlayer` if they do
    not fit it (a snapshot of another network in a shared database). Built without drawing
    from torch's global generator (its initial weights are replaced): a run resumed loads
    its opponents at other moments than the run that wrote the checkpoint, and the global
    state it saves would differ."""
    with torch.random.fork_rng(devices=[]):
        agent = ActorCritic(spec, network, normalize)
    try:
        trained: TrainConfig | None = saved_config_from_mapping(snapshot.config)
    except (ConfigError, TypeError):  # another version's config: shapes from the weights only
        trained = None
    try:
        load_weights(agent, snapshot.weights, spec, trained, str(snapshot.path))
    except CheckpointError as exc:
        raise IncompatiblePlayer(f"does not fit this run's network: {exc}") from exc
    return agent


# --------------------------------------------------------------------------- rater process


def _rater_init() -> None:
    """The rater leaves Ctrl-C and SIGTERM to the trainer, which stops it (a terminal's Ctrl-C
    reaches the whole process group), and ends as soon as the trainer is gone (killed with
    SIGKILL, say) rather than finishing its tournament (:class:`~games.pools.DetachedPool`);
    one torch thread, beside training's."""
    import torch

    torch.set_num_threads(1)


def _rate_in_rater(job: RatingJob) -> Rated:
    """Rater-process entry point: one job, with its own connection to the database."""
    def agent_of(_pid: int, snapshot: Snapshot) -> ActorCritic:
        return snapshot_agent(job.spec, job.network, job.normalize, snapshot)

    with LeagueDB(job.db_path, game=job.spec.name, create=False) as db:
        return rated(job, rate_snapshot(job, db, agent_of))


class Rater(Protocol):
    """Plays rating jobs beside training (:class:`BackgroundRater`, or
    :class:`~selfplay.remote_rating.RayRater`)."""

    @property
    def pending(self) -> int:
        """Jobs submitted and not yet finished."""
        ...

    def submit(self, job: RatingJob, tries: int = 0) -> None: ...

    def collect(self, wait: bool = False) -> list[Rated]:
        """Every job finished since the last call, in the order they were submitted; a failed
        job is reported on stderr and never stops training. ``wait``: finish every job
        first."""
        ...

    def close(self) -> None: ...


class BackgroundRater:
    """Rating jobs played one at a time by a spawned rater process, beside training.

    A rater that dies (a JVM crash, the OOM killer) is replaced, and the jobs it held are
    handed to the new one once (each plays only the matches not yet stored)."""

    def __init__(self) -> None:
        self._pool: ProcessPoolExecutor | None = None
        self._pending: list[tuple[RatingJob, Future[Rated], int]] = []

    @property
    def pending(self) -> int:
        return len(self._pending)

    def submit(self, job: RatingJob, tries: int = 0) -> None:
        """Queue ``job`` (``tries``: how often it was handed to a rater that died)."""
        for attempt in (0, 1):
            if self._pool is None:
                self._pool = DetachedPool(1, initializer=_rater_init)
            try:
                self._pending.append((job, self._pool.submit(_rate_in_rater, job), tries))
                return
            except BrokenProcessPool:
                if attempt:
                    raise
                self._replace_dead_rater()

    def collect(self, wait: bool = False) -> list[Rated]:
        """Every job finished since the last call, in the order they were submitted (a job
        after one still playing waits for it); a failed job is reported on stderr and never
        stops training. ``wait``: finish every job first."""
        finished: list[Rated] = []
        while True:
            retry: list[tuple[RatingJob, int]] = []
            still: list[tuple[RatingJob, Future[Rated], int]] = []
            for job, future, tries in self._pending:
                if still or not (wait or future.done()):
                    still.append((job, future, tries))
                    continue
                try:
                    finished.append(future.result())
                except BrokenProcessPool:
                    if tries == 0:
                        retry.append((job, tries + 1))
                    else:
                        print(f"warning: rating {job.latest} failed: the rater process died "
                              "twice during it", file=sys.stderr)
                except Exception as exc:  # noqa: BLE001 - rating must never stop training
                    print(f"warning: rating {job.latest} failed: {_one_line(exc)}",
                          file=sys.stderr)
            self._pending = still
            if not retry:
                return finished
            self._replace_dead_rater()
            for job, tries in retry:
                self.submit(job, tries)
            if not wait:
                return finished

    def _replace_dead_rater(self) -> None:
        print("warning: the rater process died; starting another", file=sys.stderr)
        alive = self._pending
        self._pending = []
        self._stop_pool()
        for job, _, tries in alive:  # queued behind the dead one: hand them over too
            self.submit(job, tries)

    def close(self) -> None:
        """Stop at once: queued jobs are dropped and the rater is killed (the matches it
        stored stay, each whole; a resumed run plays the rest)."""
        self._pending = []
        self._stop_pool()

    def _stop_pool(self) -> None:
        """Kill the rater (SIGKILL: it ignores SIGTERM, which is the trainer's to handle) and
        forget its executor, whose queue is dropped."""
        pool, self._pool = self._pool, None
        if pool is not None:
            stop_process_pool(pool, kill=True)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__
