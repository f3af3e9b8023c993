"""microRTS envs split over worker processes, one JVM each (``game.options.workers``).

One JVM steps its games on one thread (the engine's own ``threads`` option corrupts results),
so with more cores than one, envs are split into contiguous ranges, each stepped by a
:class:`~games.microrts.adapter.MicroRTSVecGame` in a spawned process (never forked: a JVM does
not survive a fork). Every worker builds its range of the same layout
(:func:`~games.microrts.adapter.env_layout`), so env ``e`` has the same opponent, side and map
whatever the number of workers. A step sends each worker its slice of the actions, all
workers step at once, and their batches are joined along the env axis.

Workers ignore SIGINT (Ctrl-C reaches the whole process group; the trainer handles it and
closes the workers). A worker's engine error comes back as :class:`GameError` with the Java
message; a worker that dies is reported as such.
"""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from games.core import Batch, GameError, GameSpec, concat_batches
from games.microrts.adapter import (
    REWARD_COMPONENTS,
    SELFPLAY,
    MicroRTSOptions,
    MicroRTSVecGame,
    env_layout,
)
from games.options import from_mapping, to_mapping
from games.pools import ignore_stop_signals

_JOIN_SECONDS = 10.0


def split_ranges(num_envs: int, workers: int) -> list[tuple[int, int]]:
    """``workers`` contiguous ``(start, stop)`` ranges covering ``0..num_envs`` (sizes differ by
    at most one; no empty range)."""
    workers = max(1, min(workers, num_envs))
    edges = np.linspace(0, num_envs, workers + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def _serve(conn: Connection, options: dict[str, Any], num_envs: int, envs: tuple[int, int],
           seed: int | None, name: str) -> None:
    """A worker process: build its envs, then answer commands until ``close``.

    Ctrl-C, SIGTERM and SIGHUP sent to the whole process group are the trainer's to handle (it
    finishes the update, saves and closes the workers), so the worker ignores them; set before
    the JVM starts, which then leaves them alone.
    """
    ignore_stop_signals()
    try:
        opts = from_mapping(MicroRTSOptions, {**options, "workers": 1}, "game.options.")
        game = MicroRTSVecGame(opts, num_envs, seed=seed, name=name, envs=envs)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", _describe(exc)))
        return
    conn.send(("ready", game.spec))
    try:
        while True:
            command, arg = conn.recv()
            try:
                if command == "step":
                    batch = game.step(arg)
                    conn.send(("ok", (batch, game.episode_reward_components())))
                elif command == "reset":
                    conn.send(("ok", (game.reset(arg), None)))
                elif command == "render":
                    conn.send(("ok", game.render(arg)))
                elif command == "close":
                    game.close()
                    conn.send(("ok", None))
                    return
                else:
                    conn.send(("error", f"unknown worker command {command!r}"))
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                conn.send(("error", _describe(exc)))
    except (EOFError, OSError, KeyboardInterrupt):
        game.close()


def _describe(exc: BaseException) -> str:
    return str(exc) if isinstance(exc, GameError) else f"{type(exc).__name__}: {exc}"


class MicroRTSWorkers:
    """``num_envs`` microRTS envs stepped by ``options.workers`` processes; the same interface
    and the same env layout as :class:`~games.microrts.adapter.MicroRTSVecGame`."""

    reward_component_names: tuple[str, ...] = REWARD_COMPONENTS

    def __init__(self, options: MicroRTSOptions, num_envs: int, seed: int | None = None,
                 name: str = "microrts") -> None:
        layout = env_layout(options, num_envs)  # bad layouts fail here, before any spawn
        self.options = options
        self.num_envs = num_envs
        self.players = layout.players
        self.alive = self.players >= 0
        self.alive.setflags(write=False)
        self.opponent_names = [b.name if b is not None else SELFPLAY for b in layout.bots]
        self.ranges = split_ranges(num_envs, options.workers)
        self._episode_components = np.zeros((0, 6))
        self._closed = False
        self._dead: set[int] = set()  # workers whose process is gone
        context = mp.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        mapping = to_mapping(options)
        for rng in self.ranges:
            parent, child = context.Pipe()
            proc = context.Process(target=_serve, args=(child, mapping, num_envs, rng, seed, name),
                                   daemon=True, name=f"microrts-envs-{rng[0]}-{rng[1]}")
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        try:
            specs: list[GameSpec] = self._gather()
        except BaseException:
            self.close()
            raise
        self.spec = replace(specs[0], num_envs=num_envs)

    # ------------------------------------------------------------------ messaging

    def _send_all(self, messages: list[tuple[str, Any]]) -> None:
        """One message to each worker; a worker whose pipe is broken is marked dead."""
        for w, (conn, message) in enumerate(zip(self._conns, messages, strict=True)):
            try:
                conn.send(message)
            except OSError:
                self._dead.add(w)

    def _gather(self) -> list[Any]:
        """Every worker's answer, in order; the first error raised after all have answered."""
        answers, error = [], None
        for w, ((start, stop), conn) in enumerate(zip(self.ranges, self._conns, strict=True)):
            try:
                if w in self._dead:
                    raise EOFError
                status, payload = conn.recv()
            except (EOFError, OSError):
                self._dead.add(w)
                status, payload = "error", (f"the worker process of envs {start}..{stop - 1} "
                                            "died")
            if status == "error" and error is None:
                error = payload
            answers.append(payload)
        if error is not None:
            raise GameError(error if error.startswith("microR") else f"microrts: {error}")
        return answers

    def _check_open(self) -> None:
        if self._closed:
            raise GameError("microrts: this game was closed")

    def _merge(self, parts: list[tuple[Batch, np.ndarray | None]]) -> Batch:
        components = [c for _, c in parts if c is not None]
        self._episode_components = (np.concatenate(components) if components
                                    else np.zeros((0, 6)))
        batch = concat_batches([b for b, _ in parts], [start for start, _ in self.ranges])
        return batch._replace(alive=self.alive)

    # ------------------------------------------------------------------ VecGame

    def reset(self, seed: int | None = None) -> Batch:
        self._check_open()
        self._send_all([("reset", seed)] * len(self._conns))
        return self._merge(self._gather())

    def step(self, actions: np.ndarray) -> Batch:
        self._check_open()
        if actions.shape[0] != self.num_envs:
            raise GameError(f"microrts: actions must have {self.num_envs} envs, got "
                            f"{actions.shape}")
        self._send_all([("step", actions[start:stop]) for start, stop in self.ranges])
        return self._merge(self._gather())

    # ------------------------------------------------------------------ SupportsPartSteps

    @property
    def parts(self) -> list[tuple[int, int]]:
        """Each worker's env range: a part that steps while the trainer acts for the others."""
        return list(self.ranges)

    def step_part_async(self, part: int, actions: np.ndarray) -> None:
        """Send worker ``part`` its actions ``[stop - start, A, ...]``; it steps unattended."""
        self._check_open()
        start, stop = self.ranges[part]
        if actions.shape[0] != stop - start:
            raise GameError(f"microrts: part {part} has {stop - start} envs, got actions "
                            f"{actions.shape}")
        try:
            self._conns[part].send(("step", actions))
        except OSError:
            self._dead.add(part)

    def step_part_wait(self, part: int) -> Batch:
        """Worker ``part``'s batch (envs numbered from 0 within the part)."""
        start, stop = self.ranges[part]
        try:
            if part in self._dead:
                raise EOFError
            status, payload = self._conns[part].recv()
        except (EOFError, OSError):
            self._dead.add(part)
            status, payload = "error", f"the worker process of envs {start}..{stop - 1} died"
        if status == "error":
            raise GameError(payload if payload.startswith("microR") else f"microrts: {payload}")
        batch, components = payload
        self._episode_components = components if components is not None else np.zeros((0, 6))
        return batch._replace(alive=self.alive[start:stop])

    def episode_reward_components(self) -> np.ndarray:
        """As :meth:`MicroRTSVecGame.episode_reward_components`, in ``Batch.episodes`` order."""
        return self._episode_components

    def render(self, env_index: int = 0) -> np.ndarray:
        self._check_open()
        if not 0 <= env_index < self.num_envs:
            raise GameError(f"microrts: env_index {env_index} out of range 0..{self.num_envs - 1}")
        w = next(i for i, (a, b) in enumerate(self.ranges) if a <= env_index < b)
        self._conns[w].send(("render", env_index - self.ranges[w][0]))
        status, payload = self._conns[w].recv()
        if status == "error":
            raise GameError(payload)
        return np.asarray(payload)

    def close(self) -> None:
        """Close every worker's games and end the processes (their JVMs exit with them)."""
        if self._closed:
            return
        self._closed = True
        for conn in self._conns:
            try:
                conn.send(("close", None))
            except (OSError, ValueError):
                pass
        for proc, conn in zip(self._procs, self._conns, strict=True):
            proc.join(_JOIN_SECONDS)
            if proc.is_alive():
                proc.kill()
                proc.join(_JOIN_SECONDS)
            conn.close()

    def __enter__(self) -> MicroRTSWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()

    def __repr__(self) -> str:
        return (f"MicroRTSWorkers({self.num_envs} envs over {len(self.ranges)} processes: "
                f"{self.ranges})")
