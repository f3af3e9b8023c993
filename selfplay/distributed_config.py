"""Settings of runs beyond one process: the ``distributed`` section of a training config.

Where a game's rollout workers run (``backend``: this machine's worker processes, or Ray
actors on a local Ray instance or a cluster) and how the run reaches the cluster. The learner's
own data parallelism needs no setting: ``torchrun --nproc-per-node N selfplay train ...``
starts N ranks (see :mod:`selfplay.data_parallel`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Backend = Literal["local", "ray"]


@dataclass(frozen=True)
class DistributedConfig:
    backend: Backend = "local"
    """Where the game's worker processes run (microRTS ``game.options.workers``): ``local``,
    this machine's processes exchanging arrays through shared memory; ``ray``, Ray actors
    (``pip install 'selfplay[ray]'``), on the instance or cluster ``address`` names."""
    address: str = "local"
    """``ray`` only. ``local``: start a private Ray instance for this run (its files under the
    run directory, no dashboard); ``auto``: join the cluster already running on this machine
    (``ray start --head``); ``HOST:PORT``: the head node of a cluster."""
    num_cpus: int | None = None
    """``ray`` with ``address: local``: CPUs the private instance offers (None: the
    machine's)."""
    object_store_mb: int = 256
    """``ray`` with ``address: local``: the object store's size in MiB (Ray's minimum: 75)."""
    connect_timeout_s: float = 20.0
    """``ray``: seconds to reach the cluster before the run stops with an error naming it."""
    worker_cpus: float = 1.0
    """``ray``: CPUs each worker actor reserves (fractions allowed: 0.5 lets two share a
    core; a lost actor restarts only where its share is free)."""
    max_restarts: int = 3
    """``ray``: times a lost worker actor is restarted (the games it was playing end there as
    truncated, new ones begin) before the run stops with the worker's error."""
    workers: int = 2
    """``ray``, games without worker processes of their own (Lux, Atari, tic-tac-toe): the
    actors their envs are split over (microRTS: ``game.options.workers``)."""
    rendezvous_timeout_s: float = 600.0
    """data-parallel ranks started by hand (``WORLD_SIZE``, ``RANK``, ``MASTER_ADDR``,
    ``MASTER_PORT`` without torchrun): seconds they wait for every rank to connect before
    the run stops with one line (a collective then waits 30 minutes for a rank at work)."""


def distributed_checks(cfg: DistributedConfig) -> list[tuple[bool, str]]:
    """``(ok, message)`` pairs that :func:`selfplay.config.validate` raises on."""
    address_ok = cfg.address in ("local", "auto") or _host_port(cfg.address)
    return [
        (address_ok, f"distributed.address must be local, auto or HOST:PORT, got "
                     f"{cfg.address!r}"),
        (cfg.num_cpus is None or cfg.num_cpus >= 1,
         "distributed.num_cpus must be >= 1 (or null: the machine's)"),
        (cfg.object_store_mb >= 75, "distributed.object_store_mb must be >= 75 (Ray's minimum)"),
        (cfg.connect_timeout_s > 0, "distributed.connect_timeout_s must be > 0"),
        (cfg.max_restarts >= 0, "distributed.max_restarts must be >= 0"),
        (cfg.worker_cpus > 0, "distributed.worker_cpus must be > 0"),
        (cfg.workers >= 1, "distributed.workers must be >= 1"),
        (cfg.rendezvous_timeout_s > 0, "distributed.rendezvous_timeout_s must be > 0"),
    ]


def _host_port(address: str) -> bool:
    host, sep, port = address.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 < int(port) < 65536)
