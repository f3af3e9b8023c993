"""PPO with invalid-action masking, a centralized critic and seats owned by policies.

:class:`Trainer` puts three roles together: acting (:class:`~selfplay.acting.Actor` fills the
rollout buffer), learning (:class:`~selfplay.learning.PPOLearner`: GAE and the clipped-surrogate
epochs) and the run loop (:class:`~selfplay.run_loop.RunLoop`: signals, checkpoints, metrics).
Which policy plays which seat is data (:class:`~selfplay.acting.Seats`, ``owner[E, A]``,
0 = the learner). Components attached to a run (the league) see it through
:class:`TrainingContext`. A game reaches the trainer only through :class:`games.core.VecGame`
and its capabilities.

With several data-parallel ranks (:class:`~selfplay.data_parallel.Ranks`, ``torchrun``), each
rank's trainer steps its share of the envs with its own seed and learns the same update from
every rank's rollout; :meth:`Trainer.state_dict` gathers every rank's games for rank 0 to save.
"""

from __future__ import annotations

import ast
import copy
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import Tensor

from games.core import Batch, GameSpec, VecGame, trained_boards
from games.options import to_mapping
from selfplay.acting import Actor, EpisodeListener, Seats
from selfplay.allocator import keep_freed_memory
from selfplay.async_collection import AsyncCollection
from selfplay.checkpoint import CheckpointError
from selfplay.config import ConfigError, TrainConfig
from selfplay.data_parallel import Ranks
from selfplay.device import resolve_device
from selfplay.evaluate import inherited_boards, start_weights
from selfplay.game_state import check_game, restore_games, saved_games, weights_mismatch
from selfplay.handover import use_device_arrays
from selfplay.inference import NumpyActorCritic, supports
from selfplay.learning import PPOLearner, teacher_kl_coef
from selfplay.networks import ActorCritic, check_board_sizes
from selfplay.normalize import RunningMeanStd
from selfplay.optim import FlatAdam
from selfplay.rollout import RolloutBuffer, torch_dtype
from selfplay.run_loop import RunLoop, TrainingInterrupted, collect_and_learn, load_resumable
from selfplay.run_metrics import EpisodeLog, Timer
from selfplay.tracking import MetricSink, Progress, RunDir

__all__ = ["Trainer", "TrainingContext", "TrainingInterrupted", "load_resumable"]

UpdateHook = Callable[[], dict[str, float]]  # called after each update; its metrics


class TrainingContext(Protocol):
    """What a component attached to a training run (the league) sees of it."""

    config: TrainConfig
    spec: GameSpec
    game: VecGame
    device: torch.device
    act_gen: torch.Generator
    """the acting generator: opponents' policies draw from it too"""
    restored_extra: dict[str, Any]
    """what the checkpoint resumed from held for attached components, by name"""
    restored_rank_extra: dict[str, Any]
    """what it held for them of this rank (:meth:`add_rank_state`; empty when it was saved by
    another number of ranks)"""
    update: int
    ranks: Ranks
    """this process's place among the data-parallel ranks (``Ranks()``: the only one)"""

    @property
    def seats(self) -> Seats:
        """Which policy plays which seat (the league writes the opponents' seats)."""
        ...

    @property
    def global_step(self) -> int: ...

    @property
    def learned_step(self) -> int:
        """The env steps of the rollouts learned so far (async: the next one's not counted)."""
        ...

    def learner_weights(self) -> dict[str, Tensor]:
        """The learner's network weights (a snapshot's)."""
        ...

    def add_episode_listener(self, listener: EpisodeListener) -> None: ...

    def add_update_hook(self, hook: UpdateHook,
                        weights: Callable[[], dict[str, float]] | None = None) -> None:
        """Add ``hook()``'s metrics to each update's; ``weights()``: how many episodes each
        of them is over (a data-parallel run weighs the ranks' values by them)."""
        ...

    def add_state(self, name: str, get: Callable[[], Any]) -> None:
        """Save ``get()`` with each checkpoint under ``name`` (read back in ``restored_extra``)."""
        ...

    def add_rank_state(self, name: str, get: Callable[[], Any]) -> None:
        """Save every rank's ``get()`` with each checkpoint under ``name`` (each rank reads its
        own back in ``restored_rank_extra``)."""
        ...


MIN_TURN_BASED_STEPS = 8
"""the shortest rollout of a turn-based game (see :func:`~selfplay.losses.waiting_at_the_end`)"""


class Trainer:
    """Owns the game, the learner, the optimizer and all state a checkpoint must hold."""

    def __init__(self, config: TrainConfig, game: VecGame, run: RunDir | None = None,
                 ranks: Ranks | None = None) -> None:
        """``game``: this rank's envs (``game.num_envs / ranks.world`` of them, seeded with
        ``ranks.seed(config.seed)``; all of them with one process)."""
        self.config = config
        self.game = game
        self.spec: GameSpec = game.spec
        if self.spec.turn_based and config.ppo.num_steps < MIN_TURN_BASED_STEPS:
            raise ConfigError(
                f"ppo.num_steps={config.ppo.num_steps}: {self.spec.name}'s seats take turns, "
                "and a seat waiting for its turn at a rollout's end leaves its last move out "
                f"of the update (half of the moves or more below {MIN_TURN_BASED_STEPS} "
                f"steps): use {MIN_TURN_BASED_STEPS} or more")
        self.run = run
        self.ranks = ranks if ranks is not None else Ranks()
        seed = self.ranks.seed(config.seed)  # this rank's games and acting draws
        torch.set_num_threads(config.torch_threads)
        random.seed(seed)
        np.random.seed(seed % 2**32)
        torch.manual_seed(config.seed)  # the initial weights: the same on every rank
        self.rng = np.random.default_rng(seed)
        # the minibatches: the same permutations on every rank
        self.sample_gen = torch.Generator().manual_seed(config.seed + 1)
        self.device = self.ranks.device(resolve_device(config.device))
        if config.keep_freed_memory and self.device.type == "cpu":
            keep_freed_memory()
        # actions are drawn on the network's device; on CPU that is sample_gen itself, but for
        # ranks, whose acting draws differ
        self.act_gen = (self.sample_gen if self.device.type == "cpu" and self.ranks.world == 1
                        else torch.Generator(self.device).manual_seed(seed + 2))
        self.agent = ActorCritic(self.spec, config.network, config.normalize).to(self.device)
        check_board_sizes(self.agent, trained_boards(game, self.spec))
        self.ranks.broadcast_(list(self.agent.state_dict().values()))  # rank 0's, in place
        # boards the network started from (init_from) learned on: kept in its checkpoints
        self.inherited_boards: dict[str, list[int]] = {}
        # the episode metrics of every rank as the last update logged them (empty: none yet)
        self.ranks_episodes: dict[str, float] = {}
        # the network the run started from, frozen (ppo.teacher_kl_coef): its weights come from
        # init_from (start_from) or from the checkpoint resumed (load_state_dict)
        self.teacher = (copy.deepcopy(self.agent).requires_grad_(False).eval()
                        if config.ppo.teacher_kl_coef > 0 else None)
        obs_dtype = (torch.float32 if self.agent.obs_rms is not None
                     else torch_dtype(self.spec.obs_dtype))
        critic_shape = self.spec.state_shape if self.agent.critic_reads_state else None
        critic_dtype = (torch.float32 if self.agent.state_rms is not None
                        else torch_dtype(self.spec.state_dtype))
        # a game with device arrays hands them over by DLPack; the buffer keeps them there
        self.device_arrays = use_device_arrays(game, config.array_handover)
        on = self.device if self.device_arrays else None
        self.buffer = RolloutBuffer(self.spec, config.ppo.num_steps, obs_dtype, critic_shape,
                                    critic_dtype, on)
        # collection: async: a copy of the network one update old acts in a thread of its own
        # into a second buffer, with an acting generator of its own (see AsyncCollection)
        self.overlap = (AsyncCollection(self, RolloutBuffer(
            self.spec, config.ppo.num_steps, obs_dtype, critic_shape, critic_dtype, on))
            if config.collection == "async" else None)
        acting = self.overlap.behaviour if self.overlap is not None else self.agent
        if self.overlap is not None:
            self.act_gen = torch.Generator(self.device).manual_seed(seed + 2)
        self.fast_policy = (NumpyActorCritic(acting)
                            if config.fast_inference and self.device.type == "cpu"
                            and not self.device_arrays and supports(acting) else None)
        self.learner = PPOLearner(config, self.agent, self.device, self.sample_gen,
                                  self.fast_policy if self.overlap is None else None,
                                  self.teacher, self.ranks, self.spec.turn_based)
        self.actor = Actor(config, game, acting, self.buffer, self.device, self.act_gen,
                           self.rng, seed, self.ranks.world, self.device_arrays)
        self.actor.fast_policy = self.fast_policy
        self.actor.detached = self.overlap is not None
        self.update = 0
        self.after_update: list[UpdateHook] = []
        self.hook_weights: list[Callable[[], dict[str, float]]] = []
        # state of attached components (the league) saved with each checkpoint, by name; what
        # a resumed checkpoint held for them waits in restored_extra until they attach
        self.extra_state: dict[str, Callable[[], Any]] = {}
        self.restored_extra: dict[str, Any] = {}
        self.rank_extra_state: dict[str, Callable[[], Any]] = {}  # every rank's, by name
        self.restored_rank_extra: dict[str, Any] = {}
        self.loop = RunLoop(self, run, config.checkpoint, self.ranks)

    # ----------------------------------------------------------------- the roles' state

    @property
    def seats(self) -> Seats:
        return self.actor.seats

    @property
    def owner(self) -> np.ndarray:
        """``int [E, A]``: the owner of each seat (0 = the learner)."""
        return self.actor.seats.owner

    @property
    def batch(self) -> Batch:
        return self.actor.batch

    @property
    def global_step(self) -> int:
        return self.actor.global_step

    @property
    def episodes(self) -> EpisodeLog:
        return self.actor.episodes

    @property
    def timer(self) -> Timer:
        return self.actor.timer

    @property
    def reward_scaler(self) -> Any:
        return self.actor.reward_scaler

    @property
    def optimizer(self) -> FlatAdam:
        return self.learner.optimizer

    @property
    def steps_per_update(self) -> int:
        """Env steps of one update, every rank's."""
        return self.config.ppo.num_steps * self.spec.num_envs * self.ranks.world

    @property
    def num_updates(self) -> int:
        return max(1, math.ceil(self.config.total_steps / self.steps_per_update))

    # ----------------------------------------------------------------- TrainingContext

    def learner_weights(self) -> dict[str, Tensor]:
        return self.agent.state_dict()

    def add_episode_listener(self, listener: EpisodeListener) -> None:
        self.actor.listeners.append(listener)

    def add_update_hook(self, hook: UpdateHook,
                        weights: Callable[[], dict[str, float]] | None = None) -> None:
        self.after_update.append(hook)
        if weights is not None:
            self.hook_weights.append(weights)

    def add_state(self, name: str, get: Callable[[], Any]) -> None:
        self.extra_state[name] = get

    def add_rank_state(self, name: str, get: Callable[[], Any]) -> None:
        self.rank_extra_state[name] = get

    # ----------------------------------------------------------------- one update

    def collect(self) -> None:
        """Fill the rollout buffer with ``num_steps`` steps of every env; the running
        statistics updated on the way are merged across the ranks."""
        with self.ranks.merged(self.running_stats()):
            self.actor.collect()

    def running_stats(self) -> list[RunningMeanStd]:
        """The running statistics acting updates (observations, global states, returns)."""
        scaler = self.reward_scaler
        return [s for s in (self.agent.obs_rms, self.agent.state_rms,
                            scaler.stats if scaler is not None else None) if s is not None]

    def learn(self) -> dict[str, float]:
        """GAE, then ``update_epochs`` passes of minibatch PPO updates."""
        return self.learner.learn(self.buffer, self.actor.last_values(),
                                  self.actor.learner_next(), self.update / self.num_updates,
                                  self.teacher_coef())

    def teacher_coef(self) -> float:
        """This update's weight of the teacher penalty (:func:`teacher_kl_coef` at the env
        steps trained before its rollout); 0 without a teacher."""
        if self.teacher is None:
            return 0.0
        return teacher_kl_coef(self.config.ppo, self.update * self.steps_per_update,
                               self.config.total_steps)

    def run_update(self) -> dict[str, float]:
        """Collect a rollout, learn from it; the update's metrics (the hooks' included). With
        ``collection: async``, learn the rollout collected meanwhile while the next one is
        collected (:class:`AsyncCollection`)."""
        metrics = (collect_and_learn(self) if self.overlap is None
                   else self.overlap.run_update())
        episodic = self.episodes.summary()
        for hook in self.after_update:
            episodic.update(hook())
        # each rank saw its own envs; kept for the run's summary (no collective at the end)
        weights = self.episodes.weights()
        for counts in self.hook_weights:
            weights.update(counts())
        self.ranks_episodes = self.ranks.average_metrics(episodic, weights)
        metrics.update(self.ranks_episodes)
        return metrics

    def train(self, sink: MetricSink | None = None, progress: Progress | None = None) -> None:
        """Run updates until ``total_steps`` (see :meth:`RunLoop.train`)."""
        try:
            self.loop.train(sink, progress)
        finally:
            if self.overlap is not None:  # no thread left stepping the games
                self.overlap.abandon()

    @property
    def learned_step(self) -> int:
        """The env steps of the rollouts learned so far: the step an update's metrics are
        logged at (with ``collection: async`` the next rollout's steps, collected meanwhile
        in another thread, are not counted: the logged steps are the same in every run)."""
        if self.overlap is None:
            return self.global_step
        return self.update * self.steps_per_update

    def pending(self) -> bool:
        """Whether a rollout collected beside the last update waits to be learned."""
        return self.overlap is not None and self.overlap.pending()

    def overlapping(self) -> bool:
        """Whether each update collects the next rollout beside it (``collection: async``)."""
        return self.overlap is not None

    def drain(self) -> dict[str, float]:
        """Learn the rollout collected beside the last update without starting another: the
        run stands on an update boundary again (before a checkpoint); that update's metrics."""
        assert self.overlap is not None
        return self.overlap.drain()

    def save(self, final: bool = False) -> Path:
        """Write a checkpoint now (see :meth:`RunLoop.save`), after learning a rollout
        collected beside the last update."""
        if self.pending():
            self.drain()
        return self.loop.save(final)

    # ----------------------------------------------------------------- checkpoints

    def start_from(self, path: Path) -> None:
        """Start from the network of checkpoint ``path`` (``init_from``: a PPO,
        behaviour-cloning or snapshot checkpoint): its weights and normalization statistics,
        bit for bit; the optimizer and the counters stay fresh. The teacher (if any) becomes a
        frozen copy of it. A one-line :class:`CheckpointError` for a checkpoint of another game
        or of another network."""
        self.inherited_boards = start_weights(self.agent, self.spec, path,
                                              self.config.game.options, self.config.network)
        if self.teacher is not None:
            self.teacher.load_state_dict(self.agent.state_dict())
        if self.fast_policy is not None:
            self.fast_policy.refresh()

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: weights, optimizer, RNGs, counters, envs.

        With several ranks every rank takes part (each adds its games and random streams:
        :meth:`rank_state`) and rank 0's result holds them all: rank 0's at the top level, the
        others' under ``ranks``, their number under ``world``."""
        mine = self.rank_state()
        every = self.ranks.gather(mine) or [mine]
        boards = dict(self.inherited_boards)  # those of the network started from, too
        for part in every:
            boards.update(part.pop("boards"))
        return {
            "game": self.spec.name,
            "config": to_mapping(self.config),
            "boards": boards,
            "agent": self.agent.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "counters": {"global_step": self.global_step, "update": self.update},
            "extra": {name: get() for name, get in self.extra_state.items()},
            **({"teacher": self.teacher.state_dict()} if self.teacher is not None else {}),
            **every[0],
            **({"world": self.ranks.world, "ranks": every[1:]} if self.ranks.world > 1
               else {}),
        }

    def rank_state(self) -> dict[str, Any]:
        """This rank's part of a checkpoint: its games, episodes and random streams."""
        game = self.game
        batch = self.batch
        return {
            "boards": trained_boards(game, self.spec),
            "rng": {"torch": torch.get_rng_state(), "sample": self.sample_gen.get_state(),
                    "act": self.act_gen.get_state(), "act_device": self.device.type,
                    "numpy": self.rng.bit_generator.state,
                    "python": repr(random.getstate())},
            "reward_scaler": (self.reward_scaler.state_dict()
                              if self.reward_scaler is not None else None),
            "episodes": self.episodes.state_dict(),
            "owner": self.seats.state_dict(),
            "rank_extra": {name: get() for name, get in self.rank_extra_state.items()},
            **saved_games(game, batch),
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore from :meth:`state_dict`; returns whether the game state was restored.

        A checkpoint of as many ranks gives each rank its own games back; one of another
        number of ranks restores the network, optimizer, counters and running statistics,
        and the ranks start new games (rank 0 keeps the saved episode log)."""
        check_game(state, self.spec)
        if state.get("algorithm") == "bc":
            raise CheckpointError("this is a behaviour-cloning run: continue it with selfplay "
                                  "bc --resume, or start PPO from it with train --init-from")
        if self.teacher is not None and "teacher" not in state:
            raise CheckpointError("checkpoint holds no teacher network, which "
                                  "ppo.teacher_kl_coef > 0 needs (it was saved without one)")
        try:
            self.agent.load_state_dict(state["agent"])
            self.optimizer.load_state_dict(state["optimizer"])
            if self.teacher is not None:  # saved with the run: init_from is not read again
                self.teacher.load_state_dict(state["teacher"])
        except (RuntimeError, ValueError, KeyError) as exc:
            raise weights_mismatch(exc) from exc
        self.actor.global_step = int(state["counters"]["global_step"])
        self.update = int(state["counters"]["update"])
        self.inherited_boards = inherited_boards(state)
        self.sample_gen.set_state(state["rng"]["sample"])  # the same on every rank
        if self.reward_scaler is not None and state.get("reward_scaler") is not None:
            self.reward_scaler.stats.load_state_dict(state["reward_scaler"]["stats"])
        self.restored_extra = dict(state.get("extra") or {})
        if self.fast_policy is not None:
            self.fast_policy.refresh()
        if int(state.get("world", 1)) != self.ranks.world:  # saved by another number of ranks
            if self.ranks.is_main:  # every saved rank's episodes (the count went backwards)
                parts = [state["episodes"], *(r["episodes"] for r in state.get("ranks") or [])]
                self.episodes.load_state_dict({
                    key: [item for part in parts for item in part[key]]
                    for key in ("returns", "lengths", "outcomes")}
                    | {"count": sum(int(part["count"]) for part in parts)})
                self.restored_rank_extra = dict(state.get("rank_extra") or {})  # rank 0's
            self._new_games()
            return False
        rank = self.ranks.rank
        mine = state if rank == 0 else state["ranks"][rank - 1]
        self._load_rank_state(mine)
        batch = restore_games(self.game, self.spec, mine)
        if batch is not None:
            self.actor.batch = batch
            return True
        self._new_games()  # the engine cannot restore its state
        return False

    def _load_rank_state(self, mine: dict[str, Any]) -> None:
        """This rank's random streams, reward returns, episodes and seats (:meth:`rank_state`)."""
        torch.set_rng_state(mine["rng"]["torch"])
        if (self.act_gen is not self.sample_gen
                and mine["rng"].get("act_device") == self.device.type):
            self.act_gen.set_state(mine["rng"]["act"])
        self.rng.bit_generator.state = mine["rng"]["numpy"]
        if mine["rng"].get("python"):  # a repr of plain ints and tuples: no code runs
            random.setstate(ast.literal_eval(mine["rng"]["python"]))
        if self.reward_scaler is not None and mine.get("reward_scaler") is not None:
            self.reward_scaler.load_state_dict(mine["reward_scaler"])
        self.episodes.load_state_dict(mine["episodes"])
        self.seats.load_state_dict(mine["owner"])
        self.restored_rank_extra = dict(mine.get("rank_extra") or {})

    def _new_games(self) -> None:
        """Fresh episodes, with a seed derived from this rank's and the update's."""
        self.actor.reset_games(self.ranks.seed(self.config.seed) + 7919 * self.update)
