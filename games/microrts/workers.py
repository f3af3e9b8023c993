"""microRTS envs split over worker processes, one JVM each (``game.options.workers``).

One JVM steps its games on one thread (the engine's own ``threads`` option corrupts results),
so with more cores than one, envs are split into contiguous ranges, each stepped by a
:class:`~games.microrts.adapter.MicroRTSVecGame` in a spawned process (never forked: a JVM does
not survive a fork). Every worker builds its range of the same layout
(:func:`~games.microrts.adapter.env_layout`), so env ``e`` has the same opponent, side and map
whatever the number of workers. A step sends each worker its slice of the actions, all
workers step at once, and their batches are joined along the env axis.

The fixed-shape arrays travel through shared memory (:mod:`games.shared_arrays`), not the pipes:
actions in, observations, masks, rewards and ends out, each output double-buffered like the
adapter's own (a batch stays valid until the step after next). The pipes carry commands and the
few variable-size things: finished episodes and their reward components.

Workers ignore SIGINT (Ctrl-C reaches the whole process group; the trainer handles it and
closes the workers). A worker's engine error comes back as :class:`GameError` with the Java
message; a worker that dies is reported as such.
"""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

import numpy as np

from games.batches import concat_batches, concat_episodes
from games.core import Batch, EpisodeStats, GameError, GameSpec
from games.microrts import bots as bots_mod
from games.microrts.adapter import (
    REWARD_COMPONENTS,
    SELFPLAY,
    MicroRTSOptions,
    env_layout,
)
from games.microrts.maps import resolve_maps
from games.microrts.mixed_sizes import vec_game
from games.options import from_mapping, to_mapping
from games.pools import ignore_stop_signals
from games.shared_arrays import ArraySpec, SharedArrays

_JOIN_SECONDS = 10.0


def split_ranges(num_envs: int, workers: int) -> list[tuple[int, int]]:
    """``workers`` contiguous ``(start, stop)`` ranges covering ``0..num_envs`` (sizes differ by
    at most one; no empty range)."""
    workers = max(1, min(workers, num_envs))
    edges = np.linspace(0, num_envs, workers + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]


def shared_layout(spec: GameSpec, num_envs: int) -> tuple[ArraySpec, ...]:
    """The shared arrays of ``num_envs`` envs: ``actions`` (int32), and for each buffer set
    ``f`` in 0, 1: ``obs{f}``, ``final_obs{f}``, ``mask{f}``, ``reward{f}``, ``terminated{f}``,
    ``truncated{f}`` (plus ``state{f}`` and ``final_state{f}`` when the state is not the
    observation)."""
    e, a = num_envs, spec.num_seats
    obs = (e, a, *spec.obs_shape)
    obs_dtype = np.dtype(spec.obs_dtype).name
    specs = [ArraySpec("actions", (e, a, *spec.action_space.action_shape), "int32")]
    for f in (0, 1):
        specs += [ArraySpec(f"obs{f}", obs, obs_dtype), ArraySpec(f"final_obs{f}", obs, obs_dtype),
                  ArraySpec(f"mask{f}", (e, a, *spec.action_space.mask_shape), "bool"),
                  ArraySpec(f"reward{f}", (e, a), "float32"),
                  ArraySpec(f"terminated{f}", (e,), "bool"),
                  ArraySpec(f"truncated{f}", (e,), "bool")]
        if spec.state_shape is not None and not spec.state_is_obs:
            state = (e, a, *spec.state_shape)
            state_dtype = np.dtype(spec.state_dtype).name
            specs += [ArraySpec(f"state{f}", state, state_dtype),
                      ArraySpec(f"final_state{f}", state, state_dtype)]
    return tuple(specs)


class _Reply(NamedTuple):
    """A worker's answer to a step or reset; its arrays are in the shared buffer set ``flip``."""

    flip: int
    episodes: EpisodeStats  # the seat-episodes that ended, envs numbered within the worker
    components: np.ndarray | None  # their reward components
    has_final: bool  # final observations were written for the envs that ended
    state_kind: str  # "obs": the state is the observation, "own": its own array, "none"


class _Publisher:
    """A worker's side of the shared arrays: writes each batch into the next buffer set."""

    def __init__(self, arrays: SharedArrays, envs: tuple[int, int]) -> None:
        self.arrays = arrays
        self.rows = slice(*envs)
        self.start = envs[0]
        self.flip = 1

    def actions(self) -> np.ndarray:
        return self.arrays["actions"][self.rows]

    def publish(self, batch: Batch, components: np.ndarray | None) -> _Reply:
        self.flip ^= 1
        f, arrays, rows = self.flip, self.arrays, self.rows
        assert batch.action_mask is not None, "microRTS batches carry action masks"
        for name, value in (("obs", batch.obs), ("mask", batch.action_mask),
                            ("reward", batch.reward), ("terminated", batch.terminated),
                            ("truncated", batch.truncated)):
            np.copyto(arrays[f"{name}{f}"][rows], value)
        state, final_obs, final_state = batch.state, batch.final_obs, batch.final_state
        state_kind = "none" if state is None else "obs" if state is batch.obs else "own"
        if state is not None and state_kind == "own":
            np.copyto(arrays[f"state{f}"][rows], state)
        if final_obs is not None:
            ended = self.start + np.flatnonzero(batch.terminated | batch.truncated)
            arrays[f"final_obs{f}"][ended] = final_obs[ended - self.start]
            if final_state is not None and state_kind == "own":
                arrays[f"final_state{f}"][ended] = final_state[ended - self.start]
        return _Reply(f, batch.episodes, components, final_obs is not None, state_kind)


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
        game = vec_game(opts, num_envs, seed=seed, name=name, envs=envs)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", _describe(exc)))
        return
    conn.send(("ready", game.spec))
    publisher: _Publisher | None = None
    try:
        while True:
            command, arg = conn.recv()
            try:
                if command == "attach":
                    publisher = _Publisher(SharedArrays.attach(*arg), envs)
                    conn.send(("ok", None))
                elif command == "step":
                    assert publisher is not None, "step before attach"
                    batch = game.step(publisher.actions())
                    conn.send(("ok", publisher.publish(batch, game.episode_reward_components())))
                elif command == "reset":
                    assert publisher is not None, "reset before attach"
                    conn.send(("ok", publisher.publish(game.reset(arg), None)))
                elif command == "render":
                    conn.send(("ok", game.render(arg)))
                elif command == "render_final":
                    conn.send(("ok", game.render_final(arg)))
                elif command == "set_bot":
                    conn.send(("ok", game.set_bot(*arg)))
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
    and the same env layout as :class:`~games.microrts.adapter.MicroRTSVecGame` (``set_bot``
    is forwarded to the worker owning the env; ``opponent_names`` and ``ended_opponent_names``
    follow it here as each worker's games end)."""

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
        map_infos = resolve_maps(options.maps or [options.map], same_size=False)
        self.env_map = [map_infos[k] for k in layout.maps]  # as the adapter's
        self.ended_opponent_names = list(self.opponent_names)  # as the adapter's
        self._pending_names: dict[int, str] = {}  # env -> bot set_bot gave its next game
        self._in_flight: set[int] = set()  # workers stepping unattended (step_part_async)
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
            self.spec = replace(specs[0], num_envs=num_envs)
            arrays = shared_layout(self.spec, num_envs)
            self._arrays = SharedArrays.create(arrays, prefix="selfplay-microrts-")
            try:
                self._send_all([("attach", (arrays, self._arrays.path))] * len(self._conns))
                self._gather()
            finally:
                self._arrays.unlink()  # mapped by every worker now; freed when all exit
        except BaseException:
            self.close()
            raise
        self._action_shape = (num_envs, self.spec.num_seats,
                              *self.spec.action_space.action_shape)

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

    def _view(self, reply: _Reply, start: int, stop: int, has_final: bool) -> Batch:
        """Envs ``start..stop-1`` of the buffer set ``reply`` names, as a batch with the
        reply's episodes."""
        flip, state_kind = reply.flip, reply.state_kind
        arrays, rows = self._arrays, slice(start, stop)
        obs = arrays[f"obs{flip}"][rows]
        final_obs = arrays[f"final_obs{flip}"][rows] if has_final else None
        state = final_state = None
        if state_kind == "obs":
            state, final_state = obs, final_obs
        elif state_kind == "own":
            state = arrays[f"state{flip}"][rows]
            final_state = arrays[f"final_state{flip}"][rows] if has_final else None
        return Batch(obs, arrays[f"mask{flip}"][rows], state, arrays[f"reward{flip}"][rows],
                     arrays[f"terminated{flip}"][rows], arrays[f"truncated{flip}"][rows],
                     self.alive[rows], reply.episodes, final_obs, final_state)

    def _merge(self, replies: list[_Reply]) -> Batch:
        """Every worker's reply as one batch: views of the whole shared arrays when all wrote
        the same buffer set (they step together), else their parts joined."""
        components = [r.components for r in replies if r.components is not None]
        self._episode_components = (np.concatenate(components) if components
                                    else np.zeros((0, 6)))
        starts = [start for start, _ in self.ranges]
        if len({(r.flip, r.state_kind) for r in replies}) == 1:
            whole = self._view(replies[0], 0, self.num_envs, any(r.has_final for r in replies))
            batch = whole._replace(episodes=concat_episodes([r.episodes for r in replies],
                                                            starts))
        else:
            parts = [self._view(r, a, b, r.has_final)
                     for r, (a, b) in zip(replies, self.ranges, strict=True)]
            batch = concat_batches(parts, starts)
        if len(batch.episodes.env):
            self._games_ended(batch.episodes.env)
        return batch

    def _games_ended(self, envs: np.ndarray) -> None:
        """Envs ``[K]`` (global, repeats allowed) whose game ended and whose next one began in
        the worker: their names move on, as the adapter's do (see ``ended_opponent_names``)."""
        for e in np.unique(envs).tolist():
            self.ended_opponent_names[e] = self.opponent_names[e]
            pending = self._pending_names.pop(e, None)
            if pending is not None:
                self.opponent_names[e] = pending

    def _write_actions(self, actions: np.ndarray, start: int, stop: int) -> None:
        """Envs ``start..stop-1``'s actions into the shared array the workers read."""
        shape = (stop - start, *self._action_shape[1:])
        if actions.shape != shape or actions.dtype.kind not in "iu":
            raise GameError(f"microrts: actions must be integers of shape {shape}, got "
                            f"{actions.dtype} {actions.shape}")
        np.copyto(self._arrays["actions"][start:stop], actions, casting="unsafe")

    # ------------------------------------------------------------------ VecGame

    def reset(self, seed: int | None = None) -> Batch:
        self._check_open()
        self._send_all([("reset", seed)] * len(self._conns))
        batch = self._merge(self._gather())
        for e, name in self._pending_names.items():  # every env began a game
            self.opponent_names[e] = name
        self._pending_names.clear()
        return batch

    def bot_choices(self) -> list[str]:
        """As :meth:`MicroRTSVecGame.bot_choices`."""
        return bots_mod.canonical_pool(list(self.options.bots))

    def set_bot(self, env: int, bot: str) -> str:
        """As :meth:`MicroRTSVecGame.set_bot` (from env ``env``'s next game on), in the worker
        owning the env, which must not be stepping unattended; the bot's canonical name."""
        self._check_open()
        if not 0 <= env < self.num_envs:
            raise GameError(f"microrts: env {env} out of range 0..{self.num_envs - 1}")
        w = next(i for i, (a, b) in enumerate(self.ranges) if a <= env < b)
        if w in self._in_flight:
            raise GameError(f"microrts: set_bot({env}) while its worker steps; call it after "
                            "step_part_wait")
        try:
            if w in self._dead:
                raise EOFError
            self._conns[w].send(("set_bot", (env - self.ranges[w][0], bot)))
            status, payload = self._conns[w].recv()
        except (EOFError, OSError):
            self._dead.add(w)
            start, stop = self.ranges[w]
            status, payload = "error", f"the worker process of envs {start}..{stop - 1} died"
        if status == "error":
            raise GameError(payload if payload.startswith("microR") else f"microrts: {payload}")
        self._pending_names[env] = str(payload)
        return str(payload)

    def step(self, actions: np.ndarray) -> Batch:
        self._check_open()
        self._write_actions(actions, 0, self.num_envs)
        self._send_all([("step", None)] * len(self._conns))
        return self._merge(self._gather())

    # ------------------------------------------------------------------ SupportsPartSteps

    @property
    def parts(self) -> list[tuple[int, int]]:
        """Each worker's env range: a part that steps while the trainer acts for the others."""
        return list(self.ranges)

    def step_part_async(self, part: int, actions: np.ndarray) -> None:
        """Give worker ``part`` its actions ``[stop - start, A, ...]``; it steps unattended."""
        self._check_open()
        start, stop = self.ranges[part]
        self._write_actions(actions, start, stop)
        self._in_flight.add(part)
        try:
            self._conns[part].send(("step", None))
        except OSError:
            self._dead.add(part)

    def step_part_wait(self, part: int) -> Batch:
        """Worker ``part``'s batch (envs numbered from 0 within the part)."""
        start, stop = self.ranges[part]
        self._in_flight.discard(part)
        try:
            if part in self._dead:
                raise EOFError
            status, payload = self._conns[part].recv()
        except (EOFError, OSError):
            self._dead.add(part)
            status, payload = "error", f"the worker process of envs {start}..{stop - 1} died"
        if status == "error":
            raise GameError(payload if payload.startswith("microR") else f"microrts: {payload}")
        reply: _Reply = payload
        self._episode_components = (reply.components if reply.components is not None
                                    else np.zeros((0, 6)))
        if len(reply.episodes.env):
            self._games_ended(reply.episodes.env + start)
        return self._view(reply, start, stop, reply.has_final)

    def episode_reward_components(self) -> np.ndarray:
        """As :meth:`MicroRTSVecGame.episode_reward_components`, in ``Batch.episodes`` order."""
        return self._episode_components

    def render(self, env_index: int = 0) -> np.ndarray:
        """As :meth:`MicroRTSVecGame.render`, drawn by the worker owning the env."""
        return self._render("render", env_index)

    def render_final(self, env_index: int = 0) -> np.ndarray:
        """As :meth:`MicroRTSVecGame.render_final`, drawn by the worker owning the env."""
        return self._render("render_final", env_index)

    def _render(self, command: str, env_index: int) -> np.ndarray:
        self._check_open()
        if not 0 <= env_index < self.num_envs:
            raise GameError(f"microrts: env_index {env_index} out of range 0..{self.num_envs - 1}")
        w = next(i for i, (a, b) in enumerate(self.ranges) if a <= env_index < b)
        self._conns[w].send((command, env_index - self.ranges[w][0]))
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
