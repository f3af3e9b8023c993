"""PPO with invalid-action masking, a centralized critic and seats owned by policies.

The loop reads top to bottom: :meth:`Trainer.collect` runs one rollout, :meth:`Trainer.learn`
computes GAE and runs the clipped-surrogate epochs, :meth:`Trainer.train` repeats both,
logging and checkpointing. Which policy plays which seat is the array ``owner[E, A]``
(0 = the learner); other owners are frozen :class:`Policy` objects (past snapshots, bots)
given in ``opponents``. A game reaches the trainer only through :class:`games.core.VecGame`.
"""

from __future__ import annotations

import ast
import collections
import contextlib
import math
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

import numpy as np
import torch
from torch import Tensor

from games.core import (
    Batch,
    EpisodeStats,
    GameSpec,
    MultiDiscrete,
    Outcome,
    SupportsPartSteps,
    VecGame,
    concat_batches,
    slice_batch,
)
from games.options import to_mapping
from selfplay.allocator import keep_freed_memory
from selfplay.checkpoint import CheckpointError, list_checkpoints, load_checkpoint, save_checkpoint
from selfplay.config import TrainConfig
from selfplay.device import resolve_device
from selfplay.distributions import GridMaskIndex
from selfplay.inference import NumpyActorCritic, supports
from selfplay.interrupts import Terminated
from selfplay.losses import explained_variance, gae, ppo_loss
from selfplay.networks import ActorCritic
from selfplay.normalize import RewardScaler
from selfplay.optim import FlatAdam
from selfplay.rollout import RolloutBuffer, torch_dtype
from selfplay.tracking import MetricSink, Progress, RunDir

# acting for one part of the envs: (step, batch, learner seats [E', A], first env) -> actions
ActFn = Callable[[int, Batch, np.ndarray, int], np.ndarray]


def group_parts(num_parts: int, groups: int) -> list[list[int]]:
    """``num_parts`` part indices split into ``groups`` runs of neighbours (sizes differ by at
    most one; fewer groups if there are fewer parts)."""
    groups = max(1, min(groups, num_parts))
    edges = np.linspace(0, num_parts, groups + 1).round().astype(int)
    return [list(range(a, b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def buf_np(tensor: Tensor) -> np.ndarray:
    """A NumPy view sharing memory with a CPU tensor."""
    return tensor.numpy()


class Policy(Protocol):
    """Anything that picks actions for a set of seats: a frozen network or a scripted bot."""

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        """``obs [N, ...]`` -> actions ``[N, *action_shape]``."""
        ...


class FrozenPolicy:
    """A network policy with fixed weights (a league snapshot or a loaded checkpoint)."""

    def __init__(self, agent: ActorCritic, deterministic: bool = False,
                 generator: torch.Generator | None = None) -> None:
        self.agent = agent.eval()
        self.device = next(agent.parameters()).device
        self.deterministic = deterministic
        if generator is not None and generator.device.type != self.device.type:
            raise ValueError(f"generator on {generator.device} for a policy on {self.device}")
        self.generator = generator

    @torch.inference_mode()
    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        obs_t = self.agent.normalize_obs(torch.from_numpy(obs).to(self.device))
        mask_t = torch.from_numpy(mask).to(self.device) if mask is not None else None
        dist = self.agent.dist(obs_t, mask_t)
        action = dist.mode() if self.deterministic else dist.sample(self.generator)
        return action.cpu().numpy()


class TrainingInterrupted(Exception):
    """Raised after SIGINT/SIGTERM once the checkpoint is safely written."""

    def __init__(self, signum: int, checkpoint: Path | None) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.checkpoint = checkpoint


@dataclass
class EpisodeLog:
    """Recent finished episodes of the learner's seats."""

    window: int
    returns: collections.deque[float] = field(init=False)
    lengths: collections.deque[int] = field(init=False)
    outcomes: collections.deque[int] = field(init=False)
    count: int = 0

    def __post_init__(self) -> None:
        self.returns = collections.deque(maxlen=self.window)
        self.lengths = collections.deque(maxlen=self.window)
        self.outcomes = collections.deque(maxlen=max(self.window, 100))

    def add(self, stats: EpisodeStats, learner: np.ndarray) -> None:
        keep = learner[stats.env, stats.seat]
        if not keep.any():
            return
        self.returns.extend(stats.ret[keep].tolist())
        self.lengths.extend(stats.length[keep].tolist())
        self.outcomes.extend(stats.outcome[keep].tolist())
        self.count += int(keep.sum())

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {"episodes": float(self.count)}
        if self.returns:
            out["episode/return_mean"] = float(np.mean(self.returns))
            out["episode/length_mean"] = float(np.mean(self.lengths))
        decided = [o for o in self.outcomes if o != Outcome.NONE]
        if decided:
            arr = np.asarray(decided)
            out["episode/win_rate"] = float(np.mean(arr == Outcome.WIN))
            out["episode/draw_rate"] = float(np.mean(arr == Outcome.DRAW))
            out["episode/loss_rate"] = float(np.mean(arr == Outcome.LOSS))
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"returns": list(self.returns), "lengths": list(self.lengths),
                "outcomes": list(self.outcomes), "count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for window, saved in ((self.returns, state["returns"]), (self.lengths, state["lengths"]),
                              (self.outcomes, state["outcomes"])):
            window.clear()
            window.extend(saved)
        self.count = int(state["count"])


class Timer:
    """Named wall-clock sections (env, inference, learn) summed per update."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = collections.defaultdict(float)

    def add(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.totals[name] += now - since
        return now

    def pop(self) -> dict[str, float]:
        out = dict(self.totals)
        self.totals.clear()
        return out


class Trainer:
    """Owns the game, the learner, the optimizer and all state a checkpoint must hold."""

    def __init__(self, config: TrainConfig, game: VecGame, run: RunDir | None = None) -> None:
        self.config = config
        self.game = game
        self.spec: GameSpec = game.spec
        self.run = run
        torch.set_num_threads(config.torch_threads)
        random.seed(config.seed)
        np.random.seed(config.seed % 2**32)
        torch.manual_seed(config.seed)
        self.rng = np.random.default_rng(config.seed)
        self.sample_gen = torch.Generator().manual_seed(config.seed + 1)
        self.device = resolve_device(config.device)
        if config.keep_freed_memory and self.device.type == "cpu":
            keep_freed_memory()
        # actions are drawn on the network's device; on CPU that is sample_gen itself
        self.act_gen = (self.sample_gen if self.device.type == "cpu" else
                        torch.Generator(self.device).manual_seed(config.seed + 2))
        self.agent = ActorCritic(self.spec, config.network, config.normalize).to(self.device)
        self.optimizer = FlatAdam(self.agent, lr=config.ppo.learning_rate,
                                  eps=config.ppo.adam_eps)
        e, a = self.spec.num_envs, self.spec.num_seats
        self.owner = np.zeros((e, a), np.int64)  # [E, A] 0 = learner
        self.opponents: dict[int, Policy] = {}
        self.on_episodes: list[Callable[[Trainer, EpisodeStats], None]] = []
        self.after_update: list[Callable[[Trainer], dict[str, float]]] = []
        # state of attached components (the league) saved with each checkpoint, by name; what
        # a resumed checkpoint held for them waits in restored_extra until they attach
        self.extra_state: dict[str, Callable[[], Any]] = {}
        self.restored_extra: dict[str, Any] = {}
        self.reward_scaler = (RewardScaler((e, a), config.ppo.gamma, config.normalize.clip_reward)
                              if config.normalize.reward else None)
        obs_dtype = (torch.float32 if self.agent.obs_rms is not None
                     else torch_dtype(self.spec.obs_dtype))
        critic_shape = self.spec.state_shape if self.agent.critic_reads_state else None
        critic_dtype = (torch.float32 if self.agent.state_rms is not None
                        else torch_dtype(self.spec.state_dtype))
        self.buffer = RolloutBuffer(self.spec, config.ppo.num_steps, obs_dtype, critic_shape,
                                    critic_dtype)
        # NumPy views of the buffer: cheap per-step writes from the acting loop
        self._np_obs = buf_np(self.buffer.obs)
        self._np_mask = buf_np(self.buffer.mask) if self.buffer.mask is not None else None
        self._np_actions = buf_np(self.buffer.actions)
        self._np_logprobs = buf_np(self.buffer.logprobs)
        self._np_values = buf_np(self.buffer.values)
        self._np_rewards = buf_np(self.buffer.rewards)
        self._np_dones = buf_np(self.buffer.dones)
        self._np_trained = buf_np(self.buffer.trained)
        self.fast_policy = (NumpyActorCritic(self.agent)
                            if config.fast_inference and self.device.type == "cpu"
                            and supports(self.agent) else None)
        self.episodes = EpisodeLog(config.log.return_window)
        self.timer = Timer()
        self.global_step = 0
        self.update = 0
        self.batch: Batch = game.reset(seed=config.seed)
        self._stop_signal: int | None = None
        # parts of the envs step in their own processes while the others' actions are computed
        self.pipelined = (config.pipeline and isinstance(game, SupportsPartSteps)
                          and len(game.parts) > 1)

    # ----------------------------------------------------------------- derived sizes

    @property
    def steps_per_update(self) -> int:
        return self.config.ppo.num_steps * self.spec.num_envs

    @property
    def num_updates(self) -> int:
        return max(1, math.ceil(self.config.total_steps / self.steps_per_update))

    # ----------------------------------------------------------------- acting

    def _critic_input(self, obs_n: Tensor, state: np.ndarray | None, update: bool) -> Tensor:
        """Critic input for flattened rows ``[N, ...]`` (global state or the actor's obs)."""
        if not self.agent.critic_reads_state:
            return obs_n
        assert state is not None
        state_t = torch.from_numpy(state).reshape(-1, *self.spec.state_shape)  # type: ignore[misc]
        state_t = state_t.to(self.device, non_blocking=True)
        return self.agent.normalize_critic_input(obs_n, state_t, update=update)

    @torch.inference_mode()
    def _bootstrap_truncated(self, batch: Batch, reward: np.ndarray) -> None:
        """Add ``gamma * V(final obs)`` to the reward of truncated (not terminated) episodes."""
        cut = batch.truncated & ~batch.terminated
        if not cut.any() or batch.final_obs is None:
            return
        envs = np.flatnonzero(cut)
        a = self.spec.num_seats
        obs = torch.from_numpy(batch.final_obs[envs]).reshape(len(envs) * a,
                                                              *self.spec.obs_shape)
        obs = obs.to(self.device)
        obs_n = self.agent.normalize_obs(obs)
        state = batch.final_state[envs] if batch.final_state is not None else None
        critic_in = self._critic_input(obs_n, state, update=False)
        value = self.agent.value(critic_in).reshape(len(envs), a).cpu().numpy()
        reward[envs] += self.config.ppo.gamma * value

    def collect(self) -> None:
        """Fill the rollout buffer with ``num_steps`` steps of every env."""
        cfg = self.config
        act = self._act_numpy if self.fast_policy is not None else self._act_torch
        acting_threads = cfg.acting_threads or cfg.torch_threads
        torch.set_num_threads(acting_threads)
        try:
            if self.pipelined:
                self._collect_pipelined(act)
            else:
                self._collect_steps(act)
        finally:
            torch.set_num_threads(cfg.torch_threads)

    def _collect_steps(self, act: ActFn) -> None:
        """Act for every env, step every env, ``num_steps`` times."""
        timer = self.timer
        tick = time.perf_counter()
        for t in range(self.config.ppo.num_steps):
            actions = self._act_part(t, self.batch, 0, act)
            tick = timer.add("inference", tick)
            batch = self.game.step(actions)
            tick = timer.add("env", tick)
            self.batch = batch
            self._record_step(t, batch, 0)
            tick = timer.add("env", tick)

    def _collect_pipelined(self, act: ActFn) -> None:
        """As :meth:`_collect_steps`, but the envs' parts (worker processes) are split into
        ``pipeline_groups`` groups, and each group steps while the actions of the others are
        computed, one forward pass per group (double-buffered sampling with 2). Every env
        follows the same policy as in lockstep; random draws come in another order and running
        normalization statistics are updated group by group."""
        game = cast(SupportsPartSteps, self.game)
        parts = game.parts
        groups = group_parts(len(parts), self.config.pipeline_groups)
        timer = self.timer
        batches = [slice_batch(self.batch, a, b) for a, b in parts]
        pending = [False] * len(parts)
        t = 0
        tick = time.perf_counter()
        try:
            for t in range(self.config.ppo.num_steps):
                for group in groups:
                    for p in group:
                        if pending[p]:  # its step t - 1 ran while the other groups acted
                            pending[p] = False
                            batches[p] = game.step_part_wait(p)
                            tick = timer.add("env", tick)
                            self._record_step(t - 1, batches[p], parts[p][0])
                            tick = timer.add("env", tick)
                    start = parts[group[0]][0]
                    joined = (batches[group[0]] if len(group) == 1 else concat_batches(
                        [batches[p] for p in group], [parts[p][0] - start for p in group]))
                    tick = timer.add("env", tick)
                    actions = self._act_part(t, joined, start, act)
                    tick = timer.add("inference", tick)
                    for p in group:
                        a, b = parts[p]
                        game.step_part_async(p, actions[a - start:b - start])
                        pending[p] = True
                    tick = timer.add("env", tick)
        except BaseException:
            for part in [q for q, busy in enumerate(pending) if busy]:
                with contextlib.suppress(Exception):  # collect steps in flight: no stale replies
                    game.step_part_wait(part)
            raise
        for p, (start, _) in enumerate(parts):
            if pending[p]:
                batches[p] = game.step_part_wait(p)
                self._record_step(t, batches[p], start)
        timer.add("env", tick)
        self.batch = concat_batches(batches, [start for start, _ in parts])

    def _act_part(self, t: int, batch: Batch, start: int, act: ActFn) -> np.ndarray:
        """Actions of envs ``start..start+len(batch)`` at step ``t`` (the learner's from
        ``act``, which fills their buffer rows; the other seats' from their owners)."""
        owner = self.owner[start:start + batch.obs.shape[0]]
        learner = (owner == 0) & batch.alive  # [E', A]
        actions = act(t, batch, learner, start)
        if not learner.all():
            actions = self._opponent_actions(batch, actions, owner)
        self._np_trained[t, start:start + len(learner)] = learner
        return actions

    def _record_step(self, t: int, batch: Batch, start: int) -> None:
        """Rewards, dones and finished episodes of step ``t`` for envs ``start..``."""
        e = batch.obs.shape[0]
        envs = slice(start, start + e)
        self.global_step += e
        done = batch.terminated | batch.truncated
        reward = batch.reward
        if self.reward_scaler is not None:
            reward = self.reward_scaler(reward, done, envs, self._np_trained[t, envs])
        elif batch.truncated.any():
            reward = reward.copy()
        self._bootstrap_truncated(batch, reward)
        self._np_rewards[t, envs] = reward
        self._np_dones[t, envs] = done[:, None]
        if len(batch.episodes.env):
            episodes = batch.episodes
            if start:
                episodes = episodes._replace(env=episodes.env + start)
            self.episodes.add(episodes, self.owner == 0)
            for hook in self.on_episodes:
                hook(self, episodes)

    def _act_numpy(self, t: int, batch: Batch, learner: np.ndarray,
                   start: int = 0) -> np.ndarray:
        """Act for every seat with the NumPy mirror of a small MLP; fill buffer slot ``t``
        (rows of envs ``start..start+len(batch)``)."""
        spec, agent, fast = self.spec, self.agent, self.fast_policy
        assert fast is not None
        e, a = batch.obs.shape[0], spec.num_seats
        envs = slice(start, start + e)
        obs = batch.obs.reshape(e * a, *spec.obs_shape)
        if agent.obs_rms is not None:
            agent.obs_rms.update_np(obs if learner.all() else obs[learner.reshape(-1)])
            obs = agent.obs_rms.normalize_np(obs, self.config.normalize.clip_obs)
        mask = batch.action_mask
        flat_mask = mask.reshape(e * a, -1) if mask is not None else None
        action, logprob, value = fast.act(obs, flat_mask, self.rng)
        self._np_obs[t, envs] = obs.reshape(e, a, *spec.obs_shape)
        if mask is not None and self._np_mask is not None:
            self._np_mask[t, envs] = mask
        actions = action.reshape(e, a, *spec.action_space.action_shape)
        self._np_actions[t, envs] = actions
        self._np_logprobs[t, envs] = logprob.reshape(e, a)
        self._np_values[t, envs] = value.reshape(e, a)
        return actions

    @torch.inference_mode()
    def _act_torch(self, t: int, batch: Batch, learner: np.ndarray,
                   start: int = 0) -> np.ndarray:
        """Act for the learner's live seats with one forward pass; fill buffer slot ``t``
        (rows of envs ``start..start+len(batch)``).

        Seats the learner does not play this step (an opponent's, a dead one, a turn-based
        game's idle one) skip the network: their actions are zeros, overwritten by their
        owner's, and their buffer rows are never trained on.
        """
        spec, agent, buf = self.spec, self.agent, self.buffer
        e, a = batch.obs.shape[0], spec.num_seats
        n = e * a
        envs = slice(start, start + e)
        act_shape = spec.action_space.action_shape
        rows = learner.reshape(-1)
        pick = None if rows.all() else torch.from_numpy(np.flatnonzero(rows))
        obs_host = torch.from_numpy(batch.obs).reshape(n, *spec.obs_shape)
        mask_host = (torch.from_numpy(batch.action_mask).reshape(n, *spec.action_space.mask_shape)
                     if batch.action_mask is not None else None)
        if mask_host is not None and buf.mask is not None:
            buf.mask[t, envs].view(n, *mask_host.shape[1:]).copy_(mask_host)
        state = batch.state
        obs, mask = obs_host, mask_host
        if pick is not None:
            obs = obs_host[pick]
            mask = mask_host[pick] if mask_host is not None else None
            if state is not None and self.agent.critic_reads_state:
                state = state.reshape(n, *state.shape[2:])[pick.numpy()]
        if self.device.type != "cpu":
            obs = obs.to(self.device, non_blocking=True)
            mask = mask.to(self.device, non_blocking=True) if mask is not None else None
        if agent.obs_rms is not None:
            agent.obs_rms.update(obs)
        obs_n = agent.normalize_obs(obs)
        critic_in = self._critic_input(obs_n, state, update=True)
        dist, value_n = agent.forward_all(obs_n, mask, critic_in)
        action = dist.sample(self.act_gen)
        small = torch.stack([dist.log_prob(action), agent.from_value_space(value_n)]).cpu()
        action = action.cpu()
        obs_buf = buf.obs[t, envs].view(n, *spec.obs_shape)
        if agent.obs_rms is None:  # the buffer holds the raw observation: all rows at once
            obs_buf.copy_(obs_host)
        elif pick is None:
            obs_buf.copy_(obs_n)
        else:
            obs_buf.index_copy_(0, pick, obs_n.cpu())
        if buf.critic_in is not None:
            critic_buf = buf.critic_in[t, envs].view(n, *critic_in.shape[1:])
            if pick is None:
                critic_buf.copy_(critic_in)
            else:
                critic_buf.index_copy_(0, pick, critic_in.cpu())
        actions = buf.actions[t, envs].view(n, *act_shape)
        logprobs, values = buf.logprobs[t, envs].view(n), buf.values[t, envs].view(n)
        if pick is None:
            actions.copy_(action)
            logprobs.copy_(small[0])
            values.copy_(small[1])
        else:
            actions.zero_().index_copy_(0, pick, action)
            logprobs.zero_().index_copy_(0, pick, small[0])
            values.zero_().index_copy_(0, pick, small[1])
        return actions.numpy().reshape(e, a, *act_shape).copy()

    def _opponent_actions(self, batch: Batch, actions: np.ndarray,
                          owner: np.ndarray) -> np.ndarray:
        """Overwrite the actions of seats owned by other policies (one pass per policy);
        ``owner [E', A]`` are the owners of ``batch``'s seats."""
        for owner_id in np.unique(owner):
            if owner_id == 0:
                continue
            policy = self.opponents.get(int(owner_id))
            if policy is None:
                raise RuntimeError(f"seat owner {owner_id} has no policy in trainer.opponents")
            sel = (owner == owner_id) & batch.alive
            if not sel.any():
                continue
            mask = batch.action_mask[sel] if batch.action_mask is not None else None
            state = batch.state[sel] if batch.state is not None else None
            actions[sel] = policy.act(batch.obs[sel], mask, state)
        return actions

    # ----------------------------------------------------------------- learning

    @torch.inference_mode()
    def _last_values(self) -> Tensor:
        n = self.spec.num_envs * self.spec.num_seats
        obs = torch.from_numpy(self.batch.obs).reshape(n, *self.spec.obs_shape)
        obs_n = self.agent.normalize_obs(obs.to(self.device))
        critic_in = self._critic_input(obs_n, self.batch.state, update=False)
        return self.agent.value(critic_in).cpu()

    def learn(self) -> dict[str, float]:
        """GAE, then ``update_epochs`` passes of minibatch PPO updates."""
        cfg, buf, agent = self.config.ppo, self.buffer, self.agent
        t_steps, e, a = buf.shape
        n = e * a
        lam: float | Tensor = cfg.gae_lambda
        if not bool(buf.trained.all()):
            # turn-based seats: skip idle steps in each seat's chain (see losses.gae)
            acts_next = torch.cat([buf.trained[1:], torch.from_numpy(
                (self.owner == 0) & self.batch.alive)[None]]).view(t_steps, n)
            lam = torch.where(acts_next, cfg.gae_lambda, 1.0)
        advantages, returns = gae(buf.rewards.view(t_steps, n), buf.values.view(t_steps, n),
                                  buf.dones.view(t_steps, n), self._last_values(),
                                  cfg.gamma, lam)
        trained = buf.trained.view(-1)
        rows = None if bool(trained.all()) else torch.nonzero(trained).squeeze(1)

        def take(x: Tensor) -> Tensor:
            flat = buf.flat(x) if x.dim() >= 3 and x.shape[:3] == buf.shape else x.reshape(-1)
            return (flat if rows is None else flat[rows]).to(self.device, non_blocking=True)

        b_obs = take(buf.obs)
        b_mask = take(buf.mask) if buf.mask is not None else None
        b_critic = take(buf.critic_in) if buf.critic_in is not None else b_obs
        b_actions = take(buf.actions)
        b_logprobs = take(buf.logprobs)
        b_values = take(buf.values)
        b_adv = take(advantages)
        b_returns = take(returns)
        size = b_obs.shape[0]
        if size == 0:
            return {}
        if agent.value_rms is not None:
            agent.value_rms.update(b_returns)
        b_values_vs = agent.to_value_space(b_values)
        b_returns_vs = agent.to_value_space(b_returns)

        frac = 1.0 - self.update / self.num_updates
        lr = cfg.learning_rate * frac if cfg.anneal_lr else cfg.learning_rate
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        minibatch = max(1, size // cfg.num_minibatches)
        space = agent.space
        grid_masks = (GridMaskIndex(b_mask, space.cells) if b_mask is not None
                      and isinstance(space, MultiDiscrete) and space.cells is not None else None)
        stats: dict[str, list[float]] = collections.defaultdict(list)
        stop = False
        for _epoch in range(cfg.update_epochs):
            perm = torch.randperm(size, generator=self.sample_gen).to(self.device)
            for start in range(0, size - minibatch + 1, minibatch):
                mb = perm[start:start + minibatch]
                mb_obs = b_obs[mb]
                mb_mask = (grid_masks.select(mb) if grid_masks is not None
                           else b_mask[mb] if b_mask is not None else None)
                dist, new_value = agent.forward_all(
                    mb_obs, mb_mask, mb_obs if b_critic is b_obs else b_critic[mb])
                mb_actions = b_actions[mb]
                new_logprob = dist.log_prob(mb_actions)
                loss, info = ppo_loss(new_logprob, b_logprobs[mb], b_adv[mb], new_value,
                                      b_values_vs[mb], b_returns_vs[mb], dist.entropy(mb_actions),
                                      clip_coef=cfg.clip_coef, clip_vloss=cfg.clip_vloss,
                                      vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef,
                                      norm_adv=cfg.norm_adv)
                self.optimizer.zero_grad()
                loss.backward()
                grad_norm = self.optimizer.clip_grad_norm(cfg.max_grad_norm)
                self.optimizer.step()
                for key, value in info.items():
                    stats[key].append(float(value))
                stats["grad_norm"].append(float(grad_norm))
            if cfg.target_kl is not None and np.mean(stats["approx_kl"][-1:]) > cfg.target_kl:
                stop = True
                break
        if self.fast_policy is not None:
            self.fast_policy.refresh()
        out = {f"loss/{k}": float(np.mean(v)) for k, v in stats.items()}
        out["loss/explained_variance"] = explained_variance(b_values, b_returns)
        out["loss/learning_rate"] = lr
        out["loss/early_stop"] = float(stop)
        return out

    # ----------------------------------------------------------------- the loop

    def train(self, sink: MetricSink | None = None, progress: Progress | None = None) -> None:
        """Run updates until ``total_steps``; checkpoint periodically and on SIGINT, SIGTERM
        or SIGHUP (a closed terminal; not where SIGHUP is ignored, as under ``nohup``).

        A first signal lets the update in progress finish (its rollout is trained on, so the
        checkpoint sits on an update boundary and a resumed run continues as an uninterrupted
        one would), then saves and raises :class:`TrainingInterrupted`; a second one stops at
        once (the last periodic checkpoint remains)."""
        self._stop_signal = None  # a trainer stopped by a signal may train again
        signals = [signal.SIGINT, signal.SIGTERM]
        hangup = getattr(signal, "SIGHUP", None)
        if hangup is not None and signal.getsignal(hangup) is not signal.SIG_IGN:
            signals.append(hangup)
        previous = {sig: signal.getsignal(sig) for sig in signals}

        def handler(signum: int, _frame: object) -> None:
            if self._stop_signal is not None:  # second signal: stop now
                signal.signal(signum, previous[signal.Signals(signum)])
                raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(signum)
            self._stop_signal = signum
            print(f"{signal.Signals(signum).name}: finishing update {self.update + 1}, then "
                  "saving a checkpoint (send it again to stop at once)", file=sys.stderr,
                  flush=True)

        for sig in previous:
            signal.signal(sig, handler)
        try:
            self._loop(sink, progress)
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)

    def _loop(self, sink: MetricSink | None, progress: Progress | None) -> None:
        every = self.config.checkpoint.every_updates
        while self.update < self.num_updates:
            start = time.perf_counter()
            step0 = self.global_step
            self.collect()
            tick = time.perf_counter()
            metrics = self.learn()
            self.timer.add("learn", tick)
            self.update += 1
            elapsed = time.perf_counter() - start
            metrics["perf/steps_per_second"] = (self.global_step - step0) / max(elapsed, 1e-9)
            for name, seconds in self.timer.pop().items():
                metrics[f"perf/{name}_fraction"] = seconds / max(elapsed, 1e-9)
            metrics.update(self.episodes.summary())
            for hook in self.after_update:
                metrics.update(hook(self))
            if sink is not None:
                sink.log(self.global_step, metrics)
            if progress is not None:
                ret = metrics.get("episode/return_mean")
                info = f"{metrics['perf/steps_per_second']:,.0f} steps/s"
                if ret is not None:
                    info += f"  return {ret:.1f}"
                if "episode/win_rate" in metrics:
                    info += f"  win {metrics['episode/win_rate']:.0%}"
                progress.update(self.global_step, info)
            stop = self._stop_signal
            path = None
            if self.run is not None and (self.update % every == 0 or stop is not None
                                         or self.update == self.num_updates):
                path = self.save(final=self.update == self.num_updates)
            if stop is not None and self.update < self.num_updates:
                raise TrainingInterrupted(stop, path)

    # ----------------------------------------------------------------- checkpoints

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: weights, optimizer, RNGs, counters, envs."""
        get_state = getattr(self.game, "get_state", None)
        batch = self.batch
        return {
            "game": self.spec.name,
            "config": to_mapping(self.config),
            "agent": self.agent.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "counters": {"global_step": self.global_step, "update": self.update},
            "rng": {"torch": torch.get_rng_state(), "sample": self.sample_gen.get_state(),
                    "act": self.act_gen.get_state(), "act_device": self.device.type,
                    "numpy": self.rng.bit_generator.state,
                    "python": repr(random.getstate())},
            "reward_scaler": (self.reward_scaler.state_dict()
                              if self.reward_scaler is not None else None),
            "episodes": self.episodes.state_dict(),
            "owner": self.owner.copy(),
            "game_state": get_state() if callable(get_state) else None,
            "batch": {"obs": batch.obs, "action_mask": batch.action_mask, "state": batch.state,
                      "alive": batch.alive},
            "extra": {name: get() for name, get in self.extra_state.items()},
        }

    def load_state_dict(self, state: dict[str, Any]) -> bool:
        """Restore from :meth:`state_dict`; returns whether the game state was restored."""
        if state.get("game") != self.spec.name:
            raise CheckpointError(f"checkpoint is for game {state.get('game')!r}, "
                                  f"not {self.spec.name!r}")
        try:
            self.agent.load_state_dict(state["agent"])
            self.optimizer.load_state_dict(state["optimizer"])
        except (RuntimeError, ValueError, KeyError) as exc:
            first = str(exc).strip().splitlines()[0][:200]
            raise CheckpointError(f"checkpoint does not match this network/config: {first}") \
                from exc
        self.global_step = int(state["counters"]["global_step"])
        self.update = int(state["counters"]["update"])
        torch.set_rng_state(state["rng"]["torch"])
        self.sample_gen.set_state(state["rng"]["sample"])
        if (self.act_gen is not self.sample_gen
                and state["rng"].get("act_device") == self.device.type):
            self.act_gen.set_state(state["rng"]["act"])
        self.rng.bit_generator.state = state["rng"]["numpy"]
        if state["rng"].get("python"):  # a repr of plain ints and tuples: no code runs
            random.setstate(ast.literal_eval(state["rng"]["python"]))
        if self.reward_scaler is not None and state.get("reward_scaler") is not None:
            self.reward_scaler.load_state_dict(state["reward_scaler"])
        self.episodes.load_state_dict(state["episodes"])
        self.owner[...] = state["owner"]
        self.restored_extra = dict(state.get("extra") or {})
        if self.fast_policy is not None:
            self.fast_policy.refresh()
        set_state = getattr(self.game, "set_state", None)
        if state.get("game_state") is not None and callable(set_state):
            set_state(state["game_state"])
            saved = state["batch"]
            e, a = self.spec.num_envs, self.spec.num_seats
            self.batch = Batch(obs=saved["obs"], action_mask=saved["action_mask"],
                               state=saved["state"], reward=np.zeros((e, a), np.float32),
                               terminated=np.zeros(e, bool), truncated=np.zeros(e, bool),
                               alive=saved["alive"], episodes=EpisodeStats.empty())
            return True
        # The engine cannot restore its state: start fresh episodes with a derived seed.
        self.batch = self.game.reset(seed=self.config.seed + 7919 * self.update)
        return False

    def save(self, final: bool = False) -> Path:
        """Write ``checkpoints/update_XXXXXXX.pt`` atomically; prune old ones."""
        assert self.run is not None
        directory = self.run.checkpoints
        path = directory / f"update_{self.update:07d}.pt"
        try:
            save_checkpoint(path, self.state_dict())
        except OSError as exc:
            older = list_checkpoints(directory)
            kept = f"; previous checkpoint {older[-1]} is intact" if older else ""
            message = f"saving checkpoint {path} failed: {exc.strerror or exc}{kept}"
            if final:
                raise CheckpointError(message) from exc
            print(f"warning: {message}", file=sys.stderr)
            return older[-1] if older else path
        for old in list_checkpoints(directory)[:-self.config.checkpoint.keep]:
            old.unlink(missing_ok=True)
        return path


def load_resumable(run: RunDir) -> tuple[dict[str, Any], Path]:
    """The newest checkpoint that loads; warns about corrupt newer ones."""
    errors = []
    for path in reversed(list_checkpoints(run.checkpoints)):
        try:
            return load_checkpoint(path), path
        except CheckpointError as exc:
            errors.append(str(exc))
            print(f"warning: {exc}; trying an older checkpoint", file=sys.stderr)
    if errors:
        raise CheckpointError(f"no usable checkpoint in {run.checkpoints}: {errors[0]}")
    raise CheckpointError(f"no checkpoint in {run.checkpoints}; nothing to resume")
