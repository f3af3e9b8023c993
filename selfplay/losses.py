"""Pure advantage and loss functions: GAE, the clipped PPO loss, explained variance.

Arrays are time-major: ``[T, N]`` where ``N`` is any flattening of envs x seats (trailing
dims beyond the first are allowed everywhere and broadcast).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor

from games.core import Batch

__all__ = ["PPO_STATS", "explained_variance", "gae", "idle_at_the_end", "ppo_loss",
           "waiting_at_the_end"]

PPO_STATS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_frac")
"""The names of :func:`ppo_loss`'s stats, in order."""


def gae(
    rewards: Tensor,  # [T, N]
    values: Tensor,  # [T, N] V(s_t)
    dones: Tensor,  # [T, N] bool/float: the episode ended *after* step t
    last_values: Tensor,  # [N] V(s_T), the observation after the last step
    gamma: float,
    lam: float | Tensor,  # scalar or [T, N] (per-step lambda)
    cut: Tensor | None = None,  # bool [T, N]: a chain ends before this step (see below)
) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation; returns ``(advantages, returns)``, both ``[T, N]``.

    ``dones[t]`` means step ``t`` ended its episode (so ``values[t + 1]`` / ``last_values``
    belong to the next episode and are not bootstrapped from): for step ``t`` the
    next-nonterminal factor is ``1 - dones[t]``. This is CleanRL's recursion with the done flag
    stored on the step that ended the episode::

        delta_t = r_t + gamma * V_{t+1} * (1 - d_t) - V_t
        A_t = delta_t + gamma * lam * (1 - d_t) * A_{t+1}
        returns = A + V

    A per-step ``lam [T, N]`` lets turn-based games skip the steps where a seat does not act:
    with ``lam[t] = 1`` when the seat is idle at ``t + 1``, ``V_{t+1}`` cancels out of ``A_t``
    exactly, so the idle state's value never enters the estimate.

    ``cut[t]`` ends a seat's chain before step ``t``: its advantage at ``t`` is 0 (its return
    ``V_t``) and nothing after ``t`` reaches the steps before it, which bootstrap from ``V_t``
    as if the rollout had ended there (a turn-based seat waiting at the rollout's end: its
    last move's successor, where it acts next, is not in the rollout).

    Truncated episodes (time limits) are bootstrapped by the caller: set ``dones[t]`` and add
    ``gamma * V(final_obs)`` to ``rewards[t]``, which is exactly the bootstrap the recursion
    would have done had the episode continued. The time loop runs in numpy (T <= a few
    thousand); everything else is vectorized.
    """
    if rewards.shape != values.shape or rewards.shape != dones.shape:
        raise ValueError(
            f"rewards {tuple(rewards.shape)}, values {tuple(values.shape)} and dones "
            f"{tuple(dones.shape)} must all be [T, N]"
        )
    if last_values.shape != values.shape[1:]:
        raise ValueError(
            f"last_values {tuple(last_values.shape)} must be {tuple(values.shape[1:])}"
        )
    with torch.no_grad():
        nonterminal = 1.0 - dones.to(values.dtype)  # [T, N]
        next_values = torch.cat([values[1:], last_values[None]], 0)  # [T, N]
        deltas = rewards + gamma * next_values * nonterminal - values  # [T, N]
        decay = (gamma * lam) * nonterminal  # [T, N]
        d = deltas.detach().cpu().numpy()
        c = decay.detach().cpu().numpy()
        adv = np.empty_like(d)
        running = np.zeros_like(d[0])
        cuts = cut.detach().cpu().numpy() if cut is not None else None
        for t in range(d.shape[0] - 1, -1, -1):
            running = d[t] + c[t] * running
            if cuts is not None and cuts[t].any():
                running = np.where(cuts[t], 0.0, running)
            adv[t] = running
        advantages = torch.from_numpy(adv).to(values.device)
        return advantages, advantages + values


def waiting_at_the_end(trained: Tensor, dones: Tensor, acts_next: Tensor) -> Tensor:
    """``bool [T, N]``: the last move of each seat that waits at the rollout's end (turn-based
    games) with its game still going since that move. Its advantage would bootstrap from the
    value of a position where it waits, which the critic never learns (it trains on the
    positions where the seat acts): :func:`~selfplay.losses.gae` cuts the seat's chain there
    instead and the move is left out of the update (``trained`` ``[T, N]``, ``dones``
    ``[T, N]``: the game ended after step t, ``acts_next`` ``[N]``: the seat acts after the
    rollout)."""
    steps = torch.arange(trained.shape[0]).unsqueeze(1)  # [T, 1]
    last_move = torch.where(trained, steps, -1).max(0).values  # [N], -1: never moved
    last_end = torch.where(dones, steps, -1).max(0).values  # [N]
    waiting = ~acts_next & (last_move >= 0) & (last_end < last_move)  # [N]
    return (steps == last_move) & waiting  # [T, N]


def idle_at_the_end(trained: Tensor, dones: Tensor, acts_next: Tensor, last_values: Tensor,
                    turn_based: bool) -> tuple[Tensor | None, Tensor]:
    """``(cut, last_values)`` for the seats that do not act after the rollout (``trained``,
    ``dones`` ``[T, N]``, ``acts_next``, ``last_values`` ``[N]``): in a turn-based game they
    wait for their turn, and their last moves are cut (:func:`waiting_at_the_end`); else they
    are out of their episodes until these end, and nothing more comes to them: their
    bootstrap values are 0 (they were values of positions the critic never trains on)."""
    if turn_based:
        return waiting_at_the_end(trained, dones, acts_next), last_values
    return None, torch.where(acts_next.to(last_values.device), last_values,
                             torch.zeros_like(last_values))


def _wmean(x: Tensor, w: Tensor | None, wsum: Tensor | None) -> Tensor:
    """Mean of ``x`` ``[B]``, weighted by ``w`` ``[B]`` when given."""
    if w is None or wsum is None:
        return x.mean()
    return (x * w).sum() / wsum


def ppo_loss(
    new_log_prob: Tensor,  # [B]
    old_log_prob: Tensor,  # [B]
    advantages: Tensor,  # [B]
    new_values: Tensor,  # [B]
    old_values: Tensor,  # [B]
    returns: Tensor,  # [B]
    entropy: Tensor,  # [B]
    clip_coef: float,
    clip_vloss: bool,
    vf_coef: float,
    ent_coef: float,
    norm_adv: bool,
    weights: Tensor | None = None,  # [B] 1 = valid sample, 0 = padding / absent seat
    vf_clip_coef: float | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """CleanRL's clipped PPO objective on one minibatch; returns ``(loss, stats)``.

    ``loss = policy_loss - ent_coef * entropy + vf_coef * value_loss`` with

    - ``policy_loss = mean(max(-A * ratio, -A * clip(ratio, 1 - clip_coef, 1 + clip_coef)))``;
    - ``value_loss = 0.5 * mean(max((V - R)^2, (V_old + clip(V - V_old, -c, c) - R)^2))`` when
      ``clip_vloss`` (``c = vf_clip_coef``, default ``clip_coef``), else ``0.5 * mean((V - R)^2)``;
    - advantages normalized per minibatch when ``norm_adv`` (mean and unbiased std over the valid
      samples, ``+ 1e-8``); with fewer than two valid samples they are left as they are.

    ``weights`` makes every mean a weighted mean, so padded or absent samples (weight 0) count
    for nothing. ``stats`` holds detached scalar tensors (call ``.item()`` when logging, which
    avoids a device sync per minibatch): ``policy_loss``, ``value_loss``, ``entropy``,
    ``approx_kl`` (``mean((ratio - 1) - log ratio)``, Schulman's k3 estimator) and
    ``clip_frac`` (fraction of samples with ``|ratio - 1| > clip_coef``).
    """
    w: Tensor | None = None
    wsum: Tensor | None = None
    if weights is not None:
        w = weights.to(new_log_prob.dtype)
        wsum = w.sum().clamp_min(1e-8)

    adv = advantages
    if norm_adv:
        if w is None or wsum is None:
            if adv.numel() >= 2:
                adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        else:  # weighted, without a host sync: keep the raw advantages below two samples
            count = w.sum()
            mean = (adv * w).sum() / wsum
            var = ((adv - mean).square() * w).sum() / (count - 1.0).clamp_min(1.0)
            adv = torch.where(count >= 2.0, (adv - mean) / (var.sqrt() + 1e-8), adv)

    logratio = new_log_prob - old_log_prob
    ratio = logratio.exp()
    pg1 = -adv * ratio
    pg2 = -adv * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef)
    policy_loss = _wmean(torch.maximum(pg1, pg2), w, wsum)

    if clip_vloss:
        c = clip_coef if vf_clip_coef is None else vf_clip_coef
        v_unclipped = (new_values - returns).square()
        v_clipped = old_values + (new_values - old_values).clamp(-c, c)
        v_term = torch.maximum(v_unclipped, (v_clipped - returns).square())
    else:
        v_term = (new_values - returns).square()
    value_loss = 0.5 * _wmean(v_term, w, wsum)

    entropy_mean = _wmean(entropy, w, wsum)
    loss = policy_loss - ent_coef * entropy_mean + vf_coef * value_loss

    with torch.no_grad():
        approx_kl = _wmean((ratio - 1.0) - logratio, w, wsum)
        clip_frac = _wmean(((ratio - 1.0).abs() > clip_coef).to(ratio.dtype), w, wsum)
    stats = dict(zip(PPO_STATS, (policy_loss.detach(), value_loss.detach(),
                                 entropy_mean.detach(), approx_kl, clip_frac), strict=True))
    return loss, stats


def explained_variance(pred: Tensor | np.ndarray, target: Tensor | np.ndarray) -> float:
    """``1 - Var(target - pred) / Var(target)`` over all elements; ``nan`` if ``Var(target) == 0``.

    1 is a perfect value function, 0 one no better than a constant, negative worse.
    """
    y_pred = pred.detach().cpu().numpy() if isinstance(pred, Tensor) else np.asarray(pred)
    y_true = target.detach().cpu().numpy() if isinstance(target, Tensor) else np.asarray(target)
    y_pred = y_pred.astype(np.float64).ravel()
    y_true = y_true.astype(np.float64).ravel()
    var_y = float(np.var(y_true))
    if var_y == 0.0:
        return float("nan")
    return float(1.0 - np.var(y_true - y_pred) / var_y)


def bootstrap_truncated(batch: Batch, reward: np.ndarray, gamma: float,
                        value: Callable[[np.ndarray, np.ndarray | None], Tensor],
                        acted: np.ndarray | None = None) -> None:
    """Add ``gamma * V(final obs)`` to ``reward`` ``[E, A]`` in the envs whose episode was
    truncated (not terminated) on the step that returned ``batch``: a time limit does not end
    what the position is worth. ``value(final_obs, final_state)`` of ``[K, A, ...]`` rows is
    ``[K * A]``. ``acted`` ``bool [E, A]``: only these seats (those that acted on the step)
    are bootstrapped; a seat already out of its game (a PettingZoo player without lives) has
    nothing more to come, and its value there is one of a position the critic never trains
    on (as :func:`idle_at_the_end` has it at a rollout's end)."""
    cut = batch.truncated & ~batch.terminated
    if not cut.any() or batch.final_obs is None:
        return
    envs = np.flatnonzero(cut)
    state = batch.final_state[envs] if batch.final_state is not None else None
    values = value(batch.final_obs[envs], state).reshape(len(envs), -1).cpu().numpy()  # [K, A]
    if acted is not None:
        values = np.where(acted[envs], values, 0.0)
    reward[envs] += gamma * values
