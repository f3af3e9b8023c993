"""The parent's side: envs split over workers as one :class:`~games.core.VecGame`.

Workers hold contiguous env ranges (:func:`split_ranges`); a step sends each worker its slice
of the actions, all workers step at once, and their batches are joined along the env axis.
Each worker range is also a part that can step while the trainer acts for the others
(:class:`~games.core.SupportsPartSteps`). The transport (local processes or Ray actors) only
carries commands and arrays; everything else is here, the same for both.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from games.core import Batch, EpisodeStats, GameError, GameSpec
from games.workers.host import Part, WorkerRecipe


def split_ranges(num_envs: int, workers: int) -> list[tuple[int, int]]:
    """``workers`` contiguous ``(start, stop)`` ranges covering ``0..num_envs`` (sizes differ by
    at most one; no empty range)."""
    workers = max(1, min(workers, num_envs))
    edges = np.linspace(0, num_envs, workers + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


class Transport(Protocol):
    """What carries commands to the workers and their answers back."""

    spec: GameSpec
    ranges: list[tuple[int, int]]

    def send(self, w: int, command: str, arg: Any = None) -> None:
        """Give worker ``w`` a command (``step``: its actions) without waiting."""
        ...

    def receive(self, w: int) -> Any:
        """Worker ``w``'s answer to its last command (a :class:`Part` for ``step`` and
        ``reset``); a :class:`GameError` naming the worker when it failed or died."""
        ...

    def join(self, parts: list[Part]) -> Batch:
        """Every worker's part, in order, as one batch of all envs."""
        ...

    def lost(self) -> set[int]:
        """Workers whose process or node was lost and that may come back (:meth:`revive`)."""
        ...

    def revive(self, w: int, seed: int | None) -> Part:
        """Worker ``w``'s envs after its loss: new games from ``seed`` once it is back; a
        :class:`GameError` when it cannot come back (restarts spent, or not within a
        timeout)."""
        ...

    def close(self) -> None: ...


Launcher = Callable[[list[WorkerRecipe], int], Transport]
"""starts the workers of the recipes (``num_envs`` envs in all): local processes or Ray actors"""


class WorkerVecGame:
    """``num_envs`` envs stepped by the workers of ``transport``; ``alive`` is the batch's
    (fixed) live seats, or ``None`` to keep the seats each worker's batches say are alive.
    Subclasses add their family's capabilities (microRTS: bots by env)."""

    def __init__(self, transport: Transport, alive: np.ndarray | None, family: str,
                 components: int = 0) -> None:
        self.transport = transport
        self.component_width = components  # reward components per episode (0: none)
        self.family = family
        self.ranges = transport.ranges
        self.num_envs = self.ranges[-1][1]
        self.spec: GameSpec = transport.spec
        self.alive = None if alive is None else np.array(alive, bool)
        if self.alive is not None:
            self.alive.setflags(write=False)
        self._in_flight: set[int] = set()  # workers stepping unattended (step_part_async)
        self._components: np.ndarray | None = None
        self._closed = False
        self._seed: int | None = None  # the last reset's (revived workers start from it)
        self.revivals = 0  # workers lost and revived over the game's life
        self._lost_envs: list[np.ndarray] = []  # envs whose step was lost (take_lost_envs)
        # each worker's last observations and states (views): a lost worker's games end there
        self._last: list[tuple[np.ndarray, np.ndarray | None] | None] = [None] * len(
            self.ranges)
        self._action_shape = (self.num_envs, self.spec.num_seats,
                              *self.spec.action_space.action_shape)

    # ------------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self._closed:
            raise GameError(f"{self.family}: this game was closed")

    def _worker_of(self, env: int) -> int:
        if not 0 <= env < self.num_envs:
            raise GameError(f"{self.family}: env {env} out of range 0..{self.num_envs - 1}")
        return next(i for i, (a, b) in enumerate(self.ranges) if a <= env < b)

    def _check_actions(self, actions: np.ndarray, start: int, stop: int) -> None:
        shape = (stop - start, *self._action_shape[1:])
        if actions.shape != shape or actions.dtype.kind not in "iu":
            raise GameError(f"{self.family}: actions must be integers of shape {shape}, got "
                            f"{actions.dtype} {actions.shape}")

    def _all(self, command: str, args: list[Any]) -> list[Any]:
        """One command to every worker, then every answer; the first error raised after all
        have answered (no worker is left with an unread answer)."""
        for w, arg in enumerate(args):
            self.transport.send(w, command, arg)
        answers, error = [], None
        for w in range(len(self.ranges)):
            try:
                answers.append(self._receive(w, command))
            except GameError as exc:
                error = error or exc
        if error is not None:
            raise error
        return answers

    def _receive(self, w: int, command: str) -> Any:
        """Worker ``w``'s answer; a ``step`` or ``reset`` of a worker that was lost and comes
        back answers with its new games (:meth:`_revived`)."""
        try:
            return self.transport.receive(w)
        except GameError as exc:
            if command not in ("step", "reset") or w not in self.transport.lost():
                raise
            return self._revived(w, exc, command)

    def _revived(self, w: int, loss: GameError, command: str) -> Part:
        """Worker ``w``'s new games after ``loss``. After a step, the games it was playing end
        there as truncated (no reward for the lost step, the last observations as final
        ones, no episode statistics: no match is counted), and new games begin in its envs.
        Reported on stderr."""
        start, stop = self.ranges[w]
        self.revivals += 1
        seed = None if self._seed is None else self._seed + 7919 * self.revivals
        fresh = self.transport.revive(w, seed)
        print(f"warning: {loss}; envs {start}..{stop - 1} begin new games", file=sys.stderr)
        last = self._last[w]
        if command == "reset" or last is None:
            return fresh
        n, batch = stop - start, fresh.batch
        obs, state = last
        revived = batch._replace(
            reward=np.zeros_like(batch.reward), terminated=np.zeros(n, bool),
            truncated=np.ones(n, bool), episodes=EpisodeStats.empty(),
            final_obs=np.array(obs), final_state=None if state is None else np.array(state))
        self.games_ended(np.arange(start, stop))
        self._lost_envs.append(np.arange(start, stop))
        return Part(revived, np.zeros((0, self.component_width)))

    def take_lost_envs(self) -> np.ndarray:
        """``int [K]``: the envs whose step was lost with their worker since the last call (see
        :class:`~games.core.HasLostWorkers`); clears the record."""
        lost, self._lost_envs = self._lost_envs, []
        return np.concatenate(lost) if lost else np.zeros(0, np.int64)

    def _merge(self, parts: list[Part]) -> Batch:
        components = [p.components for p in parts if p.components is not None]
        self._components = np.concatenate(components) if components else None
        batch = self.transport.join(parts)
        if self.alive is not None:
            batch = batch._replace(alive=self.alive)
        for w, (start, stop) in enumerate(self.ranges):
            self._last[w] = (batch.obs[start:stop],
                             None if batch.state is None else batch.state[start:stop])
        if len(batch.episodes.env):
            self.games_ended(batch.episodes.env)
        return batch

    def games_ended(self, envs: np.ndarray) -> None:
        """Envs ``[K]`` (global, repeats allowed) whose game ended and whose next one began in
        a worker: a hook for subclasses that follow per-env facts (opponent names)."""

    def began(self) -> None:
        """Every env began a game (a reset): a hook for subclasses."""

    # ------------------------------------------------------------------ VecGame

    def reset(self, seed: int | None = None) -> Batch:
        self._check_open()
        self._seed = seed
        batch = self._merge(self._all("reset", [seed] * len(self.ranges)))
        self.began()
        return batch

    def step(self, actions: np.ndarray) -> Batch:
        self._check_open()
        self._check_actions(actions, 0, self.num_envs)
        return self._merge(self._all("step", [actions[a:b] for a, b in self.ranges]))

    # ------------------------------------------------------------------ SupportsPartSteps

    @property
    def parts(self) -> list[tuple[int, int]]:
        """Each worker's env range: a part that steps while the trainer acts for the others."""
        return list(self.ranges)

    def step_part_async(self, part: int, actions: np.ndarray) -> None:
        """Give worker ``part`` its actions ``[stop - start, A, ...]``; it steps unattended."""
        self._check_open()
        start, stop = self.ranges[part]
        self._check_actions(actions, start, stop)
        self._in_flight.add(part)
        self.transport.send(part, "step", actions)

    def step_part_wait(self, part: int) -> Batch:
        """Worker ``part``'s batch (envs numbered from 0 within the part)."""
        start, stop = self.ranges[part]
        self._in_flight.discard(part)
        answer: Part = self._receive(part, "step")
        self._components = answer.components
        self._last[part] = (answer.batch.obs, answer.batch.state)
        if len(answer.batch.episodes.env):
            self.games_ended(answer.batch.episodes.env + start)
        if self.alive is None:
            return answer.batch
        return answer.batch._replace(alive=self.alive[start:stop])

    # ------------------------------------------------------------------ the rest

    def call(self, env: int, command: str, arg: Any) -> Any:
        """A family command for the worker owning ``env``, which must not be stepping
        unattended; its answer."""
        self._check_open()
        w = self._worker_of(env)
        if w in self._in_flight:
            raise GameError(f"{self.family}: {command}({env}) while its worker steps; call it "
                            "after step_part_wait")
        self.transport.send(w, command, arg)
        return self.transport.receive(w)

    def episode_reward_components(self) -> np.ndarray:
        """The reward components of the last batch's episodes, in ``Batch.episodes`` order."""
        if self._components is None:
            return np.zeros((0, self.component_width))
        return self._components

    def render(self, env_index: int = 0) -> np.ndarray:
        """A frame of env ``env_index``, drawn by the worker owning it."""
        return np.asarray(self.call(env_index, "render", env_index - self._start(env_index)))

    def render_final(self, env_index: int = 0) -> np.ndarray:
        """The final frame of env ``env_index``'s last episode, drawn by its worker."""
        return np.asarray(self.call(env_index, "render_final",
                                    env_index - self._start(env_index)))

    def _start(self, env: int) -> int:
        return self.ranges[self._worker_of(env)][0]

    def close(self) -> None:
        """Close every worker's games and end the workers."""
        if self._closed:
            return
        self._closed = True
        self.transport.close()

    def __enter__(self) -> WorkerVecGame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.num_envs} envs over {len(self.ranges)} "
                f"workers: {self.ranges})")
