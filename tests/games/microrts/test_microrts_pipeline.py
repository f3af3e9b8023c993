"""Double-buffered collection: microRTS envs in two worker processes, each stepping while the
trainer acts for the other, fill the same rollout as lockstep collection."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from games.batches import concat_batches, slice_batch
from selfplay.config_files import build_config
from selfplay.ppo import Trainer
from selfplay.train import build_trainer

OVERRIDES = ["log.progress=false", "log.tensorboard=false", "league.enabled=false",
             "game.num_envs=5", "game.options.map=basesWorkers8x8",
             "game.options.bots=[WorkerRush,Passive]", "game.options.num_selfplay_envs=2",
             "game.options.max_steps=16", "ppo.num_steps=36", "network.channels=[8,16]",
             "network.hidden=[16]"]


def greedy_trainer(workers: int, engine_home: object, groups: int = 2) -> Trainer:
    """A trainer whose policy is (numerically) deterministic: sampling returns the argmax, so
    the order of random draws cannot change the games."""
    config = build_config("microrts", overrides=[*OVERRIDES, f"game.options.workers={workers}",
                                                 f"pipeline_groups={groups}"], seed=3)
    trainer = build_trainer(config, None)
    with torch.no_grad():
        trainer.agent.actor_head.net[-1].weight.mul_(1e7)
        trainer.agent.actor_head.net[-1].bias.mul_(1e7)
    return trainer


@pytest.mark.parametrize(("workers", "groups", "parts"), [
    (2, 2, [(0, 2), (2, 5)]),  # double buffering, one worker per group
    # two workers per group, one forward pass each (~16 s: make bench)
    pytest.param(4, 2, [(0, 1), (1, 2), (2, 4), (4, 5)], marks=pytest.mark.slow),
], ids=["2-workers", "4-workers-in-2-groups"])
def test_pipelined_collection_fills_the_same_rollout(engine_home, workers: int, groups: int,
                                                     parts: list[tuple[int, int]]) -> None:
    lockstep = greedy_trainer(1, engine_home)
    pipelined = greedy_trainer(workers, engine_home, groups)
    calls: list[int] = []
    act = pipelined.actor._act_part  # noqa: SLF001 - counting the forward passes is the point

    def counting_act(t, batch, start, fn):  # type: ignore[no-untyped-def]
        calls.append(batch.obs.shape[0])
        return act(t, batch, start, fn)

    pipelined.actor._act_part = counting_act  # type: ignore[method-assign]  # noqa: SLF001
    try:
        assert not lockstep.actor.pipelined and pipelined.actor.pipelined
        assert pipelined.game.parts == parts  # type: ignore[attr-defined]
        episodes = 0
        for _ in range(2):  # the second collect starts from the first one's joined batch
            lockstep.collect()
            pipelined.collect()
            a, b = lockstep.buffer, pipelined.buffer
            for name in ("obs", "mask", "actions", "dones", "trained"):
                assert torch.equal(getattr(a, name), getattr(b, name)), name
            # truncated games' rewards hold the bootstrapped value of their final observation,
            # computed on batches of another size: equal up to float rounding
            torch.testing.assert_close(a.rewards, b.rewards, rtol=0, atol=1e-6)
            torch.testing.assert_close(a.values, b.values, rtol=1e-4, atol=1e-4)
            torch.testing.assert_close(a.logprobs, b.logprobs, rtol=0, atol=1e-3)
            np.testing.assert_array_equal(lockstep.batch.obs, pipelined.batch.obs)
            assert lockstep.global_step == pipelined.global_step
            episodes = lockstep.episodes.count
            assert pipelined.episodes.count == episodes
            assert list(pipelined.episodes.returns) == list(lockstep.episodes.returns)
        assert episodes >= 10  # games ended (truncated at 16 steps) on both sides of a part
        assert calls == [2, 3] * 2 * 36  # one pass per group per step, groups of 2 and 3 envs
        assert bool(lockstep.buffer.dones.any()) and bool((~lockstep.buffer.trained).any())
        metrics = pipelined.learn()
        assert np.isfinite(metrics["loss/policy_loss"])
    finally:
        lockstep.game.close()
        pipelined.game.close()


def test_slice_and_concat_batches_round_trip(engine_home) -> None:
    trainer = greedy_trainer(1, engine_home)
    try:
        trainer.collect()
        batch = trainer.batch
        parts = [slice_batch(batch, 0, 2), slice_batch(batch, 2, 5)]
        assert parts[1].obs.shape[0] == 3
        joined = concat_batches(parts, [0, 2])
        for field in ("obs", "action_mask", "reward", "terminated", "truncated", "alive"):
            np.testing.assert_array_equal(getattr(joined, field), getattr(batch, field))
        for field in batch.episodes._fields:
            np.testing.assert_array_equal(getattr(joined.episodes, field),
                                          getattr(batch.episodes, field))
    finally:
        trainer.game.close()
