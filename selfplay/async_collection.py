"""Asynchronous collection (``collection: async``): the next rollout is collected while the
update learns from the last one.

The learner's network and a *behaviour* copy of it, one update old, take turns with two
rollout buffers. Update ``k`` learns rollout ``k`` (collected by the weights of update
``k - 1``) in the main thread while a collection thread plays rollout ``k + 1`` with the
weights of update ``k`` into the other buffer; an update takes max(collect, learn) instead of
their sum where the game steps elsewhere (worker processes, Ray actors, a GPU learner).

- **Staleness** is one update at most: the behaviour copy takes the learner's weights (and
  value statistics) each time a collection starts, and gives back the observation statistics
  it updated when it ends.
- **Off-policy correction**: the rollout stores the behaviour copy's log-probabilities and
  values; PPO's ratio is taken against them and clipped (``ppo.clip_coef``), as APPO does
  without V-trace; the update's ``loss/approx_kl`` measures the gap. GAE uses the behaviour
  copy's values, bootstrapped from the rollout's last step as it ended.
- **What the thread shares**: only the game, the buffer it fills, its own acting generator
  and the behaviour copy. The seats' owners and policies are read once when a rollout starts
  (:class:`~selfplay.acting.Actor` ``detached``), so league matchmaking during an update takes
  effect one rollout later; finished episodes reach the listeners (the league's statistics)
  in the main thread, in order, when the rollout is joined. torch's thread count is left
  alone (it is the process's).
- **Checkpoints** wait: before one is written, the rollout in progress is finished and
  learned (:meth:`drain`), and the update after a checkpoint collects before it learns, as
  the first one does. A run resumed from a checkpoint therefore continues exactly as the run
  that wrote it did; with timed checkpoints the course of a run depends on the clock.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Protocol

from selfplay.acting import Actor, CollectionAborted
from selfplay.config import ConfigError
from selfplay.data_parallel import Ranks
from selfplay.inference import NumpyActorCritic
from selfplay.learning import PPOLearner
from selfplay.networks import ActorCritic
from selfplay.rollout import RolloutBuffer
from selfplay.run_metrics import Timer

_ACTING_STATS = ("obs_rms.", "state_rms.")  # what acting updates, by state-dict prefix


class Trainer(Protocol):
    """What the overlap needs of :class:`selfplay.ppo.Trainer`."""

    agent: ActorCritic
    actor: Actor
    buffer: RolloutBuffer
    learner: PPOLearner
    fast_policy: NumpyActorCritic | None
    ranks: Ranks
    update: int

    @property
    def timer(self) -> Timer: ...

    @property
    def global_step(self) -> int: ...

    @property
    def num_updates(self) -> int: ...

    @property
    def steps_per_update(self) -> int: ...

    def collect(self) -> None: ...

    def teacher_coef(self) -> float: ...

    def run_update(self) -> dict[str, float]: ...


class AsyncCollection:
    """The two buffers, the behaviour copy and the collection thread of one trainer."""

    def __init__(self, trainer: Trainer, second: RolloutBuffer) -> None:
        if trainer.ranks.world > 1:
            raise ConfigError("collection: async runs in one process; data-parallel ranks "
                              "collect in lockstep (collection: sync)")
        self.trainer = trainer
        self.buffers = [trainer.buffer, second]
        self.behaviour: ActorCritic = copy.deepcopy(trainer.agent).requires_grad_(False)
        self._slot = 0  # the buffer the next update learns from
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._hold = False

    # ----------------------------------------------------------------- the thread

    def _give_weights(self) -> None:
        """The behaviour copy takes the learner's weights and statistics."""
        self.behaviour.load_state_dict(self.trainer.agent.state_dict())
        if self.trainer.fast_policy is not None:
            self.trainer.fast_policy.refresh()

    def _take_statistics(self) -> None:
        """The learner takes the observation statistics acting updated; the finished episodes
        go to the listeners."""
        trainer = self.trainer
        acted = {key: value for key, value in self.behaviour.state_dict().items()
                 if key.startswith(_ACTING_STATS)}
        if acted:
            trainer.agent.load_state_dict({**trainer.agent.state_dict(), **acted})
        trainer.actor.flush_episodes()

    def _start(self, slot: int) -> None:
        self._give_weights()
        self.trainer.actor.use_buffer(self.buffers[slot])
        self._error = None
        self._thread = threading.Thread(target=self._collect, name="selfplay-collect",
                                        daemon=True)
        self._thread.start()

    def _collect(self) -> None:
        try:
            self.trainer.collect()
        except BaseException as exc:  # re-raised in the main thread by wait()
            self._error = exc

    def pending(self) -> bool:
        return self._thread is not None

    def abandon(self) -> None:
        """Stop the rollout in progress before its next step and wait for it (the run is
        ending: its steps are never learned; the games stay consistent)."""
        if self._thread is None:
            return
        self.trainer.actor.abort = True
        try:
            self.wait()
        except CollectionAborted:
            pass
        finally:
            self.trainer.actor.abort = False

    def wait(self) -> None:
        """Let the collection in progress finish (its error, if any, is raised here)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        thread.join()
        self._take_statistics()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    # ----------------------------------------------------------------- updates

    def run_update(self) -> dict[str, float]:
        """Learn one rollout (collected meanwhile, or now when none is) while the next is
        collected, unless this is the run's last update or a drain."""
        trainer = self.trainer
        start = time.perf_counter()
        step0 = trainer.global_step
        if self._thread is None:  # the first update, or the first after a checkpoint
            self._start(self._slot)
        self.wait()
        rollout = self.buffers[self._slot]
        bootstrap = trainer.actor.bootstrap
        assert bootstrap is not None
        collected = trainer.timer.pop()
        if not self._hold and trainer.update + 1 < trainer.num_updates:
            self._slot ^= 1
            self._start(self._slot)
        tick = time.perf_counter()
        metrics = trainer.learner.learn(rollout, bootstrap[0], bootstrap[1],
                                        trainer.update / trainer.num_updates,
                                        trainer.teacher_coef())
        learned = time.perf_counter() - tick
        trainer.update += 1
        elapsed = max(time.perf_counter() - start, 1e-9)
        metrics["perf/steps_per_second"] = trainer.steps_per_update / elapsed
        metrics["perf/collected_steps"] = float(trainer.global_step - step0)
        for name, seconds in {**collected, "learn": learned}.items():
            metrics[f"perf/{name}_fraction"] = seconds / elapsed
        return metrics

    def drain(self) -> dict[str, float]:
        """Learn the rollout in progress without starting another (see :meth:`Trainer.drain`)."""
        self._hold = True
        try:
            return self.trainer.run_update()
        finally:
            self._hold = False
