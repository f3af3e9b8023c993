"""``collection: async``: the next rollout is collected while the update learns. Each rollout
is played by the weights one update old, and a league run resumed from a checkpoint ends
bit-identical to an uninterrupted one (a checkpoint learns the rollout in progress first)."""

from __future__ import annotations

import copy
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from games.registry import make_game
from league.db import LeagueDB
from selfplay.checkpoint import load_checkpoint
from selfplay.config import ConfigError
from selfplay.config_files import build_config
from selfplay.ppo import Trainer
from selfplay.rollout import RolloutBuffer
from selfplay.train import run_training


def test_each_rollout_is_played_by_the_weights_one_update_old() -> None:
    config = build_config("CartPole-v1", overrides=[
        "collection=async", "fast_inference=false", "log.progress=false",
        "log.tensorboard=false", "ppo.num_steps=32", "game.num_envs=4"], total_steps=32 * 4 * 5)
    trainer = Trainer(config, make_game("CartPole-v1", 4, config.seed))
    overlap = trainer.overlap
    assert overlap is not None
    weights = [copy.deepcopy(trainer.agent.state_dict())]
    try:
        for update in range(4):
            metrics = trainer.run_update()
            assert metrics["perf/steps_per_second"] > 0
            learned = overlap.buffers[overlap._slot ^ 1]  # the next one is being collected
            weights.append(copy.deepcopy(trainer.agent.state_dict()))

            played_by = weights[max(update - 1, 0)]  # update 0: the first weights played
            torch.testing.assert_close(_logprobs(trainer, played_by, learned),
                                       learned.logprobs, atol=1e-5, rtol=1e-5)
            if update >= 1:  # not the learner's weights of that update
                assert not torch.allclose(_logprobs(trainer, weights[update], learned),
                                          learned.logprobs, atol=1e-5)
        assert trainer.pending()
        trainer.drain()
        assert not trainer.pending() and trainer.update == 5
        assert trainer.global_step == 5 * 32 * 4
        # a run that stops abandons the rollout in progress before its next step
        overlap._start(overlap._slot)
        overlap.abandon()
        assert not trainer.pending() and not trainer.actor.abort
        step = trainer.global_step
        trainer.run_update()  # the games go on from where the abandoned rollout stopped
        assert trainer.global_step == step + 32 * 4
    finally:
        overlap.abandon()
        trainer.game.close()


def _logprobs(trainer: Trainer, state: dict[str, torch.Tensor], rollout: RolloutBuffer
              ) -> torch.Tensor:
    """``[T, E, A]`` log-probabilities of ``rollout``'s actions under the weights ``state``."""
    net = copy.deepcopy(trainer.agent)
    net.load_state_dict(state)
    obs = rollout.obs.reshape(-1, *rollout.obs.shape[3:])
    with torch.no_grad():
        dist = net.dist(net.normalize_obs(obs), None)
        return dist.log_prob(rollout.actions.reshape(-1)).reshape(rollout.logprobs.shape)


def test_an_async_league_run_resumes_exactly(tmp_path: Path) -> None:
    """Seats read once per rollout, episodes reaching the league after the rollout, the
    checkpoints after a drain: stopped and resumed, the run ends as the uninterrupted one."""
    overrides = ["log.progress=false", "log.tensorboard=false", "league.snapshot_every=2",
                 "league.eval_every=2", "league.eval_games=4", "league.self_play=0.3",
                 "league.eval_process=false", "checkpoint.every_updates=3",
                 "ppo.anneal_lr=false", "collection=async"]
    per_update = 32 * 32

    def config(updates: int):  # type: ignore[no-untyped-def]
        return build_config("tictactoe", overrides=overrides, seed=5,
                            total_steps=updates * per_update)

    run_training(config(8), tmp_path / "straight")
    run_training(config(5), tmp_path / "stopped")
    stopped = tmp_path / "stopped"
    saved = sorted(p.name for p in (stopped / "checkpoints").glob("*.pt"))
    assert saved[0] == "update_0000004.pt"  # update 3 was due: the rollout in progress first
    (stopped / "checkpoints" / "update_0000005.pt").unlink()  # lost with the crash
    run_training(config(8), resume=stopped, total_steps=8 * per_update)

    want = load_checkpoint(tmp_path / "straight" / "checkpoints" / "update_0000008.pt")
    got = load_checkpoint(stopped / "checkpoints" / "update_0000008.pt")
    assert want["counters"] == got["counters"]
    for key, tensor in want["agent"].items():
        assert torch.equal(got["agent"][key], tensor), f"{key} differs after the resume"
    league_want, league_got = want["extra"]["league"], got["extra"]["league"]
    assert np.array_equal(league_got["opponent"], league_want["opponent"])
    payoff_want = league_want["matchmaker"]["payoff"]
    assert np.array_equal(league_got["matchmaker"]["payoff"]["games"], payoff_want["games"])
    assert payoff_want["games"].sum() > 0, "no training game against a snapshot was recorded"
    with LeagueDB(tmp_path / "straight" / "league.db") as db:
        assert db.match_count() > 0


def test_async_collection_and_bot_env_draws_are_exclusive() -> None:
    with pytest.raises(ConfigError, match="collection: async and league.bot_env_pfsp"):
        build_config("tictactoe", overrides=["collection=async", "league.bot_env_pfsp=true"])


def test_metrics_are_logged_at_the_steps_learned(tmp_path: Path) -> None:
    """Guards: each update's metrics were logged at the step count read while the other
    thread was stepping (other steps in every run, ahead of what was learned), and the
    update a checkpoint drains logged a step twice."""
    import json

    steps = []
    for k in range(2):
        run = tmp_path / f"run{k}"
        run_training(build_config("CartPole-v1", overrides=[
            "collection=async", "ppo.update_epochs=1", "ppo.num_minibatches=1",
            "fast_inference=false", "checkpoint.every_updates=2", "log.progress=false",
            "log.tensorboard=false"], total_steps=4096), run_dir=run)
        steps.append([json.loads(line)["step"]
                      for line in (run / "metrics.jsonl").read_text().splitlines()])
    per_update = steps[0][0]
    assert steps[0] == steps[1] == [per_update * (u + 1) for u in range(len(steps[0]))]
    assert steps[0][-1] == 4096


def test_async_games_are_credited_to_the_opponent_they_were_played_against(
        tmp_path: Path) -> None:
    """An async rollout's games reach the league after the rollout; an env that finished
    two games in it had been given its next opponent by the first, and the second was
    credited to that one (15 % of the games in a measured run). Each game now goes to the
    opponent its env played at the step it ended; snapshots are taken at the learned steps."""
    from league.db import LeagueDB
    from selfplay.acting import StepListener
    from selfplay.league_bot_envs import LEARNER
    from selfplay.league_training import attach

    config = build_config("tictactoe", overrides=[
        "log.progress=false", "log.tensorboard=false", "league.snapshot_every=1",
        "league.eval_every=100", "league.self_play=0.0", "collection=async",
        "game.num_envs=8", "ppo.num_steps=32"], seed=2, total_steps=6 * 8 * 32)
    trainer = Trainer(config, make_game("tictactoe", 8, config.seed))
    hook = attach(trainer, tmp_path)
    assert hook is not None
    truth: list[int] = []  # the opponent of each finished learner game, read at its step

    def seen(stats, opponents) -> None:  # type: ignore[no-untyped-def]
        seat0 = (stats.seat == 0) & hook.contested[stats.env] & (stats.outcome != 2)  # NONE
        truth.extend(int(p) for p in opponents[seat0] if p != LEARNER)

    trainer.add_episode_listener(StepListener(lambda stats: hook.opponent[stats.env].copy(),
                                              seen))
    credited: list[int] = []
    record = hook.matchmaker.record
    hook.matchmaker.record = lambda a, b, outcome: (credited.append(b), record(a, b, outcome))
    try:
        trainer.train()
    finally:
        hook.close()
        trainer.game.close()
    assert len(truth) > 50 and credited == truth
    with LeagueDB(tmp_path / "league.db") as db:
        steps = sorted(int(p.metadata["env_steps"]) for p in db.players() if p.kind == "snapshot")
    assert steps == [u * 8 * 32 for u in range(1, 7)]


def test_a_stop_names_the_updates_it_finishes(tmp_path: Path) -> None:
    """SIGTERM during update N of an async run: it finishes N and learns the rollout collected
    beside it (N + 1), and says so (it said "finishing update N" and saved N + 1)."""
    run_dir = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "selfplay.cli", "train", "--game",
                             "CartPole-v1", "--total-steps", "100000000", "--run-dir",
                             str(run_dir), "--set", "collection=async", "--set",
                             "ppo.num_steps=2000", "--set", "log.tensorboard=false",
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.time() + 60
        while not (run_dir / "metrics.jsonl").exists():  # an update or more learned
            assert time.time() < deadline and proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err
    # within an update (nearly always) or between two: the update it saves is named
    found = re.search(r"SIGTERM: (?:finishing updates (\d+) and (\d+) \(the rollout in "
                      r"progress\)|learning the rollout in progress \(update (\d+)\))", err)
    assert found is not None, err
    if found[1] is not None:
        assert int(found[2]) == int(found[1]) + 1
    saved = int(found[2] or found[3])
    assert f"update_{saved:07d}.pt" in err
