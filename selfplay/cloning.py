"""Behaviour cloning: the actor-critic network learns teachers' moves and their games' values.

:class:`Cloner` is an :class:`~selfplay.run_loop.Algorithm`: each update it steps the
teacher game (a :class:`~games.core.SupportsTeachers` game: scripted bots or replays)
``bc.num_steps`` times into preallocated time-major buffers ``[T, E, A, ...]``, then runs
``bc.epochs x bc.minibatches`` gradient steps of the masked cross-entropy of the teachers'
actions (:mod:`selfplay.bc_loss`) plus the value head's loss on discounted returns
(:func:`selfplay.losses.gae`) of the game's own rewards, which PPO's critic learns, so that
``selfplay train --init-from`` starts from a critic on its scale (``bc.value_target:
reward``), or of the games' outcomes (``outcome``: +1 win, -1 loss, 0 otherwise, on the step
an episode ends).
Every ``bc.validate_every`` updates it measures the same on a validation game (held-out replays,
or live games with another seed): positions every ``bc.validation_stride`` steps of it, played
once and kept, so each validation scores the same positions. The network is
:class:`~selfplay.networks.ActorCritic` built as ``selfplay train`` builds it, so its
checkpoints load wherever a PPO checkpoint does.
"""

from __future__ import annotations

import collections
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from torch import Tensor

from games.core import (
    Batch,
    Box,
    Discrete,
    GameError,
    MultiDiscrete,
    Outcome,
    SupportsGameProgress,
    SupportsReplayPosition,
    SupportsStaggering,
    SupportsStudents,
    SupportsTeachers,
    VecGame,
    trained_boards,
)
from games.options import to_mapping
from selfplay.allocator import keep_freed_memory
from selfplay.bc_loss import CloneTerms, balance_weights, clone_terms
from selfplay.checkpoint import CheckpointError
from selfplay.config import TrainConfig
from selfplay.device import learner_autocast, resolve_device
from selfplay.distributions import GridMaskIndex
from selfplay.evaluate import inherited_boards, start_weights
from selfplay.game_state import check_game, restore_games, saved_games, weights_mismatch
from selfplay.losses import bootstrap_truncated, explained_variance, gae, idle_at_the_end
from selfplay.networks import ActorCritic, check_board_sizes
from selfplay.optim import FlatAdam, WeightAverage
from selfplay.rollout import check_fits, rollout_bytes, step_rows, torch_dtype
from selfplay.run_loop import RunLoop, collect_and_learn
from selfplay.run_metrics import EpisodeLog, Timer
from selfplay.students import Students
from selfplay.tracking import MetricSink, Progress, RunDir

if TYPE_CHECKING:
    from selfplay.clone_league import CloneLeague

__all__ = ["Cloner", "component_names", "outcome_rewards"]


def outcome_rewards(outcome: np.ndarray) -> np.ndarray:
    """``float32``: +1 for a win, -1 for a loss, 0 for a draw or no outcome."""
    return np.where(outcome == Outcome.NONE, 0, outcome).astype(np.float32)


def component_names(game: VecGame) -> list[str]:
    """Metric names of the action's components: ``action`` for one choice, else the space's
    component names (``type``, ``move``... in microRTS; ``c0``, ``c1``... by default)."""
    space = game.spec.action_space
    return list(space.component_names) if isinstance(space, MultiDiscrete) else ["action"]


def component_sizes(game: VecGame) -> list[int]:
    """How many values each of the action's components has."""
    space = game.spec.action_space
    if isinstance(space, MultiDiscrete):
        return [int(n) for n in space.nvec]
    assert isinstance(space, Discrete)
    return [int(space.n)]


class _Sums:
    """Cloning sums of several batches, kept on the device (one sync when read)."""

    def __init__(self, sizes: list[int], device: torch.device) -> None:
        self.k, self.sizes = len(sizes), sizes
        self.values = torch.zeros(4 + 2 * self.k + 2 * sum(sizes), device=device)

    def add(self, terms: CloneTerms) -> None:
        self.values += torch.cat([torch.stack([terms.nll.detach(), terms.cells, terms.exact,
                                               terms.illegal]), terms.used, terms.correct,
                                  terms.values, terms.values_right])

    def metrics(self, prefix: str, names: list[str]) -> dict[str, float]:
        """Accuracy per component, and balanced: the mean over a component's values (those
        labelled) of the share of their labels the most likely value got right."""
        nll, cells, exact, illegal, *rest = self.values.tolist()
        k, total = self.k, sum(self.sizes)
        used, correct = rest[:k], rest[k:2 * k]
        labelled, right = rest[2 * k:2 * k + total], rest[2 * k + total:]
        out = {f"{prefix}accuracy/{name}": c / u
               for name, u, c in zip(names, used, correct, strict=True) if u > 0}
        start = 0
        for name, size in zip(names, self.sizes, strict=True):
            pairs = [(r, n) for r, n in zip(right[start:start + size],
                                            labelled[start:start + size], strict=True) if n > 0]
            start += size
            if pairs:
                out[f"{prefix}balanced_accuracy/{name}"] = sum(r / n for r, n in pairs) / len(
                    pairs)
        if cells > 0:
            out[f"{prefix}accuracy/cell"] = exact / cells
            out[f"{prefix}loss"] = nll / cells
        out[f"{prefix}labelled_cells"] = cells
        out[f"{prefix}illegal_labels"] = illegal
        return out


class _Positions(NamedTuple):
    """Validation positions of one step: the imitated live seats' rows."""

    obs: Tensor
    mask: Tensor | None
    labels: Tensor


_NO_PROGRESS = ("bc.phase_weights: {}'s teacher games cannot tell how far their games have "
                "gone; drop bc.phase_weights")


class Cloner:
    """Owns the teacher game, the network, the optimizer and all a checkpoint must hold."""

    def __init__(self, config: TrainConfig, game: VecGame, validation: VecGame | None = None,
                 validation_seed: int = 0, run: RunDir | None = None) -> None:
        if not isinstance(game, SupportsTeachers):
            raise GameError(f"{game.spec.name} has no teachers' actions to clone")
        if isinstance(game.spec.action_space, Box):
            raise GameError(f"behaviour cloning needs discrete actions; {game.spec.name} has "
                            "continuous ones")
        if config.bc.student_share > 0 and not isinstance(game, SupportsStudents):
            raise GameError(f"{game.spec.name}'s teacher games cannot let the learner play "
                            "their seats; bc.student_share needs live teachers")
        if config.bc.phase_weights and not isinstance(game, SupportsGameProgress):
            raise GameError(_NO_PROGRESS.format(game.spec.name))
        self.config = config
        self.bc = config.bc
        # the value targets' discount: bc.gamma, else PPO's (the critic PPO goes on training)
        self.gamma = config.bc.gamma if config.bc.gamma is not None else config.ppo.gamma
        self.game = game
        self.validation = validation
        self.validation_seed = validation_seed
        self._validation_positions: list[_Positions] | None = None
        self.spec = spec = game.spec
        torch.set_num_threads(config.torch_threads)
        torch.manual_seed(config.seed)
        self.sample_gen = torch.Generator().manual_seed(config.seed + 1)
        self.progress: float | None = None
        """The share of the run done (0 to 1) where the caller budgets it by something else
        than ``bc.total_steps`` (a wall-clock budget, say); None: update / num_updates."""
        self.device = resolve_device(config.device)
        if config.keep_freed_memory and self.device.type == "cpu":
            keep_freed_memory()  # as training does: large tensors without page faults
        self.agent = ActorCritic(spec, config.network, config.normalize).to(self.device)
        check_board_sizes(self.agent, trained_boards(game, spec))
        self.optimizer = FlatAdam(self.agent, lr=self.bc.learning_rate, eps=self.bc.adam_eps)
        # boards the network started from (init_from) learned on: kept in its checkpoints
        self.inherited_boards: dict[str, list[int]] = {}
        self.average = (WeightAverage(self.optimizer, self.agent, self.bc.weight_average)
                        if self.bc.weight_average > 0 else None)
        """bc.weight_average: the weights the run gives out (checkpoints, snapshots,
        validation)"""
        self.components = component_names(game)
        self.sizes = component_sizes(game)
        # counted labels of each component value so far (bc.balance's weights come from them)
        self.label_counts = torch.zeros(sum(self.sizes), dtype=torch.float64)
        t, e, a = self.bc.num_steps, spec.num_envs, spec.num_seats
        self.shape = (t, e, a)
        space = spec.action_space
        state_shape = spec.state_shape if self.agent.critic_reads_state else None
        check_fits(rollout_bytes(spec, t, torch_dtype(spec.obs_dtype), state_shape,
                                 torch_dtype(spec.state_dtype)), torch.device("cpu"),
                   f"a collection of bc.num_steps={t} x bc.num_envs={e} x {a} seats",
                   "lower bc.num_envs or bc.num_steps")
        # time-major buffers [T, E, A, ...] and NumPy views of them for the collection loop
        if validation is not None:  # the positions kept: refused now if they cannot be
            v = validation.spec
            row = (int(np.prod(v.obs_shape)) * np.dtype(v.obs_dtype).itemsize
                   + int(np.prod(v.action_space.mask_shape)) * v.has_mask
                   + int(np.prod(v.action_space.action_shape)) * 4)
            check_fits(config.bc.validation_steps * v.num_envs * v.num_seats * row,
                       torch.device("cpu"), f"validation on bc.validation_steps="
                       f"{config.bc.validation_steps} steps of {v.num_envs} games",
                       "lower bc.validation_steps or bc.num_envs")
        self.obs = torch.zeros((t, e, a, *spec.obs_shape), dtype=torch_dtype(spec.obs_dtype))
        self.state = (torch.zeros((t, e, a, *state_shape), dtype=torch_dtype(spec.state_dtype))
                      if state_shape is not None else None)
        self.mask = torch.zeros((t, e, a, *space.mask_shape), dtype=torch.bool)
        self.labels = torch.zeros((t, e, a, *space.action_shape), dtype=torch.int64)
        self.imitated = torch.zeros((t, e, a), dtype=torch.bool)
        # how far each env's game had gone at each step, where the game tells
        # (:class:`games.core.SupportsGameProgress`; bc.phase_weights reads it)
        self.game_progress: Tensor | None = None
        self.alive = torch.zeros((t, e, a), dtype=torch.bool)
        self.rewards = torch.zeros((t, e, a))
        self.dones = torch.zeros((t, e, a))
        self.episodes = EpisodeLog(config.log.return_window)
        self._all_seats = np.ones((e, a), bool)
        self.timer = Timer()
        self.global_step = 0
        self.update = 0
        self.last_metrics: dict[str, float] = {}
        self.batch: Batch = game.reset(seed=config.seed)
        if isinstance(game, SupportsGameProgress) and game.game_progress() is not None:
            self.game_progress = torch.zeros((t, e))
        elif self.bc.phase_weights:
            raise GameError(_NO_PROGRESS.format(spec.name))
        self._stagger()
        # DAgger (bc.student_share): the seats the network plays itself, drawn per game
        self.students = (Students(self.bc, game, config.seed + 2, config.log.return_window)
                         if self.bc.student_share > 0 else None)
        if self.students is not None:
            self.students.draw(np.arange(spec.num_envs), self.run_progress())
        self.loop = RunLoop(self, run, config.checkpoint)
        self.league: CloneLeague | None = None
        """snapshots rated in the league (``bc.snapshot_every``), attached by the caller once
        the run's counters are restored"""

    @property
    def steps_per_update(self) -> int:
        return self.bc.num_steps * self.spec.num_envs

    @property
    def num_updates(self) -> int:
        return max(1, math.ceil(self.bc.total_steps / self.steps_per_update))

    # ----------------------------------------------------------------- one update

    def run_progress(self) -> float:
        """The share of the run done: :attr:`progress` if set, else update / num_updates."""
        return self.progress if self.progress is not None else self.update / self.num_updates

    def collect(self) -> None:
        """Step the teacher game ``bc.num_steps`` times, recording what the teachers saw and
        did, the games' outcomes and ends. On the student seats (``bc.student_share``) the
        network's sampled actions are played instead of the teachers', whose actions there
        stay the labels."""
        game = self.game
        assert isinstance(game, SupportsTeachers)
        obs, mask, labels = self.obs.numpy(), self.mask.numpy(), self.labels.numpy()
        state = self.state.numpy() if self.state is not None else None
        imitated, alive = self.imitated.numpy(), self.alive.numpy()
        rewards, dones = self.rewards.numpy(), self.dones.numpy()
        students, progress = self.students, self.run_progress()
        tick = time.perf_counter()
        for t in range(self.bc.num_steps):
            batch = self.batch
            obs[t] = batch.obs
            if state is not None:
                state[t] = batch.state
            labels[t] = game.teacher_actions  # copied before the game reuses its arrays
            np.logical_and(game.imitate, batch.alive, out=imitated[t])
            if self.game_progress is not None:
                assert isinstance(game, SupportsGameProgress)
                self.game_progress[t] = torch.from_numpy(game.game_progress())
            if batch.action_mask is not None:
                mask[t] = batch.action_mask
                # the policy loss reads only imitated seats: with their masks alone, the
                # update's distributions skip the other seats' cells altogether
                mask[t][~imitated[t]] = False
            alive[t] = batch.alive
            tick = self.timer.add("buffers", tick)
            played = labels[t]
            if students is not None:
                rows = students.moving(imitated[t])
                if rows.any():
                    played = played.copy()
                    played[rows] = students.sample(
                        self.agent, obs[t][rows],
                        mask[t][rows] if batch.action_mask is not None else None, self.device)
                tick = self.timer.add("inference", tick)
            batch = game.step(played)
            tick = self.timer.add("env", tick)
            dones[t] = (batch.terminated | batch.truncated)[:, None]
            self._value_rewards(batch, rewards[t])
            if len(batch.episodes.env):
                self.episodes.add(batch.episodes, self._all_seats)
            if students is not None:
                students.stepped(batch, progress)
            self.batch = batch
            self.global_step += self.spec.num_envs
            tick = self.timer.add("buffers", tick)

    def phase_weights(self) -> Tensor | None:
        """``float [T, E, A]``: each collected position's ``bc.phase_weights`` entry, by the
        part of its game it comes from (None without ``bc.phase_weights``)."""
        if not self.bc.phase_weights:
            return None
        assert self.game_progress is not None
        weights = torch.tensor(self.bc.phase_weights, dtype=torch.float32)
        part = (self.game_progress.double() * len(weights)).long().clamp(0, len(weights) - 1)
        return weights[part][:, :, None].expand(self.shape).contiguous()

    def _value_rewards(self, batch: Batch, out: np.ndarray) -> None:
        """Write into ``out`` ``[E, A]`` the rewards the value head learns from the step that
        returned ``batch`` (``bc.value_target``): the game's own rewards, with ``gamma * V``
        of the final observation added where a time limit cut an episode (as PPO's rollout
        does), or the outcomes of the episodes that ended."""
        if self.bc.value_target == "reward":
            out[:] = batch.reward
            bootstrap_truncated(batch, out, self.gamma, self._values)
            return
        out[:] = 0.0
        ended = batch.episodes
        if len(ended.env):
            out[ended.env, ended.seat] = outcome_rewards(ended.outcome)

    def _critic_in(self, obs_n: Tensor, state: Tensor | None, update: bool) -> Tensor:
        return (self.agent.normalize_critic_input(obs_n, state, update=update)
                if self.agent.critic_reads_state else obs_n)

    @torch.no_grad()
    def _values(self, obs: np.ndarray | Tensor, state: np.ndarray | Tensor | None) -> Tensor:
        """Values (return units) of ``[..., *obs_shape]`` rows, flattened to ``[N]``."""
        lead = obs.ndim - len(self.spec.obs_shape)  # [E, A] or [T, E, A]
        obs_t = torch.as_tensor(obs).flatten(0, lead - 1).to(self.device)
        state_t = (torch.as_tensor(state).flatten(0, lead - 1).to(self.device)
                   if state is not None and self.state is not None else None)
        obs_n = self.agent.normalize_obs(obs_t)
        return self.agent.value(self._critic_in(obs_n, state_t, update=False)).cpu()

    def returns(self) -> Tensor:
        """``[T, E * A]`` value targets: discounted returns (``bc.gamma``) of the collected
        rewards (:meth:`_value_rewards`), bootstrapped with the value head after the last step
        (and at every step where ``bc.gae_lambda < 1``)."""
        cfg = self.bc
        t_steps, e, a = self.shape
        n = e * a
        last = self._values(self.batch.obs, self.batch.state)  # [N]
        # seats that do not act after the rollout: a turn-based seat's last move is cut, a
        # seat out of its episode bootstraps 0 (as PPO's: selfplay.losses.idle_at_the_end)
        cut, last = idle_at_the_end(self.alive.view(t_steps, n), self.dones.view(t_steps, n) > 0,
                                    torch.tensor(self.batch.alive).view(n), last,
                                    self.spec.turn_based)
        lam: float | Tensor = 1.0
        if cfg.gae_lambda < 1.0:
            values = torch.stack([self._values(self.obs[t], None if self.state is None
                                               else self.state[t]) for t in range(t_steps)])
            # turn-based seats: skip the steps where a seat is idle (see losses.gae)
            next_alive = torch.cat([self.alive[1:], torch.tensor(self.batch.alive)[None]])
            lam = torch.where(next_alive.view(t_steps, n), cfg.gae_lambda, 1.0)
        else:  # lambda 1: the values cancel out of the returns (but at a cut, below)
            values = torch.zeros(t_steps, n)
            if cut is not None and bool(cut.any()):  # the steps before bootstrap from it
                rows = cut.view(-1).nonzero().squeeze(1)  # [K] flat (t * N + n)
                obs = self.obs.reshape(t_steps * n, *self.obs.shape[3:])[rows]
                state = (self.state.reshape(t_steps * n, *self.state.shape[3:])[rows]
                         if self.state is not None else None)
                values.view(-1)[rows] = self._values(obs, state).to(values.dtype)
        _, returns = gae(self.rewards.view(t_steps, n), values, self.dones.view(t_steps, n),
                         last, self.gamma, lam, cut)
        return returns

    def learn(self) -> dict[str, float]:
        """``bc.epochs`` passes of ``bc.minibatches`` gradient steps over the collected steps
        (the rows of seats that acted)."""
        cfg, agent, device = self.bc, self.agent, self.device
        returns = self.returns()
        take = step_rows(self.alive, device)
        b_obs = take(self.obs)
        size = b_obs.shape[0]
        if size == 0:
            return {}
        if agent.obs_rms is not None:
            agent.obs_rms.update(b_obs)
        b_obs = agent.normalize_obs(b_obs)
        b_critic = self._critic_in(b_obs, take(self.state) if self.state is not None else None,
                                   update=True)
        b_mask = take(self.mask)
        b_labels = take(self.labels)
        b_imitated = take(self.imitated)
        phase_weights = self.phase_weights()
        b_phase = take(phase_weights) if phase_weights is not None else None
        b_returns = take(returns)
        if agent.value_rms is not None:
            agent.value_rms.update(b_returns)
        b_targets = agent.to_value_space(b_returns)
        space = self.spec.action_space
        grid = (GridMaskIndex(b_mask, space.cells)
                if isinstance(space, MultiDiscrete) and space.cells is not None else None)

        lr = cfg.learning_rate * ((1.0 - self.update / self.num_updates) if cfg.anneal_lr
                                  else 1.0)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        # bc.minibatches minibatches of (nearly) equal size, every row in one of them (the rows
        # where a seat acted vary in number in turn-based games)
        bounds = [size * k // cfg.minibatches for k in range(cfg.minibatches + 1)]
        sums = _Sums(self.sizes, device)
        losses: dict[str, list[Tensor]] = collections.defaultdict(list)
        seen: list[tuple[Tensor, Tensor]] = []  # first pass: (value before the step, target)
        weights = (balance_weights(self.label_counts, self.sizes, cfg.balance).to(device)
                   if cfg.balance > 0 else None)
        counted = torch.zeros(sum(self.sizes), device=device)  # this update's labels, once
        for epoch in range(cfg.epochs):
            perm = torch.randperm(size, generator=self.sample_gen).to(device)
            for start, end in zip(bounds[:-1], bounds[1:], strict=True):
                if end == start:  # fewer rows than minibatches this update
                    continue
                mb = perm[start:end]
                mb_obs = b_obs[mb]
                with learner_autocast(device, self.config.precision):
                    dist, value = agent.forward_all(
                        mb_obs, grid.select(mb) if grid is not None else b_mask[mb],
                        mb_obs if b_critic is b_obs else b_critic[mb])
                    value = value.float()  # bfloat16 under precision=bfloat16
                    terms = clone_terms(dist, b_labels[mb], b_imitated[mb], weights,
                                        b_phase[mb] if b_phase is not None else None)
                    policy_loss = terms.loss()
                    value_loss = 0.5 * (value - b_targets[mb]).square().mean()
                    loss = policy_loss + cfg.value_coef * value_loss
                self.optimizer.zero_grad()
                loss.backward()
                grad_norm = self.optimizer.clip_grad_norm(cfg.max_grad_norm)
                self.optimizer.step()
                if self.average is not None:
                    self.average.update()
                sums.add(terms)
                losses["bc_policy"].append(policy_loss.detach())
                losses["bc_value"].append(value_loss.detach())
                losses["grad_norm"].append(grad_norm)
                if epoch == 0:
                    counted += terms.values
                    seen.append((agent.from_value_space(value.detach()), b_returns[mb]))
        out = {f"loss/{key}": float(torch.stack(v).mean()) for key, v in losses.items()}
        out["loss/learning_rate"] = lr
        out["loss/explained_variance"] = explained_variance(
            torch.cat([v for v, _ in seen]), torch.cat([r for _, r in seen]))
        self.label_counts += counted.cpu().double()
        metrics = sums.metrics("bc/", self.components)
        metrics.pop("bc/loss", None)  # loss/bc_policy: the same per minibatch
        metrics["bc/labelled_cells"] /= cfg.epochs  # the update's labelled cells, once
        return {**out, **metrics}

    def _held_out(self) -> list[_Positions]:
        """The validation positions: every ``bc.validation_stride``-th step of
        ``bc.validation_steps * bc.validation_stride`` steps of the validation game from its
        fixed seed (its imitated live seats), played at the first call and kept."""
        if self._validation_positions is not None:
            return self._validation_positions
        game = self.validation
        assert isinstance(game, SupportsTeachers)
        batch = game.reset(seed=self.validation_seed)
        kept: list[_Positions] = []
        stride = self.bc.validation_stride
        for t in range(self.bc.validation_steps * stride):
            if t % stride == 0:
                rows = np.flatnonzero((batch.alive & game.imitate).reshape(-1))

                def pick(x: np.ndarray, rows: np.ndarray = rows) -> Tensor:
                    return torch.from_numpy(x.reshape(-1, *x.shape[2:])[rows].copy())

                mask = pick(batch.action_mask) if batch.action_mask is not None else None
                labels = pick(game.teacher_actions).to(torch.int32)  # kept: half int64's
                kept.append(_Positions(pick(batch.obs), mask, labels))
            batch = game.step(game.teacher_actions)
        if not any(len(p.obs) for p in kept):  # openings (never labelled) longer than this
            print(f"warning: validation found no imitated move in the first "
                  f"{self.bc.validation_steps * stride} steps of its games "
                  f"(bc.validation_steps x bc.validation_stride): its metrics stay empty; "
                  "raise bc.validation_steps", file=sys.stderr)
        self._validation_positions = kept
        return kept

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        """Cloning loss and accuracies on the validation positions (:meth:`_held_out`), the
        same each time, so values are comparable between updates; of the averaged weights
        with bc.weight_average."""
        if self.average is None:
            return self._validate()
        self.average.swap()
        try:
            return self._validate()
        finally:
            self.average.swap()

    def _validate(self) -> dict[str, float]:
        agent, device = self.agent, self.device
        sums = _Sums(self.sizes, device)
        for obs, mask, labels in self._held_out():
            if len(obs) == 0:
                continue
            dist = agent.dist(agent.normalize_obs(obs.to(device)),
                              mask.to(device) if mask is not None else None)
            sums.add(clone_terms(dist, labels.to(device).long(),
                                 torch.ones(len(obs), dtype=torch.bool, device=device)))
        return sums.metrics("val/", self.components)

    def run_update(self) -> dict[str, float]:
        """Collect, learn, and validate when due; the update's metrics."""
        metrics = collect_and_learn(self)
        if self.students is not None:
            metrics.update(self.students.metrics(self.run_progress()))
        summary = self.episodes.summary()
        metrics["teachers/episodes"] = summary["episodes"]
        if "episode/length_mean" in summary:
            metrics["teachers/length_mean"] = summary["episode/length_mean"]
        if self.league is not None:
            metrics.update(self.league.after_update())
        every = self.bc.validate_every
        if self.validation is not None and every > 0 and (
                self.update % every == 0 or self.update == self.num_updates):
            tick = time.perf_counter()
            metrics.update(self.validate())
            metrics["perf/validation_seconds"] = time.perf_counter() - tick
        self.last_metrics = metrics
        return metrics

    def train(self, sink: MetricSink | None = None, progress: Progress | None = None) -> None:
        """Run updates until ``bc.total_steps`` (see :meth:`RunLoop.train`)."""
        self.loop.train(sink, progress)

    def learner_weights(self) -> dict[str, Tensor]:
        """The network's weights (a league snapshot's): the averaged ones with
        bc.weight_average."""
        if self.average is not None:
            return self.average.module_state(self.agent)
        return self.agent.state_dict()

    def close(self) -> None:
        """Close the league (its rater) and the teacher and validation games."""
        if self.league is not None:
            self.league.close()
            self.league = None
        self.game.close()
        if self.validation is not None:
            self.validation.close()

    # ----------------------------------------------------------------- checkpoints

    def start_from(self, path: Path) -> None:
        """Start from the network of checkpoint ``path`` (``init_from``: cloning on from an
        earlier clone or a PPO run, say with students playing): its weights and normalization
        statistics; the optimizer, counters and label counts stay fresh."""
        self.inherited_boards = start_weights(self.agent, self.spec, path,
                                              self.config.game.options, self.config.network)
        if self.average is not None:  # the average starts at the weights started from
            self.average = WeightAverage(self.optimizer, self.agent, self.bc.weight_average)

    def state_dict(self) -> dict[str, Any]:
        """Weights (under ``agent``, with the run's config and game, as PPO's checkpoints),
        optimizer, counters, generators, episode log and the teacher game's state."""
        game, batch = self.game, self.batch
        return {
            "game": self.spec.name,
            "config": to_mapping(self.config),
            # those of the network started from, too
            "boards": {**self.inherited_boards, **trained_boards(game, self.spec)},
            "agent": self.learner_weights(),
            # with bc.weight_average: the trained weights under the average in ``agent``
            "trained_agent": self.agent.state_dict() if self.average is not None else None,
            "weight_average": self.average.state_dict() if self.average is not None else None,
            "algorithm": "bc",
            "optimizer": self.optimizer.state_dict(),
            "counters": {"global_step": self.global_step, "update": self.update},
            "rng": {"torch": torch.get_rng_state(), "sample": self.sample_gen.get_state()},
            "students": (self.students.state_dict() if self.students is not None else None),
            "episodes": self.episodes.state_dict(),
            "label_counts": self.label_counts.clone(),
            "replay_position": (game.replay_position()
                                if isinstance(game, SupportsReplayPosition) else None),
            **saved_games(game, batch),
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore from :meth:`state_dict`; whether the teacher game's state was restored
        (else its games start afresh, with a seed derived from the update)."""
        check_game(state, self.spec)
        if state.get("algorithm") != "bc":
            raise CheckpointError("checkpoint is not a behaviour-cloning run's; continue it "
                                  "with selfplay train --resume")
        try:
            trained = state.get("trained_agent")
            self.agent.load_state_dict(trained if trained is not None else state["agent"])
            self.optimizer.load_state_dict(state["optimizer"])
            if self.average is not None:
                if state.get("weight_average") is not None:
                    self.average.load_state_dict(state["weight_average"])
                else:  # a run without the average until now: it starts at the weights
                    self.average = WeightAverage(self.optimizer, self.agent,
                                                 self.bc.weight_average)
        except (RuntimeError, ValueError, KeyError) as exc:
            raise weights_mismatch(exc) from exc
        self.global_step = int(state["counters"]["global_step"])
        self.update = int(state["counters"]["update"])
        self.inherited_boards = inherited_boards(state)
        torch.set_rng_state(state["rng"]["torch"])
        self.sample_gen.set_state(state["rng"]["sample"])
        self.episodes.load_state_dict(state["episodes"])
        counts = state.get("label_counts")  # (none in checkpoints before bc.balance)
        self.label_counts = (torch.as_tensor(counts, dtype=torch.float64).clone()
                             if counts is not None and len(counts) == sum(self.sizes)
                             else torch.zeros(sum(self.sizes), dtype=torch.float64))
        exact = self._restore_games(state)
        if self.students is not None:
            if state.get("students") is not None:
                self.students.load_state_dict(state["students"], exact, self.run_progress())
            else:  # a checkpoint of a run without students: draw the seats afresh
                self.students.draw(np.arange(self.spec.num_envs), self.run_progress())
        return exact

    def _restore_games(self, state: dict[str, Any]) -> bool:
        """The teacher game as saved where it can be (True), else where the replays were, or
        new games."""
        game = self.game
        batch = restore_games(game, self.spec, state)
        if batch is not None:
            self.batch = batch
            return True
        if state.get("replay_position") is not None and isinstance(game, SupportsReplayPosition):
            # the same place in the replays: no game learned twice, none skipped
            self.batch = game.resume_at(state["replay_position"])
            return False
        self.batch = game.reset(seed=self.config.seed + 7919 * self.update)
        self._stagger()
        return False

    def _stagger(self) -> None:
        """Spread the fresh teacher games over a game's phases (``bc.stagger_games``)."""
        if self.bc.stagger_games and isinstance(self.game, SupportsStaggering):
            self.game.stagger()
