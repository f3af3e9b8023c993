"""A worker lost mid-rollout: its lost steps are collected again, so the update learns from
``num_steps`` real steps of every env and the step count stays exact.

The workers are this machine's processes (CartPole through the generic family workers). The
transport in between reports chosen steps of one worker as lost, the way a Ray actor's death
reaches the trainer: the step's answer never comes, and the restarted worker begins new games
from a new seed. Everything else (the worker processes, the games, the trainer) is real.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import pytest

from games.core import GameError, HasLostWorkers
from games.workers.generic import FamilyWorkers
from games.workers.host import Part, WorkerRecipe
from games.workers.local import LocalWorkers
from selfplay.config_files import build_config
from selfplay.data_parallel import Ranks
from selfplay.ppo import Trainer

NUM_ENVS, NUM_STEPS, GAMMA = 4, 8, 0.98


class LosingTransport:
    """The local worker processes; worker ``worker``'s steps numbered in ``lose_at`` (from 1,
    counting every step it is given) answer as lost, and its revival resets it from the new
    seed, as Ray's restarted actor does."""

    def __init__(self, inner: LocalWorkers, worker: int, lose_at: set[int]) -> None:
        self.inner, self.worker, self.lose_at = inner, worker, lose_at
        self.spec, self.ranges = inner.spec, inner.ranges
        self.steps = 0
        self._lost: set[int] = set()
        self._command: dict[int, str] = {}
        self.revived_obs: list[np.ndarray] = []  # the new games' first observations

    def send(self, w: int, command: str, arg: Any = None) -> None:
        self._command[w] = command
        self.inner.send(w, command, arg)

    def receive(self, w: int) -> Any:
        answer = self.inner.receive(w)
        if w == self.worker and self._command[w] == "step":
            self.steps += 1
            if self.steps in self.lose_at:
                self._lost.add(w)
                raise GameError(f"cartpole: the actor of worker {w} died (injected)")
        return answer

    def join(self, parts: list[Part]) -> Any:
        from games.batches import concat_batches

        return concat_batches([p.batch for p in parts], [a for a, _ in self.ranges])

    def lost(self) -> set[int]:
        return set(self._lost)

    def revive(self, w: int, seed: int | None) -> Part:
        self._lost.discard(w)
        self.inner.send(w, "reset", seed)
        part: Part = self.inner.receive(w)
        self.revived_obs.append(part.batch.obs.copy())
        return part

    def close(self) -> None:
        self.inner.close()


def trainer_with_losses(lose_at: set[int]) -> tuple[Trainer, LosingTransport]:
    config = build_config("CartPole-v1", seed=11, overrides=[
        f"game.num_envs={NUM_ENVS}", f"ppo.num_steps={NUM_STEPS}", f"ppo.gamma={GAMMA}",
        "torch_threads=1", "log.progress=false", "log.tensorboard=false"])
    made: list[LosingTransport] = []

    def launch(recipes: list[WorkerRecipe], total: int) -> LosingTransport:
        made.append(LosingTransport(LocalWorkers(recipes, total), 1, lose_at))
        return made[0]

    game = FamilyWorkers("CartPole-v1", NUM_ENVS, config.seed, {}, 2, launch, "gym")
    return Trainer(config, game, None, Ranks()), made[0]


def rollout(trainer: Trainer) -> dict[str, np.ndarray]:
    buf = trainer.buffer
    return {name: getattr(buf, name).numpy().copy()
            for name in ("obs", "actions", "values", "rewards", "dones", "trained")}


def assert_real_transitions(obs: np.ndarray, actions: np.ndarray, dones: np.ndarray) -> None:
    """Every step of one env's rows ``[T, ...]`` that did not end its game led to the next
    row's observation under CartPole's own dynamics."""
    env = gymnasium.make("CartPole-v1").unwrapped
    env.reset(seed=0)
    for t in range(len(obs) - 1):
        if dones[t]:
            continue
        env.state = obs[t].astype(np.float64)
        after, *_ = env.step(int(actions[t]))
        np.testing.assert_allclose(after, obs[t + 1], atol=1e-5, err_msg=f"step {t}")


@pytest.fixture(scope="module")
def runs() -> Any:
    # worker 1 (envs 2, 3) loses its 3rd step (row 2), its 8th (row 7, the last) and, while
    # those are collected again, its 10th (which lands on row 7 once more)
    reference, _ = trainer_with_losses(set())
    losing, transport = trainer_with_losses({3, 8, 10})
    try:
        assert isinstance(losing.game, HasLostWorkers)
        reference.collect()
        losing.collect()
        yield rollout(reference), rollout(losing), losing, transport
    finally:
        reference.game.close()
        losing.game.close()


def test_the_lost_steps_are_collected_again(runs: Any,
                                            capfd: pytest.CaptureFixture[str]) -> None:
    _, lost_run, trainer, transport = runs
    assert len(transport.revived_obs) == 3
    assert trainer.global_step == NUM_STEPS * NUM_ENVS  # a lost step is not an env step
    assert trainer.actor.recollected == 3 * 2
    assert lost_run["trained"].all()  # every row is a real step of the learner
    for env in (2, 3):
        assert_real_transitions(lost_run["obs"][:, env, 0], lost_run["actions"][:, env, 0],
                                lost_run["dones"][:, env, 0])


def test_the_game_before_a_lost_step_ends_there_bootstrapped(runs: Any) -> None:
    reference, lost_run, _, transport = runs
    lost, kept = slice(2, 4), slice(0, 2)
    for name in ("obs", "actions", "values", "rewards", "dones"):  # before the loss: as without
        np.testing.assert_array_equal(lost_run[name][:1], reference[name][:1], name)
    # row 1 led to the observation of row 2, the last its game had: truncated, bootstrapped
    assert (lost_run["dones"][1, lost] == 1).all()
    np.testing.assert_allclose(lost_run["rewards"][1, lost],
                               reference["rewards"][1, lost] + GAMMA * reference["values"][2, lost],
                               rtol=1e-6)
    # the new games begin on row 2, where the lost step was
    np.testing.assert_array_equal(lost_run["obs"][2, lost], transport.revived_obs[0])
    # the other worker's envs are untouched up to the loss
    for name in ("obs", "actions", "rewards", "dones"):
        np.testing.assert_array_equal(lost_run[name][:3, kept], reference[name][:3, kept], name)


def test_the_update_learns_and_the_run_goes_on(runs: Any) -> None:
    _, _, trainer, _ = runs
    metrics = trainer.learn()
    assert np.isfinite(metrics["loss/policy_loss"])
    trainer.collect()  # the next rollout, with no loss, from where the refilled one ended
    assert trainer.global_step == 2 * NUM_STEPS * NUM_ENVS
    assert trainer.actor.recollected == 3 * 2
