"""Local workers: spawned processes on this machine, arrays through shared memory.

Processes are spawned, never forked (a JVM does not survive a fork). The fixed-shape arrays
travel through shared memory (:mod:`games.shared_arrays`), not the pipes: actions in,
observations, masks, rewards and ends out, each output double-buffered like an adapter's own (a
batch stays valid until the step after next). The pipes carry commands and the few
variable-size things: finished episodes and their reward components.

Workers ignore SIGINT, SIGTERM and SIGHUP (sent to the whole process group, they are the
trainer's to handle: it finishes the update, saves and closes the workers). A worker's error
comes back as its one-line message; a worker that dies is reported as such.
"""

from __future__ import annotations

import multiprocessing as mp
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any, NamedTuple

import numpy as np

from games.batches import concat_batches, concat_episodes
from games.core import Batch, EpisodeStats, GameError, GameSpec
from games.pools import ignore_stop_signals, start_resource_tracker
from games.shared_arrays import ArraySpec, SharedArrays
from games.workers.host import GameHost, Part, WorkerRecipe, describe, prefixed

_JOIN_SECONDS = 10.0


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

    def publish(self, part: Part) -> _Reply:
        self.flip ^= 1
        f, arrays, rows, batch = self.flip, self.arrays, self.rows, part.batch
        if batch.action_mask is None:
            raise GameError("worker games must have action masks")
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
        return _Reply(f, batch.episodes, part.components, final_obs is not None, state_kind)


def _serve(conn: Connection, recipe: WorkerRecipe) -> None:
    """A worker process: build its envs, then answer commands until ``close``. Stop signals
    are ignored before any engine starts (a JVM then leaves them alone)."""
    ignore_stop_signals()
    try:
        host = GameHost(recipe)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent
        conn.send(("error", describe(exc)))
        return
    conn.send(("ready", host.spec))
    publisher: _Publisher | None = None
    try:
        while True:
            command, arg = conn.recv()
            try:
                if command == "attach":
                    publisher = _Publisher(SharedArrays.attach(*arg), recipe.envs)
                    conn.send(("ok", None))
                elif command in ("step", "reset"):
                    assert publisher is not None, f"{command} before attach"
                    part = (host.step(publisher.actions()) if command == "step"
                            else host.reset(arg))
                    conn.send(("ok", publisher.publish(part)))
                elif command in ("render", "render_final"):
                    conn.send(("ok", host.render(command == "render_final", arg)))
                elif command == "close":
                    host.close()
                    conn.send(("ok", None))
                    return
                else:
                    conn.send(("ok", host.call(command, arg)))
            except BaseException as exc:  # noqa: BLE001 - reported to the parent
                conn.send(("error", describe(exc)))
    except (EOFError, OSError, KeyboardInterrupt):
        host.close()


class LocalWorkers:
    """One spawned process per recipe; the parent's side of :mod:`games.workers.vec`'s
    transport (``send``, ``receive``, ``join``, ``close``)."""

    def __init__(self, recipes: list[WorkerRecipe], num_envs: int) -> None:
        self.recipes = recipes
        self.ranges = [r.envs for r in recipes]
        self.family = recipes[0].family
        self.num_envs = num_envs
        self._dead: set[int] = set()
        self._closed = False
        start_resource_tracker()
        context = mp.get_context("spawn")
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        for recipe in recipes:
            parent, child = context.Pipe()
            start, stop = recipe.envs
            proc = context.Process(target=_serve, args=(child, recipe), daemon=True,
                                   name=f"{recipe.family}-envs-{start}-{stop}")
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        try:
            specs: list[GameSpec] = self._gather()
            self.spec = replace(specs[0], num_envs=num_envs)
            layout = shared_layout(self.spec, num_envs)
            self._arrays = SharedArrays.create(layout, prefix=f"selfplay-{self.family}-")
            try:
                for w in range(len(recipes)):
                    self.send(w, "attach", (layout, self._arrays.path))
                self._gather()
            finally:
                self._arrays.unlink()  # mapped by every worker now; freed when all exit
        except BaseException:
            self.close()
            raise

    def _gather(self) -> list[Any]:
        """Every worker's answer, in order; the first error raised after all have answered."""
        answers, error = [], None
        for w in range(len(self._conns)):
            try:
                answers.append(self.receive(w))
            except GameError as exc:
                error = error or exc
                answers.append(None)
        if error is not None:
            raise error
        return answers

    def send(self, w: int, command: str, arg: Any = None) -> None:
        """Send worker ``w`` a command; ``step``'s ``arg`` is the worker's actions, written to
        the shared array it reads."""
        if command == "step":
            start, stop = self.ranges[w]
            np.copyto(self._arrays["actions"][start:stop], arg, casting="unsafe")
            arg = None
        try:
            if w in self._dead:
                raise OSError
            self._conns[w].send((command, arg))
        except OSError:
            self._dead.add(w)

    def receive(self, w: int) -> Any:
        """Worker ``w``'s answer: a :class:`Part` for ``step`` and ``reset``; a
        :class:`GameError` with its message, or saying it died."""
        try:
            if w in self._dead:
                raise EOFError
            status, payload = self._conns[w].recv()
        except (EOFError, OSError):
            self._dead.add(w)
            start, stop = self.ranges[w]
            status, payload = "error", f"the worker process of envs {start}..{stop - 1} died"
        if status == "error":
            raise GameError(prefixed(self.family, payload))
        if isinstance(payload, _Reply):
            start, stop = self.ranges[w]
            return Part(self._view(payload, start, stop, payload.has_final),
                        payload.components, payload)
        return payload

    def _view(self, reply: _Reply, start: int, stop: int, has_final: bool) -> Batch:
        """Envs ``start..stop-1`` of the buffer set ``reply`` names, with its episodes."""
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
        alive = np.ones((stop - start, self.spec.num_seats), bool)
        return Batch(obs, arrays[f"mask{flip}"][rows], state, arrays[f"reward{flip}"][rows],
                     arrays[f"terminated{flip}"][rows], arrays[f"truncated{flip}"][rows],
                     alive, reply.episodes, final_obs, final_state)

    def join(self, parts: list[Part]) -> Batch:
        """Every worker's part as one batch: views of the whole shared arrays when all wrote
        the same buffer set (they step together), else the parts joined. ``alive`` is all
        True here; the caller sets its own."""
        replies: list[_Reply] = [p.token for p in parts]  # type: ignore[misc]
        starts = [start for start, _ in self.ranges]
        if len({(r.flip, r.state_kind) for r in replies}) == 1:
            whole = self._view(replies[0], 0, self.num_envs, any(r.has_final for r in replies))
            return whole._replace(episodes=concat_episodes([r.episodes for r in replies],
                                                           starts))
        return concat_batches([p.batch for p in parts], starts)

    def lost(self) -> set[int]:
        """None: a local worker that dies does not come back (its error ends the run)."""
        return set()

    def revive(self, w: int, seed: int | None) -> Part:
        start, stop = self.ranges[w]
        raise GameError(f"{self.family}: the worker process of envs {start}..{stop - 1} "
                        "cannot be restarted")

    def close(self) -> None:
        """Close every worker's games and end the processes."""
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
