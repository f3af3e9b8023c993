"""Learning: GAE and the clipped-surrogate PPO epochs over one rollout.

:class:`PPOLearner` owns what the update changes (the optimizer, the minibatch generator) and
nothing of acting: it reads a filled :class:`~selfplay.rollout.RolloutBuffer` and the values
after its last step, and returns the update's metrics. GAE and the loss are the pure functions
of :mod:`selfplay.losses`.

A run started from another network (``init_from``) may keep its policy near that network, the
frozen *teacher*, early on: with ``ppo.teacher_kl_coef > 0`` each minibatch's loss gains
``coef * mean KL(teacher || policy)`` over its observations (:func:`teacher_kl_coef` gives the
decayed weight of an update).

With several ranks (``torchrun``), each rank learns from its own rollout as one process would
from all of them: the data-parallel arithmetic (which rows of a minibatch a rank holds, the
summed gradients, the shared advantage statistics) is :class:`~selfplay.data_parallel.Ranks`'s.
"""

from __future__ import annotations

import collections
import sys
from typing import NamedTuple

import numpy as np
import torch
from torch import Tensor

from games.core import MultiDiscrete
from selfplay.config import ConfigError, PPOConfig, TrainConfig
from selfplay.data_parallel import Ranks
from selfplay.device import learner_autocast
from selfplay.distributions import GridMaskIndex
from selfplay.inference import NumpyActorCritic
from selfplay.kl import kl_divergence
from selfplay.losses import PPO_STATS, gae, idle_at_the_end, ppo_loss
from selfplay.networks import ActorCritic
from selfplay.optim import FlatAdam
from selfplay.rollout import RolloutBuffer, step_rows


def teacher_kl_coef(ppo: PPOConfig, step: int, total_steps: int) -> float:
    """The teacher penalty's weight after ``step`` env steps: ``ppo.teacher_kl_coef``, decayed
    linearly to 0 at ``ppo.teacher_kl_steps`` (``total_steps`` when unset), 0 from then on."""
    horizon = ppo.teacher_kl_steps if ppo.teacher_kl_steps is not None else total_steps
    return ppo.teacher_kl_coef * max(0.0, 1.0 - step / max(horizon, 1))


class Rows(NamedTuple):
    """One rank's trained rows of a rollout, ``[K, ...]`` on the learner's device."""

    obs: Tensor
    mask: Tensor | GridMaskIndex | None
    critic: Tensor | None  # the critic's input when it is not obs
    actions: Tensor
    logprobs: Tensor
    values_vs: Tensor  # old values, in the critic's value space
    returns_vs: Tensor  # value targets, in the critic's value space
    advantages: Tensor


class TrainingDiverged(ConfigError):
    """An update whose losses are NaN or infinite (its settings made the numbers overflow)."""


class PPOLearner:
    """The PPO update of one network (kept near a frozen ``teacher`` network when given);
    with ``ranks``, one rank's share of a data-parallel update."""

    def __init__(self, config: TrainConfig, agent: ActorCritic, device: torch.device,
                 sample_gen: torch.Generator,
                 fast_policy: NumpyActorCritic | None = None,
                 teacher: ActorCritic | None = None, ranks: Ranks | None = None,
                 turn_based: bool = False) -> None:
        self.config = config
        self.turn_based = turn_based  # the game's seats take turns (GameSpec.turn_based)
        self.agent = agent
        self.device = device
        self.sample_gen = sample_gen  # minibatch permutations: seeded alike on every rank
        self.fast_policy = fast_policy  # the acting mirror refreshed after each update
        self.teacher = teacher  # frozen (no gradient): the penalty's target distribution
        self.ranks = ranks if ranks is not None else Ranks()
        self.optimizer = FlatAdam(agent, lr=config.ppo.learning_rate, eps=config.ppo.adam_eps)
        self.empty_updates = 0  # updates whose rollout held no move of the learner

    def learn(self, buf: RolloutBuffer, last_values: Tensor, learner_next: np.ndarray,
              progress: float, teacher_coef: float = 0.0) -> dict[str, float]:
        """GAE, then ``update_epochs`` passes of minibatch PPO updates over ``buf``.

        ``last_values`` ``[E * A]`` are the values after the rollout's last step (bootstrap),
        ``learner_next`` ``bool [E, A]`` the learner's seats that act next (turn-based games),
        ``progress`` the share of training done before this update (learning-rate anneal).
        ``teacher_coef > 0`` adds ``teacher_coef * KL(teacher || policy)`` to each minibatch's
        loss: the forward KL of the teacher's masked action distribution on the minibatch's
        observations (legal actions only; grid actions per cell, gated components weighted by
        the teacher's action types, see :func:`~selfplay.kl.kl_divergence`), which
        is the policy's cross-entropy toward the teacher less the teacher's own entropy: 0 when
        the policy equals the teacher. The teacher reads the observations as they were stored
        (normalized with the learner's running statistics under ``normalize.obs``; they start
        as the teacher's own).

        With several ranks, ``buf`` is this rank's rollout and the minibatches are drawn from
        every rank's rows (:meth:`~selfplay.data_parallel.Ranks.shard_rows`).
        """
        cfg, agent, ranks = self.config.ppo, self.agent, self.ranks
        t_steps, e, a = buf.shape
        n = e * a
        lam: float | Tensor = cfg.gae_lambda
        trained, cut = buf.trained, None
        if not (bool(buf.trained.all()) and bool(learner_next.all())):
            # seats that do not act at every step (or after the rollout: out of their games on
            # its last step): skip idle steps in each seat's chain (see losses.gae)
            acts_next = torch.cat([buf.trained[1:], torch.from_numpy(learner_next)[None]]
                                  ).view(t_steps, n)
            lam = torch.where(acts_next, cfg.gae_lambda, 1.0)
            cut, last_values = idle_at_the_end(
                buf.trained.view(t_steps, n), buf.dones.view(t_steps, n).bool(),
                torch.from_numpy(learner_next).view(n), last_values, self.turn_based)
            if cut is not None:
                trained = buf.trained & ~cut.view_as(buf.trained)
        advantages, returns = gae(buf.rewards.view(t_steps, n), buf.values.view(t_steps, n),
                                  buf.dones.view(t_steps, n), last_values,
                                  cfg.gamma, lam, cut)
        take = step_rows(trained, self.device)
        shard = ranks.shard_rows(trained, self.device)  # this rank's rows among every rank's
        size = shard.total
        if size == 0:
            self.empty_updates += 1
            if self.empty_updates == 1 and ranks.is_main:
                print("warning: a rollout held no move of the learner to train on (no seat "
                      "it plays was alive at any step: Batch.alive, or opponents on every "
                      "seat); nothing was learned from it", file=sys.stderr)
            return {}
        b_obs = take(buf.obs)
        b_mask = take(buf.mask) if buf.mask is not None else None
        b_values = take(buf.values)
        b_returns = take(returns)
        # the clip's centre is the critic's own output when it acted, so normalized with the
        # statistics before this update (after it, a shifted mean moved the centre away from
        # the output: the clipped branch took over with no gradient)
        old_values = agent.to_value_space(b_values)
        if agent.value_rms is not None:
            with ranks.merged([agent.value_rms]):
                agent.value_rms.update(b_returns)
        space = agent.space
        grid_masks = (GridMaskIndex(b_mask, space.cells) if b_mask is not None
                      and isinstance(space, MultiDiscrete) and space.cells is not None else None)
        rows = Rows(b_obs, grid_masks if grid_masks is not None else b_mask,
                    take(buf.critic_in) if buf.critic_in is not None else None,
                    take(buf.actions), take(buf.logprobs), old_values,
                    agent.to_value_space(b_returns), take(advantages))

        frac = 1.0 - progress
        lr = cfg.learning_rate * frac if cfg.anneal_lr else cfg.learning_rate
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        # ppo.num_minibatches minibatches of (nearly) equal size, every row in one of them
        # (turn-based seats train a varying number of rows per update)
        bounds = [size * k // cfg.num_minibatches for k in range(cfg.num_minibatches + 1)]
        names = [*PPO_STATS, *(["teacher_kl"] if teacher_coef > 0.0 else [])]
        stats: dict[str, list[float]] = collections.defaultdict(list)
        stop = False
        for _epoch in range(cfg.update_epochs):
            perm = torch.randperm(size, generator=self.sample_gen).to(self.device)
            epoch: list[Tensor] = []  # [len(names)] per minibatch, weighted by this rank's share
            for start, end in zip(bounds[:-1], bounds[1:], strict=True):
                if end == start:  # fewer rows than minibatches this update
                    continue
                mb = shard.select(perm[start:end])  # this rank's rows of it
                self.optimizer.zero_grad()
                epoch.append(self._backward(rows, mb, len(mb) / (end - start), teacher_coef,
                                            len(names)))
                ranks.sum_(self.optimizer.grad)
                grad_norm = self.optimizer.clip_grad_norm(cfg.max_grad_norm)
                self.optimizer.step()
                stats["grad_norm"].append(float(grad_norm))
            for name, values in zip(names, ranks.sum_(torch.stack(epoch)).T.tolist(),
                                    strict=True):
                stats[name].extend(values)
            if cfg.target_kl is not None and np.mean(stats["approx_kl"][-1:]) > cfg.target_kl:
                stop = True
                break
        if self.fast_policy is not None:
            self.fast_policy.refresh()
        out = {f"loss/{k}": float(np.mean(v)) for k, v in stats.items()}
        diverged = sorted(f"loss/{k}" for k in ("policy_loss", "value_loss")
                          if stats.get(k) and not np.isfinite(out[f"loss/{k}"]))
        if diverged:  # the weights are no longer numbers: no checkpoint may keep them
            raise TrainingDiverged(
                f"the losses became non-finite ({', '.join(diverged)}): rewards, reward "
                "weights or the learning rate too large for float32; the run stops before "
                "saving these weights (its last checkpoint holds finite ones)")
        out["loss/explained_variance"] = ranks.explained_variance(b_values, b_returns)
        out["loss/learning_rate"] = lr
        out["loss/early_stop"] = float(stop)
        if self.teacher is not None:
            out["loss/teacher_kl_coef"] = teacher_coef
        return out

    def _backward(self, rows: Rows, mb: Tensor, share: float, teacher_coef: float,
                  num_stats: int) -> Tensor:
        """Accumulate the gradient of this rank's part of a minibatch's loss: the mean loss of
        its rows ``mb`` times ``share``, its part of the minibatch. The loss's stats
        (:data:`~selfplay.losses.PPO_STATS`, then the teacher KL), ``[num_stats]``, weighted
        by ``share`` (summed over the ranks: the minibatch's)."""
        cfg, agent = self.config.ppo, self.agent
        adv = rows.advantages[mb]
        if cfg.norm_adv:  # over the whole minibatch: every rank takes part, rows or not
            adv = self.ranks.normalize_advantages(adv)
        if len(mb) == 0:
            return torch.zeros(num_stats, device=self.device)
        mb_obs = rows.obs[mb]
        mb_mask = (rows.mask.select(mb) if isinstance(rows.mask, GridMaskIndex)
                   else rows.mask[mb] if rows.mask is not None else None)
        with learner_autocast(self.device, self.config.precision):
            dist, new_value = agent.forward_all(
                mb_obs, mb_mask, mb_obs if rows.critic is None else rows.critic[mb])
            mb_actions = rows.actions[mb]
            new_logprob = dist.log_prob(mb_actions)
            loss, info = ppo_loss(new_logprob, rows.logprobs[mb], adv, new_value.float(),
                                  rows.values_vs[mb], rows.returns_vs[mb],
                                  dist.entropy(mb_actions), clip_coef=cfg.clip_coef,
                                  clip_vloss=cfg.clip_vloss, vf_coef=cfg.vf_coef,
                                  ent_coef=cfg.ent_coef, norm_adv=False)
            if teacher_coef > 0.0:
                assert self.teacher is not None, "a teacher penalty needs a teacher"
                with torch.no_grad():
                    target = self.teacher.dist(mb_obs, mb_mask)
                teacher_kl = kl_divergence(target, dist).mean()
                loss = loss + teacher_coef * teacher_kl
                info["teacher_kl"] = teacher_kl.detach()
        (loss * share).backward()
        return torch.stack(list(info.values())) * share
