"""microRTS on Ray (``distributed.backend: ray``) on a real two-node Ray cluster on this machine
(``ray.cluster_utils.Cluster``, small object stores). Workers as actors play the same games as
one process, land on both nodes, and a node lost mid-run is reported, restarted by Ray and its
games begun again. The rater as an actor plays the same rating games as the rater in the
training process, while the league database stays with the learner."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from games.core import GameError
from games.microrts import make
from games.microrts.adapter import random_legal_actions
from games.microrts.workers import MicroRTSWorkers
from games.registry import family_of
from games.workers.host import WorkerRecipe
from games.workers.vec import Transport

ray = pytest.importorskip("ray")

from games.workers.ray_cluster import connect  # noqa: E402
from games.workers.ray_workers import RayWorkers  # noqa: E402

PLUGINS = Path(__file__).resolve().parents[2] / "plugins"
OPTIONS = {"map": "basesWorkers8x8", "num_selfplay_envs": 2,
           "bots": ["WorkerRush", "LightRush", "Passive"], "max_steps": 120}
STORE = 80 * 2**20


class TwoNodes:
    """A head and one worker node (1 CPU each) joined by this process."""

    def __init__(self, tmp: Path) -> None:
        from ray.cluster_utils import Cluster

        # as connect() does: Ray's crash handler would take SIGSEGV from this process's JVM
        os.environ["RAY_DISABLE_FAILURE_SIGNAL_HANDLER"] = "1"
        os.environ["RAY_AUTH_MODE"] = "disabled"
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        os.environ["RAY_TMPDIR"] = str(tmp)
        # the test game plugin is importable on the nodes, as a plugin installed on a real
        # cluster's machines is; $SELFPLAY_FAMILIES is the driver's alone
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(PLUGINS), *filter(None, [os.environ.get("PYTHONPATH")])])
        self.cluster = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False})
        self.node = self.cluster.add_node(num_cpus=1, object_store_memory=STORE)
        self.cluster.wait_for_nodes()
        ray.init(address=self.cluster.address, log_to_driver=False)

    def launcher(self, max_restarts: int = 2) -> Any:
        session = connect("auto")  # this process has joined: reused, left running

        def launch(recipes: list[WorkerRecipe], total: int) -> Transport:
            # half a CPU each: SPREAD puts one on each node, and a restart fits on the head
            return RayWorkers(recipes, total, session, max_restarts=max_restarts,
                              cpus_per_worker=0.5)
        return launch

    def close(self) -> None:
        ray.shutdown()
        self.cluster.shutdown()


@pytest.fixture(scope="module")
def two_nodes(engine_home: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoNodes]:
    folder = Path(tempfile_dir(tmp_path_factory))
    nodes = TwoNodes(folder)
    try:
        yield nodes
    finally:
        nodes.close()
        shutil.rmtree(folder, ignore_errors=True)


def tempfile_dir(factory: pytest.TempPathFactory) -> str:
    """A short folder (Ray's socket paths must stay under 108 characters)."""
    import tempfile

    del factory
    return tempfile.mkdtemp(prefix="sp-ray-", dir="/tmp")  # $TMPDIR may be deep


def ray_game(nodes: TwoNodes, num_envs: int = 7, **extra: Any) -> MicroRTSWorkers:
    game = family_of("microrts").make_on_workers(
        "microrts", num_envs, 0, {**OPTIONS, "workers": 2, **extra}, nodes.launcher())
    assert isinstance(game, MicroRTSWorkers)
    return game


@pytest.mark.slow
def test_ray_workers_play_the_same_games_on_both_nodes(two_nodes: TwoNodes) -> None:
    single = make("microrts", num_envs=7, seed=0, **OPTIONS)
    split = ray_game(two_nodes)
    try:
        assert isinstance(split.transport, RayWorkers)
        assert len(set(split.transport.nodes())) == 2  # one actor on each node
        assert split.spec == single.spec
        a, b = single.reset(), split.reset()
        np.testing.assert_array_equal(a.obs, b.obs)
        rng = np.random.default_rng(3)
        episodes = 0
        for _ in range(150):
            actions = random_legal_actions(a.action_mask, rng)
            a, b = single.step(actions), split.step(actions)
            for field in ("obs", "action_mask", "reward", "terminated", "truncated", "alive"):
                np.testing.assert_array_equal(getattr(a, field), getattr(b, field), field)
            np.testing.assert_array_equal(a.episodes.env, b.episodes.env)
            np.testing.assert_array_equal(single.episode_reward_components(),
                                          split.episode_reward_components())
            episodes += len(a.episodes.env)
        assert episodes >= 7
        # the pipelined trainer's part steps work through actors too
        split.step_part_async(1, random_legal_actions(b.action_mask[4:], rng))
        part = split.step_part_wait(1)
        assert part.obs.shape[0] == 3
    finally:
        split.close()
        single.close()


@pytest.mark.slow
def test_a_lost_node_ends_its_games_and_the_restarted_worker_plays_on(
        two_nodes: TwoNodes, capfd: pytest.CaptureFixture[str]) -> None:
    """A node removed mid-run: the step that lost it still answers. The lost worker's games end
    there as truncated (final observations: the last ones seen; no episode, so no match, is
    counted), Ray restarts the actor on the head, and its envs begin new games."""
    split = ray_game(two_nodes, num_envs=4)
    try:
        batch = split.reset(seed=5)
        transport = split.transport
        assert isinstance(transport, RayWorkers)
        lost = transport.nodes().index(two_nodes.node.node_id)
        start, stop = split.ranges[lost]
        rng = np.random.default_rng(0)
        before = batch.obs[start:stop].copy()
        two_nodes.cluster.remove_node(two_nodes.node)
        for _ in range(400):  # until the loss is noticed
            actions = random_legal_actions(batch.action_mask, rng)
            before = batch.obs[start:stop].copy()
            batch = split.step(actions)
            if split.revivals:
                break
        assert split.revivals == 1
        assert batch.truncated[start:stop].all() and not batch.terminated[start:stop].any()
        assert not batch.reward[start:stop].any()
        assert not np.isin(batch.episodes.env, np.arange(start, stop)).any()
        np.testing.assert_array_equal(batch.final_obs[start:stop], before)
        assert "envs 2..3 begin new games" in capfd.readouterr().err or start != 2
        assert transport.lost() == set()
        assert set(transport.nodes()) == {ray.get_runtime_context().get_node_id()}
        for _ in range(5):
            batch = split.step(random_legal_actions(batch.action_mask, rng))
    finally:
        split.close()
        two_nodes.node = two_nodes.cluster.add_node(num_cpus=1, object_store_memory=STORE)


def test_training_on_ray_matches_local_then_survives_a_lost_node(two_nodes: TwoNodes) -> None:
    """``distributed.backend: ray``: the workers land on both nodes; the first update's
    weights equal the local worker processes' for the same seed (the same games, actions and
    draws); an error inside an actor is the game's one line; then a node is lost and the run
    goes on to the right step count (the lost games end truncated, see the slow test above, and
    the lost step is collected again)."""
    import torch

    from selfplay.config_files import build_config
    from selfplay.train import build_trainer

    def trainer(backend: str) -> Any:
        config = build_config("microrts", seed=3, overrides=[
            "game.options.map=basesWorkers8x8", "game.options.max_steps=60", "game.num_envs=4",
            "game.options.workers=2", "game.options.num_selfplay_envs=2", "league.enabled=false",
            "ppo.num_steps=16",
            f"distributed.backend={backend}", "distributed.worker_cpus=0.5", "torch_threads=1"])
        return build_trainer(config, None)

    local, remote = trainer("local"), trainer("ray")
    try:
        transport = remote.game.transport
        assert isinstance(transport, RayWorkers)
        assert len(set(transport.nodes())) == 2  # one actor on each node
        local.run_update()
        remote.run_update()
        for name, value in local.agent.state_dict().items():
            torch.testing.assert_close(remote.agent.state_dict()[name], value, rtol=0, atol=0)
        local.game.close()
        with pytest.raises(GameError, match=r"^microrts: unknown .*nosuchbot[^\n]*$"):
            remote.game.set_bot(3, "nosuchbot")
        two_nodes.cluster.remove_node(two_nodes.node)
        for _ in range(3):
            metrics = remote.run_update()
        assert remote.global_step == 4 * remote.steps_per_update
        assert remote.game.revivals == 1 and metrics["workers/lost"] == 1.0
        # the lost step of the lost worker's 2 envs was collected again
        assert metrics["workers/recollected_steps"] == 2.0
    finally:
        local.game.close()
        remote.game.close()
        two_nodes.node = two_nodes.cluster.add_node(num_cpus=1, object_store_memory=STORE)


def rating_setup(tmp_path: Path) -> tuple[Any, str, str, Any]:
    """A microRTS run's league (two snapshots, anchors WorkerRush and Passive) in
    ``tmp_path / "run"``: ``(config, first snapshot, latest snapshot, spec)``."""
    from league.db import LeagueDB
    from selfplay.config_files import build_config
    from selfplay.train import run_training

    config = build_config("microrts", seed=5, total_steps=2 * 4 * 16, overrides=[
        "game.options.map=basesWorkers8x8", "game.options.max_steps=60", "game.num_envs=4",
        "game.options.num_selfplay_envs=2", "game.options.workers=2", "ppo.num_steps=16",
        "log.progress=false", "log.tensorboard=false", "league.snapshot_every=1",
        "league.eval_every=1000", "league.anchors=[WorkerRush, Passive]"])
    run_training(config, run_dir=tmp_path / "run")
    with LeagueDB(tmp_path / "run" / "league.db") as db:
        first, latest = [p.name for p in db.players() if p.kind == "snapshot"]
    sample = family_of("microrts").make("microrts", 4, 0, config.game.options)
    spec = sample.spec
    sample.close()
    return config, first, latest, spec


def rating_job(config: Any, spec: Any, db: Path, first: str, latest: str,
               games_per_pair: int = 2) -> Any:
    from selfplay.league_rating import RatingJob

    return RatingJob(db_path=str(db), spec=spec, options=dict(config.game.options),
                     network=config.network, normalize=config.normalize, latest=latest,
                     pool=(first, "WorkerRush", "Passive"), games_per_pair=games_per_pair,
                     num_envs=4, seed=2, run_seed=config.seed)


@pytest.mark.slow  # a microRTS run and a rating tournament, the actor killed in between: ~15 s
def test_a_ray_rater_lost_mid_tournament_plays_the_rest(two_nodes: TwoNodes, tmp_path: Path,
                                                        capfd: pytest.CaptureFixture[str]
                                                        ) -> None:
    """The rater actor killed once matches are stored: Ray restarts it, the job is handed to
    it again and plays only the matches not yet stored; every match is stored once."""
    import time

    from league.db import LeagueDB
    from selfplay.distributed_config import DistributedConfig
    from selfplay.snapshot_ratings import make_rater

    config, first, latest, spec = rating_setup(tmp_path)
    job = rating_job(config, spec, tmp_path / "run" / "league.db", first, latest,
                     games_per_pair=4)
    rater = make_rater(DistributedConfig(backend="ray", address="auto"))
    try:
        rater.submit(job)
        with LeagueDB(tmp_path / "run" / "league.db") as db:
            deadline = time.monotonic() + 120
            while not db.matches(f"eval@{latest}/") and time.monotonic() < deadline:
                time.sleep(0.05)
            stored_before = len(db.matches(f"eval@{latest}/"))
        assert 0 < stored_before < 3 * 4, stored_before
        ray.kill(rater.actor, no_restart=False)  # type: ignore[attr-defined]
        (finished,) = rater.collect(wait=True)
    finally:
        rater.close()
    assert "league/mu" in finished.metrics and finished.snapshot == latest
    assert "the Ray rater was lost during rating" in capfd.readouterr().err
    with LeagueDB(tmp_path / "run" / "league.db") as db:
        keys = [m.key for m in db.matches(f"eval@{latest}/")]
        assert len(keys) == len(set(keys)) == 3 * 4
        assert db.replay_ratings() == db.ratings()


@pytest.mark.slow  # two rating tournaments, local and on Ray, and a failing one: ~16 s
def test_the_ray_rater_plays_the_local_raters_games(two_nodes: TwoNodes, tmp_path: Path,
                                                   capfd: pytest.CaptureFixture[str]) -> None:
    """A snapshot's rating tournament (an earlier snapshot and two engine bots, both sides)
    played by the Ray rater actor, which never opens the database: every match the learner
    stores, and the ratings after them, equal those of the same tournament played by the
    local rater process. (No JVM in this process: games here are played in processes of their
    own, as ``selfplay train`` plays them.)"""
    from league.db import LeagueDB
    from selfplay.distributed_config import DistributedConfig
    from selfplay.league_rating import BackgroundRater
    from selfplay.snapshot_ratings import make_rater

    config, first, latest, spec = rating_setup(tmp_path)
    games = {}
    for where in ("local", "ray"):
        path = tmp_path / f"{where}.db"
        shutil.copy(tmp_path / "run" / "league.db", path)
        job = rating_job(config, spec, path, first, latest)
        rater = (BackgroundRater() if where == "local" else
                 make_rater(DistributedConfig(backend="ray", address="auto")))
        try:
            rater.submit(job)
            (finished,) = rater.collect(wait=True)
            metrics = finished.metrics
            assert rater.pending == 0
        finally:
            rater.close()
        with LeagueDB(path) as db:
            rows = [(m.key, m.player_a, m.player_b, m.side_a, m.seed, m.outcome, m.length)
                    for m in db.matches(f"eval@{latest}/")]
            games[where] = (rows, db.ratings(), metrics)
    assert len(games["local"][0]) == 3 * 2 and "league/mu" in games["local"][2]
    assert games["ray"] == games["local"]
    # the actor's own error (an unknown option) reaches the run as the game's one line
    shutil.copy(tmp_path / "run" / "league.db", tmp_path / "bad.db")  # nothing played yet
    bad = replace(rating_job(config, spec, tmp_path / "bad.db", first, latest),
                  options={**config.game.options, "nosuchoption": 1}, seed=3)
    rater = make_rater(DistributedConfig(backend="ray", address="auto"))
    try:
        capfd.readouterr()
        rater.submit(bad)
        assert rater.collect(wait=True) == []
    finally:
        rater.close()
    lines = [line for line in capfd.readouterr().err.splitlines() if "warning" in line]
    assert len(lines) == 1 and "nosuchoption" in lines[0] and "ray::" not in lines[0], lines


def family_trainer(game: str, overrides: list[str]) -> Any:
    from selfplay.config_files import build_config
    from selfplay.train import build_trainer

    config = build_config(game, seed=2, overrides=[
        "league.enabled=false", "log.progress=false", "distributed.backend=ray",
        "distributed.address=auto", "distributed.workers=2", "distributed.worker_cpus=0.5",
        *overrides])
    return build_trainer(config, None)


def test_a_family_without_workers_of_its_own_trains_on_ray_actors(two_nodes: TwoNodes) -> None:
    """Tic-tac-toe's envs split over two actors, one on each node, each building its envs with
    the family's own ``make``: a run of two updates steps every env."""
    from games.workers.generic import FamilyWorkers

    trainer = family_trainer("tictactoe", ["game.num_envs=6", "ppo.num_steps=8"])
    try:
        game = trainer.game
        assert isinstance(game, FamilyWorkers) and game.ranges == [(0, 3), (3, 6)]
        assert isinstance(game.transport, RayWorkers)
        assert len(set(game.transport.nodes())) == 2
        assert not hasattr(game, "reward_component_names")  # tic-tac-toe has none
        for _ in range(2):
            trainer.run_update()
        assert trainer.global_step == 2 * 6 * 8
        assert trainer.episodes.summary()["episodes"] > 0
    finally:
        trainer.game.close()


@pytest.mark.slow  # two training processes on the cluster: ~25 s
def test_a_plugin_game_named_by_the_driver_alone_trains_on_the_clusters_actors(
        two_nodes: TwoNodes, tmp_path: Path) -> None:
    """A game plugin that only the driver's ``$SELFPLAY_FAMILIES`` names: the cluster's actors,
    started by its nodes, build its envs (they stopped the run with "unknown game 'nim'").
    Their steps come in parts (pipelined): a part that breaks the batch contract is named as a
    whole step that breaks it is."""
    import json
    import subprocess
    import sys

    from games.registry import PLUGINS_VARIABLE

    def train(run: str, *extra: str, job: bool = False) -> subprocess.CompletedProcess[str]:
        # job: as the driver of `ray job submit --runtime-env-json` naming the plugin (Ray
        # refuses a second runtime_env naming the same variable)
        given = {"runtime_env": {"env_vars": {PLUGINS_VARIABLE: "plugin_nim"}}}
        return subprocess.run(
            [sys.executable, "-m", "selfplay.cli", "train", "--game", "nim", "--total-steps",
             "512", "--run-dir", str(tmp_path / run), "--no-progress", "--set",
             "league.enabled=false", "--set", "log.tensorboard=false", "--set",
             "distributed.backend=ray", "--set",
             f"distributed.address={two_nodes.cluster.address}", "--set",
             "distributed.workers=2", "--set", "distributed.worker_cpus=0.25", *extra],
            capture_output=True, text=True, timeout=240,
            env={**os.environ, PLUGINS_VARIABLE: "plugin_nim", "OMP_NUM_THREADS": "1",
                 **({"RAY_JOB_CONFIG_JSON_ENV_VAR": json.dumps(given)} if job else {})})

    for run, job in (("run", False), ("job", True)):
        proc = train(run, job=job)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "trained 512 steps" in proc.stdout, proc.stdout[-1000:]
    flawed = train("flawed", "--set", "game.options.flaw=flat_obs_in_steps")
    lines = [line for line in flawed.stderr.splitlines() if line.strip()]
    assert flawed.returncode != 0 and len(lines) == 1, flawed.stderr[-2000:]
    assert lines[0].startswith(
        "error: nim: step() broke the VecGame contract: Batch.obs has shape (8, 24); the spec "
        "says (8, 2, 12) ([E, A, ...] first); the run stopped during update 1"), lines[0]


@pytest.mark.slow  # each actor imports JAX and loads Lux's kernels (~10-40 s)
def test_lux_trains_on_ray_actors(two_nodes: TwoNodes) -> None:
    """Lux (JAX) on two actors: one update, its reward components forwarded."""
    from games.core import HasRewardComponents

    trainer = family_trainer("lux", ["game.num_envs=4", "ppo.num_steps=8",
                                     "ppo.num_minibatches=2"])
    try:
        game = trainer.game
        assert isinstance(game, HasRewardComponents) and "ice" in " ".join(
            game.reward_component_names)
        trainer.run_update()
        assert trainer.global_step == 4 * 8
    finally:
        trainer.game.close()


@pytest.mark.slow  # three recordings of four microRTS games, one here and two on Ray: ~10 s
def test_recording_on_ray_writes_the_shards_this_machine_writes(two_nodes: TwoNodes,
                                                                tmp_path: Path) -> None:
    """``selfplay record --ray``: the shards are played as Ray tasks and written here only,
    holding the games (metadata and order logs) of a recording in this machine's processes;
    a rerun keeps them."""
    from games.microrts.recorder import RecordPlan, record
    from games.replays import read_shard

    plan = RecordPlan(("WorkerRush", "LightRush"), ("basesWorkers8x8",), games=4,
                      shard_games=2, max_steps=80, seed=3, parallel=2, opening=5)
    here = record(plan, tmp_path / "here", processes=2)  # no JVM in this process
    on_ray = record(plan, tmp_path / "ray", processes=2, ray_address="auto")
    assert on_ray["backend"] == "ray" and on_ray["recorded"] == here["recorded"] == 4
    shards = sorted(p.name for p in (tmp_path / "here").glob("shard-*"))
    assert len(shards) == 2
    assert sorted(p.name for p in (tmp_path / "ray").glob("shard-*")) == shards
    for name in shards:
        mine, theirs = read_shard(tmp_path / "here" / name), read_shard(tmp_path / "ray" / name)
        assert theirs.games == mine.games and theirs.arrays.keys() == mine.arrays.keys()
        for key, value in mine.arrays.items():
            np.testing.assert_array_equal(theirs.arrays[key], value, key)
    again = record(plan, tmp_path / "ray", processes=2, ray_address="auto")
    assert again["recorded"] == 0 and again["kept"] == 4


@pytest.mark.slow  # torchrun's two ranks, each with two actors and their JVMs: ~30 s
def test_two_torchrun_ranks_each_run_their_workers_on_the_cluster(two_nodes: TwoNodes,
                                                                 tmp_path: Path) -> None:
    """``torchrun --nproc-per-node 2`` with ``distributed.address`` naming the cluster: each
    rank joins it and steps its half of the envs in actors of its own; rank 0 checkpoints."""
    import subprocess
    import sys

    from selfplay.checkpoint import list_checkpoints, load_checkpoint

    run = tmp_path / "run"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         "-m", "selfplay.cli", "train", "--game", "microrts", "--total-steps", "128",
         "--run-dir", str(run), "--no-progress", "--set", "league.enabled=false",
         "--set", "log.tensorboard=false", "--set", "game.num_envs=8",
         "--set", "game.options.map=basesWorkers8x8", "--set", "game.options.max_steps=60",
         "--set", "game.options.num_selfplay_envs=2", "--set", "game.options.workers=2",
         "--set", "ppo.num_steps=8", "--set", "distributed.backend=ray",
         "--set", f"distributed.address={two_nodes.cluster.address}",
         "--set", "distributed.worker_cpus=0.25", "--set", "checkpoint.every_updates=1"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("trained 128 steps in 2 updates") == 1, proc.stdout
    state = load_checkpoint(list_checkpoints(run / "checkpoints")[-1])
    assert state["world"] == 2 and state["counters"]["global_step"] == 128


@pytest.mark.slow  # two actor deaths, one restart (a JVM starts again): ~15 s
def test_a_worker_that_keeps_dying_stops_the_game_after_its_restarts(
        two_nodes: TwoNodes) -> None:
    """``max_restarts`` bounds the restarts: an actor killed once is restarted and its envs
    play new games; killed again, with no restart left, the game stops with one line naming
    the count and the setting."""
    game = family_of("microrts").make_on_workers(
        "microrts", 4, 0, {**OPTIONS, "workers": 2}, two_nodes.launcher(max_restarts=1))
    assert isinstance(game, MicroRTSWorkers)
    transport = game.transport
    assert isinstance(transport, RayWorkers)
    rng = np.random.default_rng(0)
    try:
        batch = game.reset(seed=1)
        ray.kill(transport.actors[1], no_restart=False)  # a crash Ray may restart
        for _ in range(200):  # until the death is noticed
            batch = game.step(random_legal_actions(batch.action_mask, rng))
            if game.revivals:
                break
        assert game.revivals == 1
        ray.kill(transport.actors[1], no_restart=False)  # again: no restart left
        with pytest.raises(GameError, match=r"^microrts: the Ray actor of envs 2\.\.3 was lost "
                                            r"2 times \(distributed\.max_restarts 1\); "
                                            r"stopping$"):
            for _ in range(200):
                batch = game.step(random_legal_actions(batch.action_mask, rng))
    finally:
        game.close()


@pytest.mark.slow  # a microRTS run on the cluster, stopped by SIGTERM: ~30 s
def test_sigterm_checkpoints_a_ray_run_and_frees_its_actors(two_nodes: TwoNodes,
                                                           tmp_path: Path) -> None:
    """SIGTERM during a run on the cluster: the update in progress ends, a checkpoint is
    written, the process exits with 128 + SIGTERM, and its actors leave the cluster (their
    CPUs are free again)."""
    import signal
    import subprocess
    import sys
    import time

    from selfplay.checkpoint import list_checkpoints

    # the earlier tests' actors leave the cluster asynchronously: wait until their CPUs are
    # back (measured while one still held half a CPU, "free before" read 1.0 of 2)
    settle = time.monotonic() + 30
    while (ray.available_resources().get("CPU", 0.0) < ray.cluster_resources().get("CPU", 0.0)
           and time.monotonic() < settle):
        time.sleep(0.2)
    free_before = ray.available_resources().get("CPU", 0.0)
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "selfplay.cli", "train", "--game", "microrts",
         "--total-steps", "1000000", "--run-dir", str(run), "--no-progress",
         "--set", "league.enabled=false", "--set", "log.tensorboard=false",
         "--set", "game.num_envs=4", "--set", "game.options.map=basesWorkers8x8",
         "--set", "game.options.num_selfplay_envs=2", "--set", "game.options.workers=2",
         "--set", "ppo.num_steps=8", "--set", "distributed.backend=ray",
         "--set", f"distributed.address={two_nodes.cluster.address}",
         "--set", "distributed.worker_cpus=0.25", "--set", "checkpoint.every_updates=1000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"})
    try:
        metrics = run / "metrics.jsonl"
        deadline = time.monotonic() + 180
        while not (metrics.exists() and metrics.read_text()) and proc.poll() is None:
            assert time.monotonic() < deadline, "no update within 180 s"
            time.sleep(0.5)
        assert ray.available_resources().get("CPU", 0.0) < free_before  # its actors hold CPUs
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "checkpoint saved" in err and "Traceback" not in err, err[-2000:]
    assert list_checkpoints(run / "checkpoints")
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0.0) < free_before:
        assert time.monotonic() < deadline, "the run's actors still hold CPUs"
        time.sleep(0.5)
