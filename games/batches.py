"""Helpers over the common interface's arrays: slicing and joining batches, per-seat episode
bookkeeping, outcomes from rewards, random legal actions."""

from __future__ import annotations

import numpy as np

from games.core import (
    ActionSpace,
    Batch,
    Box,
    Discrete,
    EpisodeStats,
    Outcome,
)

_NO_EPISODES = EpisodeStats.empty()  # shared: its arrays are empty


def slice_batch(batch: Batch, start: int, stop: int) -> Batch:
    """Envs ``start..stop-1`` of ``batch``, numbered from 0 (their finished episodes too)."""
    ep = batch.episodes
    keep = (ep.env >= start) & (ep.env < stop)
    episodes = (ep if keep.all() and start == 0 else
                EpisodeStats(ep.env[keep] - start, ep.seat[keep], ep.ret[keep],
                             ep.length[keep], ep.outcome[keep]))

    def part(x: np.ndarray | None) -> np.ndarray | None:
        return None if x is None else x[start:stop]

    return Batch(obs=batch.obs[start:stop], action_mask=part(batch.action_mask),
                 state=part(batch.state), reward=batch.reward[start:stop],
                 terminated=batch.terminated[start:stop], truncated=batch.truncated[start:stop],
                 alive=batch.alive[start:stop], episodes=episodes,
                 final_obs=part(batch.final_obs), final_state=part(batch.final_state))


def concat_episodes(episodes: list[EpisodeStats], starts: list[int]) -> EpisodeStats:
    """Episodes of consecutive env ranges (beginning at ``starts``), env indices made global."""
    return EpisodeStats(np.concatenate([ep.env + s for ep, s in zip(episodes, starts,
                                                                    strict=True)]),
                        *(np.concatenate([getattr(ep, f) for ep in episodes])
                          for f in ("seat", "ret", "length", "outcome")))


def concat_batches(batches: list[Batch], starts: list[int]) -> Batch:
    """Batches of consecutive env ranges (beginning at ``starts``) joined along the env axis.

    A ``final_obs`` / ``final_state`` missing from some parts is filled with their
    ``obs`` / ``state`` (rows that are read only where an episode ended).
    """
    stats = concat_episodes([b.episodes for b in batches], starts)

    def join(parts: list[np.ndarray | None], like: list[np.ndarray | None]
             ) -> np.ndarray | None:
        if all(p is None for p in parts):
            return None
        filled = [p if p is not None else fill for p, fill in zip(parts, like, strict=True)]
        return np.concatenate(filled)  # type: ignore[arg-type]

    obs = [b.obs for b in batches]
    states = [b.state for b in batches]
    return Batch(
        obs=np.concatenate(obs),
        action_mask=join([b.action_mask for b in batches], [None] * len(batches)),
        state=join(states, [None] * len(batches)),
        reward=np.concatenate([b.reward for b in batches]),
        terminated=np.concatenate([b.terminated for b in batches]),
        truncated=np.concatenate([b.truncated for b in batches]),
        alive=np.concatenate([b.alive for b in batches]),
        episodes=stats,
        final_obs=join([b.final_obs for b in batches], obs),  # type: ignore[arg-type]
        final_state=join([b.final_state for b in batches],
                         [s if s is not None else o for s, o in zip(states, obs, strict=True)]),
    )


class EpisodeTracker:
    """Accumulates per-seat returns and lengths and emits :class:`EpisodeStats` (vectorized)."""

    def __init__(self, num_envs: int, num_seats: int) -> None:
        self.returns = np.zeros((num_envs, num_seats), np.float64)
        self.lengths = np.zeros((num_envs,), np.int64)

    def update(
        self,
        reward: np.ndarray,  # [E, A]
        done: np.ndarray | list[int],  # bool [E], or the indices of the envs that ended
        outcome: np.ndarray | None = None,  # int8 [E, A], read where done
    ) -> EpisodeStats:
        """Add one step's rewards; emit (and reset) the episodes of the ``done`` envs."""
        self.returns += reward
        self.lengths += 1
        if isinstance(done, list):
            if not done:
                return _NO_EPISODES
            envs = np.array(done, np.int64)
        else:
            if not done.any():
                return _NO_EPISODES
            envs = np.flatnonzero(done)
        num_seats = self.returns.shape[1]
        if num_seats == 1:
            env_idx, seat_idx = envs, np.zeros(len(envs), np.int64)
        else:
            env_idx = np.repeat(envs, num_seats)
            seat_idx = np.tile(np.arange(num_seats, dtype=np.int64), len(envs))
        if outcome is None:
            out = np.full(len(env_idx), Outcome.NONE, np.int8)
        else:
            out = outcome[env_idx, seat_idx].astype(np.int8)
        stats = EpisodeStats(env_idx, seat_idx, self.returns[env_idx, seat_idx],
                             self.lengths[env_idx], out)
        self.returns[envs] = 0.0
        self.lengths[envs] = 0
        return stats

    def state_dict(self) -> dict[str, np.ndarray]:
        return {"returns": self.returns.copy(), "lengths": self.lengths.copy()}

    def load_state_dict(self, state: dict[str, np.ndarray]) -> None:
        self.returns[...] = state["returns"]
        self.lengths[...] = state["lengths"]


def outcome_from_rewards(final_reward: np.ndarray) -> np.ndarray:
    """Win/draw/loss per seat from the sign of a zero-sum game's final reward ``[E, A]``."""
    return np.sign(final_reward).astype(np.int8)


def random_actions(space: ActionSpace, mask: np.ndarray | None, rng: np.random.Generator,
                   lead: tuple[int, ...]) -> np.ndarray:
    """Uniformly random legal actions with leading shape ``lead`` (e.g. ``(E, A)``).

    For masked spaces each component is drawn among its legal values (value 0 when none is
    legal). Vectorized: one Gumbel-max draw over all rows at once.
    """
    if isinstance(space, Box):
        low = np.asarray(space.low, np.float32)
        high = np.asarray(space.high, np.float32)
        return rng.uniform(low, high, size=(*lead, len(low))).astype(np.float32)
    nvec = (space.n,) if isinstance(space, Discrete) else space.nvec
    if mask is None:
        mask = np.ones((*lead, *space.mask_shape), bool)
    noise = rng.gumbel(size=mask.shape).astype(np.float32)
    noise[~mask] = -np.inf
    parts = np.split(noise, np.cumsum(nvec)[:-1], axis=-1)
    picks = np.stack([p.argmax(-1) for p in parts], axis=-1).astype(np.int64)
    return picks[..., 0] if isinstance(space, Discrete) else picks
