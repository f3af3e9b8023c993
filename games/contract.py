"""The batch contract of :class:`games.core.VecGame`, checked once against a game's spec.

A game (a plugin's, say) that returns arrays of another shape or dtype than its
:class:`~games.core.GameSpec` declares would otherwise fail deep in training (a reshape, a
broadcast, a dtype error in torch) or, worse, train on misread data without a word. The
trainer checks the first batch of ``reset`` and of ``step`` (:func:`check_batch`); a breach is
one :class:`~games.core.GameError` naming the field, what the spec implies and what came.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from games.core import Batch, Discrete, EpisodeStats, GameError, GameSpec


def check_batch(batch: Any, spec: GameSpec, call: str) -> None:
    """Raise :class:`GameError` if ``batch`` (what ``call``, ``"reset"`` or ``"step"``,
    returned) breaks the contract of ``spec``'s game."""
    problem = batch_problem(batch, spec)
    if problem is not None:
        raise GameError(f"{spec.name}: {call}() broke the VecGame contract: {problem}")


def batch_problem(batch: Any, spec: GameSpec) -> str | None:
    """The first way ``batch`` differs from what ``spec`` declares, or None."""
    if not isinstance(batch, Batch):
        return f"it returned {type(batch).__name__}, not a games.core.Batch"
    e, a = spec.num_envs, spec.num_seats
    mask_shape = spec.action_space.mask_shape
    fields: list[tuple[str, Any, tuple[int, ...], np.dtype | str | None]] = [
        ("obs", batch.obs, (e, a, *spec.obs_shape), np.dtype(spec.obs_dtype)),
        ("reward", batch.reward, (e, a), "floating"),
        ("terminated", batch.terminated, (e,), np.dtype(bool)),
        ("truncated", batch.truncated, (e,), np.dtype(bool)),
        ("alive", batch.alive, (e, a), np.dtype(bool)),
    ]
    if batch.action_mask is not None:  # None: every action legal
        fields.append(("action_mask", batch.action_mask, (e, a, *mask_shape), np.dtype(bool)))
    if batch.state is not None and spec.state_shape is not None:
        fields.append(("state", batch.state, (e, a, *spec.state_shape),
                       np.dtype(spec.state_dtype)))
    if batch.final_obs is not None:
        fields.append(("final_obs", batch.final_obs, (e, a, *spec.obs_shape), None))
    for name, value, shape, dtype in fields:
        problem = _array_problem(value, shape, dtype)
        if problem is not None:
            return f"Batch.{name} {problem}"
    if isinstance(spec.action_space, Discrete) and batch.action_mask is not None:
        stuck = np.argwhere(np.asarray(batch.alive) & ~np.asarray(batch.action_mask).any(-1))
        if len(stuck):  # the policy would have to play an illegal action
            env, seat = (int(i) for i in stuck[0])
            return (f"env {env}'s seat {seat} is alive with no legal action in Batch.action_mask "
                    "(a seat that cannot act this step is not alive)")
    return _episodes_problem(batch.episodes, e, a)


def _array_problem(value: Any, shape: tuple[int, ...], dtype: np.dtype | str | None
                   ) -> str | None:
    got_shape = getattr(value, "shape", None)
    if got_shape is None:
        return f"is {type(value).__name__}, not an array of shape {shape}"
    if tuple(got_shape) != shape:
        lead = " ([E, A, ...] first)" if len(shape) >= 2 else " ([E]: one per env)"
        return f"has shape {tuple(got_shape)}; the spec says {shape}{lead}"
    try:
        got = np.dtype(value.dtype)
    except TypeError:  # a framework's dtype numpy does not know (device arrays): not checked
        return None
    if dtype == "floating":
        if got.kind != "f":
            return f"has dtype {got}; it must be a floating-point array"
    elif dtype is not None and got != dtype:
        return f"has dtype {got}; the spec says {dtype}"
    return None


def _episodes_problem(episodes: Any, num_envs: int, num_seats: int) -> str | None:
    if not isinstance(episodes, EpisodeStats):
        return (f"Batch.episodes is {type(episodes).__name__}, not a games.core.EpisodeStats "
                "(EpisodeStats.empty() when none finished)")
    lengths = {name: len(np.asarray(value)) for name, value in episodes._asdict().items()}
    if len(set(lengths.values())) > 1:
        return f"Batch.episodes' arrays differ in length: {lengths}"
    env, seat = np.asarray(episodes.env), np.asarray(episodes.seat)
    if len(env) and (env.min() < 0 or env.max() >= num_envs):
        return f"Batch.episodes.env holds {int(env.max())}, outside 0..{num_envs - 1}"
    if len(seat) and (seat.min() < 0 or seat.max() >= num_seats):
        return f"Batch.episodes.seat holds {int(seat.max())}, outside 0..{num_seats - 1}"
    return None


def check_episodes(batch: Batch, spec: GameSpec) -> None:
    """:class:`GameError` if ``batch``'s finished episodes break the contract (envs or seats
    out of range, arrays of different lengths). An env may end (``terminated``) without an
    episode: with episodic lives, Atari ends the learner's episode at a lost life and the
    game's at its end."""
    problem = _episodes_problem(batch.episodes, spec.num_envs, spec.num_seats)
    if problem is not None:
        raise GameError(f"{spec.name}: step() broke the VecGame contract: {problem}")


STALL_STEPS = 250_000
"""steps of a batch with no seat-episode reported after which evaluation and matches stop
(the longest built-in game, Atari's 108,000 frames, is 27,000 steps)"""


class EpisodeWatch:
    """For a loop that plays until episodes end (``eval``, ``play``): checks its first
    ``reset`` and ``step`` batches (:func:`check_batch`) and each step's finished episodes
    (:func:`check_episodes`), and stops it when no episode has come for ``limit`` steps: a
    game that never reports its finished games would keep it waiting for ever."""

    def __init__(self, spec: GameSpec, limit: int | None = None) -> None:
        self.spec, self.quiet, self.steps = spec, 0, 0
        self.limit = STALL_STEPS if limit is None else limit

    def reset(self, batch: Batch) -> Batch:
        check_batch(batch, self.spec, "reset")
        return batch

    def step(self, batch: Batch) -> None:
        if self.steps == 0:
            check_batch(batch, self.spec, "step")
        self.steps += 1
        check_episodes(batch, self.spec)
        self.quiet = 0 if len(batch.episodes.env) else self.quiet + 1
        if self.quiet >= self.limit:
            raise GameError(f"{self.spec.name}: no episode reported in {self.limit:,} steps of "
                            f"its {self.spec.num_envs} env(s): a game reports each finished "
                            "game in Batch.episodes (games.batches.EpisodeTracker builds them)")
