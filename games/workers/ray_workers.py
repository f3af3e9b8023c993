"""Ray workers: each worker a Ray actor holding its envs, on a local instance or a cluster.

Actions go to an actor as a method argument and its batch comes back as the result, both
through Ray's object store (arrays above Ray's inline limit are read without a copy, then
joined into one batch here). Actors are spread over the nodes (``SPREAD``). An actor that dies
with its node or process is restarted by Ray up to ``max_restarts`` times (its games begin
again; :meth:`RayWorkers.receive` reports the loss as a :class:`GameError` and
:meth:`RayWorkers.lost` names the workers to reset); after that, its error ends the run.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import numpy as np

from games.batches import concat_batches
from games.core import Batch, GameError, GameSpec
from games.workers.host import GameHost, Part, WorkerRecipe, describe, prefixed
from games.workers.ray_cluster import RaySession


def _packed(part: Part) -> Part:
    """``part`` as it travels: the legal-action mask as bits (8x fewer bytes to serialize),
    its shape in the token."""
    mask = part.batch.action_mask
    if mask is None:
        return part
    return part._replace(batch=part.batch._replace(action_mask=np.packbits(mask, axis=None)),
                         token=mask.shape)


def _unpacked(part: Part) -> Part:
    """The part as the worker made it, with arrays the caller may write (Ray hands large
    arrays over read-only, straight from its object store or the reply)."""
    batch = part.batch
    fields: dict[str, Any] = {
        name: np.array(value) for name, value in batch._asdict().items()
        if isinstance(value, np.ndarray) and not value.flags.writeable}
    if isinstance(part.token, tuple) and batch.action_mask is not None:
        shape: tuple[int, ...] = part.token
        fields["action_mask"] = np.unpackbits(
            batch.action_mask, count=int(np.prod(shape))).view(bool).reshape(shape)
    return Part(batch._replace(**fields), part.components)


class ActorHost:
    """The actor's body: a :class:`GameHost`, answering ``("ok", value)`` or ``("error",
    message)`` (a game's error is one line, not Ray's remote traceback)."""

    def __init__(self, recipe: WorkerRecipe) -> None:
        self.host: GameHost | None = None
        self.error: str | None = None
        try:
            self.host = GameHost(recipe)
        except BaseException as exc:  # noqa: BLE001 - reported through spec()
            self.error = describe(exc)

    def _run(self, command: str, arg: Any) -> tuple[str, Any]:
        if self.host is None:
            return "error", self.error
        try:
            host = self.host
            if command == "spec":
                return "ok", host.spec
            if command == "reset":
                return "ok", _packed(host.reset(arg))
            if command == "step":
                return "ok", _packed(host.step(arg))
            if command in ("render", "render_final"):
                return "ok", host.render(command == "render_final", arg)
            if command == "close":
                host.close()
                return "ok", None
            return "ok", host.call(command, arg)
        except BaseException as exc:  # noqa: BLE001 - reported to the parent
            return "error", describe(exc)

    def run(self, command: str, arg: Any = None) -> tuple[str, Any]:
        """Answer one command."""
        return self._run(command, arg)

    def node(self) -> str:
        """The id of the node this actor runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())


class RayWorkers:
    """One actor per recipe; the parent's side of :mod:`games.workers.vec`'s transport."""

    def __init__(self, recipes: list[WorkerRecipe], num_envs: int, session: RaySession,
                 max_restarts: int = 3, cpus_per_worker: float = 1.0,
                 sharing_runs: int = 1) -> None:
        ray = session.ray
        self.session = session
        self.recipes = recipes
        self.ranges = [r.envs for r in recipes]
        self.family = recipes[0].family
        self.num_envs = num_envs
        self.restarts = [0] * len(recipes)  # losses seen per worker
        self.max_restarts = max_restarts
        self._lost: set[int] = set()
        self._closed = False
        self.actors: list[Any] = []
        self._pending: list[Any] = []
        # the actors would wait for CPUs for ever (Ray queues them): ``sharing_runs``
        # processes (data-parallel ranks) each start as many workers on the cluster
        need = cpus_per_worker * len(recipes) * sharing_runs
        have = float(ray.cluster_resources().get("CPU", 0.0))
        if need > have + 1e-6:
            ranks = f" x {sharing_runs} ranks" if sharing_runs > 1 else ""
            raise GameError(f"{self.family}: {len(recipes)} Ray workers x {cpus_per_worker:g} "
                            f"CPU{ranks} (distributed.workers x distributed.worker_cpus) need "
                            f"{need:g} CPUs; the Ray cluster has {have:g}: lower them, or raise "
                            "distributed.num_cpus (a local instance) or the cluster's CPUs")
        free = float(ray.available_resources().get("CPU", 0.0))  # before ours take theirs
        remote = ray.remote(ActorHost).options(num_cpus=cpus_per_worker, max_restarts=max_restarts,
                                               scheduling_strategy="SPREAD")
        self.actors = [remote.remote(recipe) for recipe in recipes]
        self._pending = [None] * len(recipes)
        try:
            for w in range(len(recipes)):
                self.send(w, "spec")
            self._wait_started(have, free, need / sharing_runs, cpus_per_worker)
            specs: list[GameSpec] = [self.receive(w) for w in range(len(recipes))]
        except BaseException:
            self.close()
            raise
        self.spec = replace(specs[0], num_envs=num_envs)

    def _wait_started(self, have: float, free: float, need: float, cpus_per_worker: float,
                      patience_s: float = 30.0, limit_s: float = 600.0) -> None:
        """Wait for every actor's first answer. Ray queues an actor until a CPU is free, for
        ever: when the cluster had fewer CPUs ``free`` than these actors ``need`` (other runs
        hold them), a :class:`GameError` once some have not started after ``patience_s`` and
        no CPU has come free; in any case after ``limit_s``."""
        ray = self.session.ray
        start = time.monotonic()
        while True:
            _, waiting = ray.wait(list(self._pending), num_returns=len(self._pending),
                                  timeout=5.0)
            if not waiting:
                return
            waited = time.monotonic() - start
            now = float(ray.available_resources().get("CPU", 0.0))
            queued = need > free + 1e-6 and now + 1e-6 < cpus_per_worker
            if (queued and waited >= patience_s) or waited >= limit_s:
                raise GameError(
                    f"{self.family}: {len(waiting)} of {len(self._pending)} Ray workers have "
                    f"not started after {waited:.0f} s; they need {need:g} CPUs and the "
                    f"cluster had {free:g} of its {have:g} free (other runs or actors hold "
                    "the rest): wait for them, or lower distributed.workers")

    def send(self, w: int, command: str, arg: Any = None) -> None:
        """Call worker ``w``'s actor (``step``: with its actions) without waiting."""
        self._pending[w] = self.actors[w].run.remote(command, arg)

    def receive(self, w: int) -> Any:
        """Worker ``w``'s answer; a :class:`GameError` with its error, or saying it was lost
        (then :meth:`lost` names it until it is reset)."""
        ray = self.session.ray
        future, self._pending[w] = self._pending[w], None
        if future is None:
            raise GameError(f"{self.family}: worker {w} has no command to answer")
        start, stop = self.ranges[w]
        try:
            status, payload = ray.get(future)
        except ray.exceptions.RayActorError as exc:
            self.restarts[w] += 1
            self._lost.add(w)
            left = self.max_restarts - self.restarts[w]
            what = (f"restarted by Ray ({left} restart(s) left)" if left >= 0 else
                    "not restarted: max_restarts reached")
            raise GameError(f"{self.family}: the Ray actor of envs {start}..{stop - 1} died, "
                            f"{what}: {str(exc).splitlines()[0]}") from exc
        if status == "error":
            raise GameError(prefixed(self.family, str(payload)))
        if isinstance(payload, Part):
            self._lost.discard(w)
            return _unpacked(payload)
        return payload

    def lost(self) -> set[int]:
        """Workers lost since their last answer (their games begin again on ``reset``)."""
        return set(self._lost)

    def revive(self, w: int, seed: int | None, timeout_s: float = 120.0) -> Part:
        """Worker ``w``'s new games once Ray has restarted its actor (while restarts are
        left); a :class:`GameError` when none are, or it is not back within ``timeout_s``."""
        start, stop = self.ranges[w]
        if self.restarts[w] > self.max_restarts:
            raise GameError(f"{self.family}: the Ray actor of envs {start}..{stop - 1} was lost "
                            f"{self.restarts[w]} times (distributed.max_restarts "
                            f"{self.max_restarts}); stopping")
        ray = self.session.ray
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                status, payload = ray.get(self.actors[w].run.remote("reset", seed))
                break
            except ray.exceptions.RayActorError as exc:
                if time.monotonic() > deadline:
                    raise GameError(f"{self.family}: the Ray actor of envs {start}..{stop - 1} "
                                    f"did not come back within {timeout_s:g} s") from exc
                time.sleep(0.5)
        if status == "error":
            raise GameError(prefixed(self.family, str(payload)))
        self._lost.discard(w)
        return _unpacked(payload)

    def nodes(self) -> list[str]:
        """The node each worker's actor runs on."""
        return [str(n) for n in self.session.ray.get([a.node.remote() for a in self.actors])]

    def join(self, parts: list[Part]) -> Batch:
        """The parts joined along the env axis (writable arrays of their own)."""
        starts = [start for start, _ in self.ranges]
        return concat_batches([p.batch for p in parts], starts)

    def close(self) -> None:
        """Close the actors' games and end the actors."""
        if self._closed:
            return
        self._closed = True
        ray = self.session.ray
        closing = [actor.run.remote("close") for actor in self.actors]
        try:
            ray.wait(closing, num_returns=len(closing), timeout=10.0)
        except Exception:  # noqa: BLE001, S110 - a dead actor has nothing to close
            pass
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.session.close()


