"""Acting: the rollout loop that fills the buffer, one forward pass per policy per step.

:class:`Actor` steps the game ``num_steps`` times per rollout: the learner's live seats act
through one forward pass (or the NumPy mirror of a small MLP), the other seats through their
owners' policies (:class:`Seats`: ``owner[E, A]``, 0 = the learner), and each step's rewards,
dones and finished episodes are recorded. With a game stepped in parts (worker processes), the
parts step while the others' actions are computed. Listeners hear of finished episodes.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor

from games.batches import concat_batches, slice_batch
from games.contract import check_batch, check_episodes
from games.core import (
    Batch,
    EpisodeStats,
    GameSpec,
    HasLostWorkers,
    Policy,
    SupportsPartSteps,
    SupportsStaggering,
    VecGame,
)
from selfplay.config import TrainConfig
from selfplay.handover import as_tensor, tensor_batch, to_host
from selfplay.inference import NumpyActorCritic
from selfplay.losses import bootstrap_truncated
from selfplay.networks import ActorCritic
from selfplay.normalize import RewardScaler
from selfplay.policy import FrozenPolicy
from selfplay.rollout import RolloutBuffer
from selfplay.run_metrics import EpisodeLog, Timer

# acting for one part of the envs: (step, batch, learner seats [E', A], first env) -> actions
# (NumPy; a tensor on the buffer's device when the game hands over device arrays)
ActFn = Callable[[int, Batch, np.ndarray, int], Any]
EpisodeListener = Callable[[EpisodeStats], None]  # the seat-episodes that ended on a step


@dataclass(frozen=True)
class StepListener:
    """An episode listener that needs what the step the episodes ended on showed (the game's
    reward components or opponent names of those episodes, the opponent an env played):
    ``read(episodes)`` at that step, ``deliver(episodes, read)`` with the episode log. A
    detached rollout (``collection: async``) reads at the step, in its thread, and delivers
    when the rollout is joined: reading then saw a later step (an IndexError, or games
    credited to the wrong opponent)."""

    read: Callable[[EpisodeStats], Any]
    deliver: Callable[[EpisodeStats, Any], None]

    def __call__(self, episodes: EpisodeStats) -> None:
        self.deliver(episodes, self.read(episodes))


def group_parts(num_parts: int, groups: int) -> list[list[int]]:
    """``num_parts`` part indices split into ``groups`` runs of neighbours (sizes differ by at
    most one; fewer groups if there are fewer parts)."""
    groups = max(1, min(groups, num_parts))
    edges = np.linspace(0, num_parts, groups + 1).round().astype(int)
    return [list(range(a, b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def buf_np(tensor: Tensor) -> np.ndarray:
    """A NumPy view sharing memory with a CPU tensor."""
    return tensor.numpy()


class CollectionAborted(Exception):
    """A detached rollout stopped early because the run is stopping (its buffer is
    incomplete and never learned)."""


class Seats:
    """Who plays which seat: ``owner[E, A]`` (0 = the learner) and the policy of every other
    owner slot. What a league changes, it changes through these methods."""

    def __init__(self, num_envs: int, num_seats: int) -> None:
        self.owner = np.zeros((num_envs, num_seats), np.int64)  # [E, A]
        self.policies: dict[int, Policy] = {}

    def assign(self, envs: np.ndarray | int, seat: int, slot: int) -> None:
        """Seat ``seat`` of ``envs`` is played by owner ``slot`` from their next step."""
        self.owner[envs, seat] = slot

    def set_policy(self, slot: int, policy: Policy) -> None:
        """Owner ``slot`` (>= 1) acts with ``policy``."""
        if slot < 1:
            raise ValueError("slot 0 is the learner")
        self.policies[slot] = policy

    def of_seat(self, seat: int) -> np.ndarray:
        """``int [E]``: the owner of seat ``seat`` in each env (a copy)."""
        return self.owner[:, seat].copy()

    def in_use(self) -> set[int]:
        """The owner slots that play some seat now."""
        return set(np.unique(self.owner).tolist())

    def state_dict(self) -> np.ndarray:
        return self.owner.copy()

    def load_state_dict(self, owner: np.ndarray) -> None:
        self.owner[...] = owner


class Actor:
    """Fills a :class:`RolloutBuffer` by playing the game with the learner's network."""

    def __init__(self, config: TrainConfig, game: VecGame, agent: ActorCritic,
                 buffer: RolloutBuffer, device: torch.device, act_gen: torch.Generator,
                 rng: np.random.Generator, seed: int | None = None, ranks: int = 1,
                 device_arrays: bool = False) -> None:
        """``seed``: the games' first reset (default ``config.seed``); ``ranks``: the
        data-parallel ranks stepping as many envs each, which ``global_step`` counts too;
        ``device_arrays``: the game hands over device arrays (:mod:`selfplay.handover`), read
        as tensors, and takes the actions as tensors on the buffer's device."""
        self.config = config
        self.device_arrays = device_arrays
        self.game = game
        self.spec: GameSpec = game.spec
        self.agent = agent
        self.buffer = buffer
        self.device = device
        self.act_gen = act_gen
        self.rng = rng
        e, a = self.spec.num_envs, self.spec.num_seats
        self.seats = Seats(e, a)
        self.listeners: list[EpisodeListener] = []
        self.reward_scaler = (RewardScaler((e, a), config.ppo.gamma, config.normalize.clip_reward)
                              if config.normalize.reward else None)
        self.use_buffer(buffer)
        self.detached = False
        """collecting beside the learner (``collection: async``): the seats are read once per
        rollout, finished episodes reach the listeners through :meth:`flush_episodes`, and the
        rollout's bootstrap is kept (:attr:`bootstrap`)"""
        self.abort = False
        """set from another thread: the rollout in progress stops before its next step
        (:class:`CollectionAborted`)"""
        self._frozen: tuple[np.ndarray, dict[int, Policy]] | None = None
        self._deferred: list[tuple[EpisodeStats, np.ndarray, list[Any]]] = []
        self.bootstrap: tuple[Tensor, np.ndarray] | None = None
        self.fast_policy: NumpyActorCritic | None = None
        self.episodes = EpisodeLog(config.log.return_window)
        self.timer = Timer()
        self.global_step = 0  # env steps of every rank
        self.ranks = ranks
        self._unchecked = {"reset", "step", "ends"}  # first batches checked (the contract)
        self.batch: Batch = self._arrived(self._checked(game.reset(
            seed=config.seed if seed is None else seed), "reset"))
        self._stagger()
        # parts of the envs step in their own processes while the others' actions are computed
        self.pipelined = (config.pipeline and isinstance(game, SupportsPartSteps)
                          and len(game.parts) > 1)
        self._loses_workers = isinstance(game, HasLostWorkers)
        self._lost: list[tuple[int, np.ndarray]] = []  # (rollout step, envs) lost with workers
        self.recollected = 0
        """env steps lost with workers and collected again, over the run"""

    def _checked(self, batch: Batch, call: str, envs: tuple[int, int] | None = None) -> Batch:
        """``batch`` (what ``call`` returned: of envs ``envs`` ``(start, stop)`` for a part's
        step, else of every env), checked against the game's spec the first time
        (:func:`games.contract.check_batch`: a plugin's game that breaks the contract is one
        line naming the field, not an error deep in training)."""
        if not self._unchecked:
            return batch
        spec = self.game.spec
        if envs is not None:
            spec = replace(spec, num_envs=envs[1] - envs[0])
        if call in self._unchecked:
            check_batch(batch, spec, call)
            self._unchecked.discard(call)
        if call == "step" and "ends" in self._unchecked and len(batch.episodes.env):
            check_episodes(batch, spec)  # the first step that reports episodes
            self._unchecked.discard("ends")
        return batch

    def _arrived(self, batch: Batch) -> Batch:
        """A batch from the game as acting reads it: device arrays as tensors on their
        memory (no copy)."""
        return tensor_batch(batch) if self.device_arrays else batch

    def reset_games(self, seed: int) -> None:
        """New games in every env from ``seed``."""
        self.batch = self._arrived(self.game.reset(seed=seed))
        self._stagger()

    def _stagger(self) -> None:
        """Spread fresh games of one fixed length over a game's phases
        (``ppo.stagger_games``)."""
        if self.config.ppo.stagger_games and isinstance(self.game, SupportsStaggering):
            self.game.stagger()

    def use_buffer(self, buffer: RolloutBuffer) -> None:
        """Fill ``buffer`` from the next rollout on (through NumPy views of its host arrays:
        cheap per-step writes from the acting loop)."""
        self.buffer = buffer
        host = buffer.device.type == "cpu"  # the large arrays' (the NumPy mirror's only)
        self._np_obs = buf_np(buffer.obs) if host else None
        self._np_mask = buf_np(buffer.mask) if host and buffer.mask is not None else None
        self._np_actions = buf_np(buffer.actions) if host else None
        self._np_logprobs = buf_np(buffer.logprobs)
        self._np_values = buf_np(buffer.values)
        self._np_rewards = buf_np(buffer.rewards)
        self._np_dones = buf_np(buffer.dones)
        self._np_trained = buf_np(buffer.trained)

    @property
    def owner(self) -> np.ndarray:
        """``int [E, A]``: the seats' owners in this rollout (detached: as the rollout began)."""
        return self._frozen[0] if self._frozen is not None else self.seats.owner

    def _check_abort(self) -> None:
        if self.abort:
            raise CollectionAborted("the rollout was abandoned: the run is stopping")

    def flush_episodes(self) -> None:
        """Add the episodes a detached rollout finished to the episode log and hand them to
        the listeners, in order."""
        deferred, self._deferred = self._deferred, []
        for episodes, learner, reads in deferred:
            self.episodes.add(episodes, learner)
            for listener, read in zip(self.listeners, reads, strict=True):
                if isinstance(listener, StepListener):
                    listener.deliver(episodes, read)
                else:
                    listener(episodes)

    def _critic_input(self, obs_n: Tensor, state: Any, update: bool) -> Tensor:
        """Critic input for flattened rows ``[N, ...]`` (global state or the actor's obs)."""
        if not self.agent.critic_reads_state:
            return obs_n
        assert state is not None
        state_t = as_tensor(state).reshape(-1, *self.spec.state_shape)  # type: ignore[misc]
        state_t = state_t.to(self.device, non_blocking=True)
        return self.agent.normalize_critic_input(obs_n, state_t, update=update)

    @torch.inference_mode()
    def _final_values(self, obs: Any, state: Any) -> Tensor:
        """Values ``[K * A]`` of final observations ``[K, A, *obs_shape]`` (and states)."""
        rows = as_tensor(obs).reshape(-1, *self.spec.obs_shape).to(self.device)
        obs_n = self.agent.normalize_obs(rows)
        return self.agent.value(self._critic_input(obs_n, state, update=False))

    def collect(self) -> None:
        """Fill the rollout buffer with ``num_steps`` steps of every env (detached: with the
        seats' owners and policies as they are now, whatever changes meanwhile, and the
        values after the last step kept in :attr:`bootstrap`)."""
        cfg = self.config
        act = self._act_numpy if self.fast_policy is not None else self._act_torch
        if self.detached:  # torch's thread count is the process's: the learner's stays
            self._frozen = (self.seats.owner.copy(), dict(self.seats.policies))
        else:
            torch.set_num_threads(cfg.acting_threads or cfg.torch_threads)
        try:
            if self.pipelined:
                self._collect_pipelined(act)
            else:
                self._collect_steps(act)
            if self._lost:
                self._recollect(act)
            if self.detached:
                self.bootstrap = (self.last_values(), self.learner_next())
        finally:
            self._frozen = None
            if not self.detached:
                torch.set_num_threads(cfg.torch_threads)

    def _collect_steps(self, act: ActFn) -> None:
        """Act for every env, step every env, ``num_steps`` times."""
        timer = self.timer
        tick = time.perf_counter()
        for t in range(self.config.ppo.num_steps):
            self._check_abort()
            actions = self._act_part(t, self.batch, 0, act)
            tick = timer.add("inference", tick)
            batch = self._arrived(self._checked(self.game.step(actions), "step"))
            tick = timer.add("env", tick)
            self.batch = batch
            self._record_step(t, batch, 0)
            self._note_lost(t)
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
                self._check_abort()
                for group in groups:
                    for p in group:
                        if pending[p]:  # its step t - 1 ran while the other groups acted
                            pending[p] = False
                            batches[p] = self._arrived(
                                self._checked(game.step_part_wait(p), "step", parts[p]))
                            tick = timer.add("env", tick)
                            self._record_step(t - 1, batches[p], parts[p][0])
                            self._note_lost(t - 1)
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
                batches[p] = self._arrived(
                    self._checked(game.step_part_wait(p), "step", parts[p]))
                self._record_step(t, batches[p], start)
                self._note_lost(t)
        timer.add("env", tick)
        self.batch = concat_batches(batches, [start for start, _ in parts])

    def _note_lost(self, t: int) -> None:
        """Remember the envs whose step ``t`` was lost with their worker, to be collected
        again (:meth:`_recollect`); a lost step is not an env step."""
        if not self._loses_workers:
            return
        envs = cast(HasLostWorkers, self.game).take_lost_envs()
        if len(envs):
            self._lost.append((t, envs))
            self.global_step -= len(envs) * self.ranks

    def _recollect(self, act: ActFn) -> None:
        """Collect again the steps lost with workers in this rollout, so the update learns
        from ``num_steps`` real steps of every env: each lost part's later steps move forward
        (:meth:`RolloutBuffer.drop_steps`), then that part alone steps as many times more
        into the rollout's last rows. A loss meanwhile is collected again in turn."""
        game = cast(HasLostWorkers, self.game)
        num_steps = self.config.ppo.num_steps
        while self._lost:
            lost, self._lost = self._lost, []
            for p, (start, stop) in enumerate(game.parts):
                steps = sorted({t for t, envs in lost
                                if bool(((envs >= start) & (envs < stop)).any())})
                if not steps:
                    continue
                self.buffer.drop_steps(slice(start, stop), steps, self.config.ppo.gamma)
                self._step_part_alone(p, range(num_steps - len(steps), num_steps), act)
                self.recollected += len(steps) * (stop - start)
                print(f"warning: collected again {len(steps)} step(s) of envs {start}.."
                      f"{stop - 1} lost with their worker", file=sys.stderr)

    def _step_part_alone(self, part: int, rows: range, act: ActFn) -> None:
        """Step part ``part`` of the envs alone, filling buffer rows ``rows`` of its envs."""
        game = cast(SupportsPartSteps, self.game)
        parts = game.parts
        start, stop = parts[part]
        batch = slice_batch(self.batch, start, stop)
        tick = time.perf_counter()
        for t in rows:
            self._check_abort()
            actions = self._act_part(t, batch, start, act)
            tick = self.timer.add("inference", tick)
            game.step_part_async(part, actions)
            batch = self._arrived(self._checked(game.step_part_wait(part), "step", (start, stop)))
            self._record_step(t, batch, start)
            self._note_lost(t)
            tick = self.timer.add("env", tick)
        self.batch = concat_batches(
            [batch if q == part else slice_batch(self.batch, a, b)
             for q, (a, b) in enumerate(parts)], [a for a, _ in parts])

    def _act_part(self, t: int, batch: Batch, start: int, act: ActFn) -> Any:
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
        self.global_step += e * self.ranks
        done = batch.terminated | batch.truncated
        reward = batch.reward
        if self.reward_scaler is not None:
            reward = self.reward_scaler(reward, done, envs, self._np_trained[t, envs])
        elif batch.truncated.any():
            reward = reward.copy()
        # turn-based games: the seat that moved last waits in the final position, the other
        # acts there; every seat is bootstrapped
        acted = None if self.spec.turn_based else self._np_trained[t, envs]
        bootstrap_truncated(batch, reward, self.config.ppo.gamma, self._final_values, acted)
        self._np_rewards[t, envs] = reward
        self._np_dones[t, envs] = done[:, None]
        if len(batch.episodes.env):
            episodes = batch.episodes
            if start:
                episodes = episodes._replace(env=episodes.env + start)
            if self.detached:  # the episode log and listeners are the main thread's
                reads = [listener.read(episodes) if isinstance(listener, StepListener)
                         else None for listener in self.listeners]
                self._deferred.append((episodes, self.owner == 0, reads))
                return
            self.episodes.add(episodes, self.owner == 0)
            for listener in self.listeners:
                listener(episodes)

    def _act_numpy(self, t: int, batch: Batch, learner: np.ndarray,
                   start: int = 0) -> np.ndarray:
        """Act for every seat with the NumPy mirror of a small MLP; fill buffer slot ``t``
        (rows of envs ``start..start+len(batch)``)."""
        spec, agent, fast = self.spec, self.agent, self.fast_policy
        assert fast is not None
        assert self._np_obs is not None and self._np_actions is not None  # a host buffer
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
    def _act_torch(self, t: int, batch: Batch, learner: np.ndarray, start: int = 0) -> Any:
        """Act for the learner's live seats with one forward pass; fill buffer slot ``t``
        (rows of envs ``start..start+len(batch)``). The actions are NumPy, or a tensor on
        the buffer's device with device arrays (``int32`` where they are integers, as JAX
        takes them without a copy).

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
        # the game's arrays as tensors where they are (the host, or the game's device)
        obs_src = as_tensor(batch.obs).reshape(n, *spec.obs_shape)
        mask_src = (as_tensor(batch.action_mask).reshape(n, *spec.action_space.mask_shape)
                    if batch.action_mask is not None else None)
        if mask_src is not None and buf.mask is not None:
            buf.mask[t, envs].view(n, *mask_src.shape[1:]).copy_(mask_src)
        state: Any = batch.state
        obs, mask = obs_src, mask_src
        if pick is not None:
            at_src = pick.to(obs_src.device)
            obs = obs_src[at_src]
            mask = mask_src[at_src] if mask_src is not None else None
            if state is not None and self.agent.critic_reads_state:
                state_src = as_tensor(state)
                state = state_src.reshape(n, *state_src.shape[2:])[pick.to(state_src.device)]
        obs = obs.to(self.device, non_blocking=True)
        mask = mask.to(self.device, non_blocking=True) if mask is not None else None
        if agent.obs_rms is not None:
            agent.obs_rms.update(obs)
        obs_n = agent.normalize_obs(obs)
        critic_in = self._critic_input(obs_n, state, update=True)
        dist, value_n = agent.forward_all(obs_n, mask, critic_in)
        action = dist.sample(self.act_gen)
        small = torch.stack([dist.log_prob(action), agent.from_value_space(value_n)]).cpu()
        action = action.to(buf.device)
        at_buf = None if pick is None else pick.to(buf.device)
        obs_buf = buf.obs[t, envs].view(n, *spec.obs_shape)
        if agent.obs_rms is None:  # the buffer holds the raw observation: all rows at once
            obs_buf.copy_(obs_src)
        elif at_buf is None:
            obs_buf.copy_(obs_n)
        else:
            obs_buf.index_copy_(0, at_buf, obs_n.to(buf.device))
        if buf.critic_in is not None:
            critic_buf = buf.critic_in[t, envs].view(n, *critic_in.shape[1:])
            if at_buf is None:
                critic_buf.copy_(critic_in)
            else:
                critic_buf.index_copy_(0, at_buf, critic_in.to(buf.device))
        actions = buf.actions[t, envs].view(n, *act_shape)
        logprobs, values = buf.logprobs[t, envs].view(n), buf.values[t, envs].view(n)
        if pick is None or at_buf is None:
            actions.copy_(action)
            logprobs.copy_(small[0])
            values.copy_(small[1])
        else:
            actions.zero_().index_copy_(0, at_buf, action)
            logprobs.zero_().index_copy_(0, pick, small[0])
            values.zero_().index_copy_(0, pick, small[1])
        out = actions.view(e, a, *act_shape)
        if self.device_arrays:
            return out.to(torch.int32) if out.dtype == torch.int64 else out.clone()
        return out.numpy().copy()

    @torch.inference_mode()
    def _opponent_actions(self, batch: Batch, actions: Any, owner: np.ndarray) -> Any:
        """Overwrite the actions (NumPy, or a tensor with device arrays) of seats owned by
        other policies (one pass per policy); ``owner [E', A]`` are the owners of
        ``batch``'s seats. A network policy reads device arrays where they are; a scripted
        one reads its seats' rows copied to the host."""
        on_device = isinstance(actions, Tensor)
        for owner_id in np.unique(owner):
            if owner_id == 0:
                continue
            policies = self._frozen[1] if self._frozen is not None else self.seats.policies
            policy = policies.get(int(owner_id))
            if policy is None:
                raise RuntimeError(f"seat owner {owner_id} has no policy")
            sel = (owner == owner_id) & batch.alive
            if not sel.any():
                continue
            if not on_device:
                mask = batch.action_mask[sel] if batch.action_mask is not None else None
                state = batch.state[sel] if batch.state is not None else None
                actions[sel] = policy.act(batch.obs[sel], mask, state)
                continue
            obs_t = _rows(as_tensor(batch.obs), sel)
            mask_t, state_t = (None if x is None else _rows(as_tensor(x), sel)
                               for x in (batch.action_mask, batch.state))
            if isinstance(policy, FrozenPolicy):
                chosen = policy.act_tensors(obs_t, mask_t)
            else:
                chosen = torch.from_numpy(policy.act(
                    to_host(obs_t), None if mask_t is None else to_host(mask_t),
                    None if state_t is None else to_host(state_t)))
            actions[torch.from_numpy(sel).to(actions.device)] = chosen.to(actions.device,
                                                                          actions.dtype)
        return actions

    @torch.inference_mode()
    def last_values(self) -> Tensor:
        """``[E * A]``: the values after the rollout's last step (GAE's bootstrap)."""
        n = self.spec.num_envs * self.spec.num_seats
        obs = as_tensor(self.batch.obs).reshape(n, *self.spec.obs_shape)
        obs_n = self.agent.normalize_obs(obs.to(self.device))
        critic_in = self._critic_input(obs_n, self.batch.state, update=False)
        return self.agent.value(critic_in).cpu()

    def learner_next(self) -> np.ndarray:
        """``bool [E, A]``: the learner's seats that act on the next step."""
        return (self.owner == 0) & self.batch.alive


def _rows(x: Tensor, sel: np.ndarray) -> Tensor:
    """The rows ``x[sel]`` of ``[E', A, ...]`` seats chosen by ``bool [E', A]`` ``sel``."""
    return x[torch.from_numpy(sel).to(x.device)]
