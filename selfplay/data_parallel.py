"""Data-parallel learning over several processes: ``torchrun --nproc-per-node N selfplay train``.

Each of the ``N`` ranks steps ``game.num_envs / N`` envs with its own seed, so the update's
global batch is the ranks' rollouts side by side (rank ``r``'s envs are the global envs
``r * E' .. (r + 1) * E' - 1``). The update is the single-process update of that global batch:

- every rank draws the same permutation of the global rows (the learner's generator is seeded
  alike on every rank), and for each minibatch computes the loss of the rows it holds, scaled by
  its share of the minibatch; the gradients are summed across ranks (:meth:`Ranks.sum_`), so
  they are the gradient of the minibatch's mean loss;
- advantages are normalized with the whole minibatch's mean and std
  (:meth:`Ranks.normalize_advantages`);
- running normalization statistics (observations, rewards, values) that each rank updates on
  its own data are merged into the statistics of all ranks' data (:meth:`Ranks.merged`).

Gradient clipping and the Adam step then run on identical gradients, so every rank holds the
same network, bit for bit. :class:`Ranks` with ``world == 1`` (no ``torchrun``) does no
communication and leaves the single-process results bit-identical.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar, cast

import numpy as np
import torch
import torch.distributed as dist
from torch import Tensor

from selfplay.config import ConfigError, TrainConfig
from selfplay.losses import explained_variance
from selfplay.normalize import RunningMeanStd

COLLECTIVE_TIMEOUT_S = 1800
"""how long a rank waits for the others, in the rendezvous and in every collective (torch's
default): rank 0 may work alone for minutes (a rating tournament with
``league.eval_process: false``, a slow checkpoint write) while the others wait"""
RANK_SEED_STRIDE = 1_000_003
"""Rank ``r`` seeds its games and acting draws with ``seed + r * RANK_SEED_STRIDE``."""


class RankLost(Exception):
    """A rank of a data-parallel run stopped (killed, its machine gone): the others cannot
    go on; the run resumes from its last checkpoint."""


def lost_peer(exc: BaseException) -> bool:
    """Whether ``exc`` is a collective failing because a peer rank is gone."""
    if isinstance(exc, dist.DistError):
        return True
    text = str(exc)
    return any(word in text for word in ("gloo", "Gloo", "NCCL", "Connection reset",
                                         "Connection closed by peer"))


def lost_rank_line(rank: int, world: int, exc: BaseException) -> str:
    """``"rank 1 of this 2-rank run was lost (<why>)"`` as rank ``rank`` sees the failure
    ``exc`` of a collective: with two ranks the lost one is the other; with more, one of the
    others (each rank's own output says whether it is the one that stopped)."""
    who = (f"rank {1 - rank} of this 2-rank run" if world == 2
           else f"another of the {world} ranks of this run")
    return f"{who} was lost ({peer_reason(exc)})"


def peer_reason(exc: BaseException) -> str:
    """The first line of a lost peer's error, without the C++ source location gloo puts
    first, cut at a word boundary."""
    lines = str(exc).strip().splitlines()
    text = re.sub(r"\[[^\]]*\.(?:cc|cpp|h|hpp):\d+\]\s*", "", lines[0] if lines else "")
    text = text or type(exc).__name__
    if len(text) > 160:
        text = text[:160].rsplit(" ", 1)[0] + " ..."
    return text


class SameOnEveryRank(ConfigError):
    """A refusal every rank of a launch reaches alike: under ``torchrun``, whose ranks share
    one terminal, only rank 0 prints it (:func:`echoes_rank_0`)."""


def echoes_rank_0() -> bool:
    """Whether this process is a rank other than 0 of a ``torchrun`` launch, where the ranks
    write to one terminal: what every rank would print alike is left to rank 0 (ranks
    started by hand, each in its own terminal, all print)."""
    return bool(os.environ.get("TORCHELASTIC_RUN_ID")) and world_from_environment()[0] != 0


def world_from_environment() -> tuple[int, int, int]:
    """``(rank, world, local_rank)`` as ``torchrun`` sets them (``(0, 1, 0)`` without it)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        rank = int(os.environ.get("RANK", "0"))
        local = int(os.environ.get("LOCAL_RANK", str(rank)))
    except ValueError as exc:
        raise ConfigError(f"WORLD_SIZE, RANK and LOCAL_RANK must be integers ({exc})") from exc
    if world < 1 or not 0 <= rank < world or local < 0:
        raise ConfigError(f"RANK={rank} of WORLD_SIZE={world} (LOCAL_RANK={local}): ranks run "
                          "from 0 to WORLD_SIZE-1; start the ranks with torchrun "
                          "--nproc-per-node N, which sets them")
    return rank, world, local


def pin_gloo_to_loopback() -> None:
    """Keep single-machine gloo traffic on the loopback interface.

    Without ``GLOO_SOCKET_IFNAME``, gloo uses the address that the host name resolves to. On
    machines whose host name resolves to an external or filtered interface, the ranks then
    cannot connect and abort. When all ranks run here (``MASTER_ADDR`` resolves to a loopback
    address, or no ``MASTER_ADDR`` at all for a file rendezvous), this points gloo at the
    loopback interface. A ``GLOO_SOCKET_IFNAME`` that is already set is kept."""
    if "GLOO_SOCKET_IFNAME" in os.environ:
        return
    try:
        master = socket.gethostbyname(os.environ.get("MASTER_ADDR", "127.0.0.1"))
    except OSError:
        return
    if not master.startswith("127."):
        return
    names = [name for _, name in socket.if_nameindex()]
    loopback = next((n for n in names if n == "lo" or n.startswith("lo0")), None)
    if loopback is not None:
        os.environ["GLOO_SOCKET_IFNAME"] = loopback


def distributed_problems(config: TrainConfig, world: int) -> list[str]:
    """Why ``config`` cannot train on ``world`` ranks (empty when it can)."""
    if world == 1:
        return []
    problems = []
    if config.collection == "async":
        problems.append("collection: async runs in one process (data-parallel ranks collect "
                        "in lockstep): resume it with one process, or start a new "
                        "data-parallel run from its weights with --init-from RUN_DIR --set "
                        "collection=sync")
    if config.game.num_envs % world:
        problems.append(f"game.num_envs={config.game.num_envs} is not divisible by the "
                        f"{world} ranks (each rank steps num_envs / ranks envs)")
    if config.distributed.backend == "ray" and config.distributed.address == "local":
        problems.append("distributed.address=local would start a private Ray instance per "
                        "rank: start a cluster (`ray start --head`) and set "
                        "distributed.address=auto (or HOST:PORT); each rank then runs its "
                        "own workers on it")
    if config.device.startswith("cuda:"):
        problems.append(f"device={config.device} puts every rank on one GPU: use device=cuda "
                        "(rank r takes cuda:LOCAL_RANK)")
    return problems


@dataclass(frozen=True)
class RowShard:
    """This rank's rows of an update's global batch (every rank's trained rows, ordered as one
    process stepping all the envs would order them: by step, then by env)."""

    total: int
    """rows in the global batch"""
    local_of: Tensor | None
    """``int64 [total]``: the local row of each global row, -1 for the other ranks' rows;
    None with one rank (every row is local)"""

    def select(self, rows: Tensor) -> Tensor:
        """The local rows among global rows ``rows`` (in their order)."""
        if self.local_of is None:
            return rows
        local = self.local_of[rows]
        return local[local >= 0]


class Ranks:
    """This process's place among the ranks of a data-parallel run, and their collectives;
    ``Ranks()`` is the single process (every collective a no-op)."""

    def __init__(self, rank: int = 0, world: int = 1, local_rank: int = 0,
                 comm_device: torch.device | None = None) -> None:
        self.rank = rank
        self.world = world
        self.local_rank = local_rank
        self.comm_device = comm_device or torch.device("cpu")
        """where tensors go to be reduced (CUDA with nccl)"""

    @property
    def is_main(self) -> bool:
        """Rank 0: the rank that writes checkpoints, logs and progress."""
        return self.rank == 0

    def seed(self, seed: int) -> int:
        """The seed of this rank's games and acting draws."""
        return seed + self.rank * RANK_SEED_STRIDE

    def local_envs(self, num_envs: int) -> int:
        """Envs this rank steps."""
        return num_envs // self.world

    def device(self, device: torch.device) -> torch.device:
        """The run's device for this rank (``cuda`` becomes ``cuda:LOCAL_RANK``)."""
        if self.world > 1 and device.type == "cuda":
            return torch.device("cuda", self.local_rank)
        return device

    # ------------------------------------------------------------------ collectives

    def sum_(self, tensor: Tensor) -> Tensor:
        """Sum ``tensor`` over the ranks, in place; returns it."""
        if self.world > 1:
            if tensor.device == self.comm_device:
                dist.all_reduce(tensor)
            else:
                moved = tensor.to(self.comm_device)
                dist.all_reduce(moved)
                tensor.copy_(moved)
        return tensor

    def max_ints(self, values: Sequence[int]) -> list[int]:
        """The largest of each value over the ranks (flags every rank must agree on)."""
        if self.world == 1:
            return list(values)
        packed = torch.tensor(list(values), dtype=torch.int64, device=self.comm_device)
        dist.all_reduce(packed, op=dist.ReduceOp.MAX)
        return [int(v) for v in packed.tolist()]

    def broadcast_(self, tensors: Sequence[Tensor]) -> None:
        """Overwrite ``tensors`` with rank 0's, in place."""
        if self.world == 1:
            return
        for tensor in tensors:
            moved = tensor.to(self.comm_device)
            dist.broadcast(moved, 0)
            if moved is not tensor:
                tensor.copy_(moved)

    def barrier(self) -> None:
        if self.world > 1:
            dist.barrier()

    def gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, on rank 0 (the other ranks get an empty list)."""
        if self.world == 1:
            return [obj]
        out: list[Any] | None = [None] * self.world if self.is_main else None
        dist.gather_object(obj, out, dst=0)
        return out or []

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj``, on every rank (what the other ranks pass is ignored)."""
        if self.world == 1:
            return obj
        box = [obj if self.is_main else None]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, on every rank."""
        if self.world == 1:
            return [obj]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    # ------------------------------------------------------------------ the update's math

    def shard_rows(self, trained: Tensor, device: torch.device) -> RowShard:
        """Where this rank's trained rows (``bool [T, E', A]``, taken in step-major order as
        :func:`~selfplay.rollout.step_rows` takes them) sit in the global batch; its
        :meth:`RowShard.select` takes row indices on ``device``."""
        steps = trained.shape[0]
        per_step = trained.reshape(steps, -1).sum(1)  # [T] this rank's rows at each step
        if self.world == 1:
            return RowShard(int(per_step.sum()), None)
        counts = per_step.to(self.comm_device)
        everyone = [torch.empty_like(counts) for _ in range(self.world)]
        dist.all_gather(everyone, counts)
        table = torch.stack(everyone, 1).cpu()  # [T, W] rows of each rank at each step
        starts = (table.reshape(-1).cumsum(0) - table.reshape(-1)).view(steps, self.world)
        step_of = torch.nonzero(trained.reshape(steps, -1))[:, 0]  # [K] each local row's step
        first_local = per_step.cumsum(0) - per_step  # [T] first local row of each step
        local = torch.arange(len(step_of))
        global_row = starts[step_of, self.rank] + (local - first_local[step_of])
        local_of = torch.full((int(table.sum()),), -1, dtype=torch.int64)
        local_of[global_row] = local
        return RowShard(len(local_of), local_of.to(device))

    def normalize_advantages(self, adv: Tensor) -> Tensor:
        """Advantages of this rank's rows of a minibatch, normalized with the whole
        minibatch's mean and unbiased std (``+ 1e-8``); left as they are below two rows (as
        :func:`~selfplay.losses.ppo_loss` with ``norm_adv`` does)."""
        if self.world == 1:
            return (adv - adv.mean()) / (adv.std() + 1e-8) if adv.numel() >= 2 else adv
        x = adv.detach().double()
        moments = torch.stack([x.new_tensor(float(x.numel())), x.sum(), x.square().sum()])
        count, total, squares = self.sum_(moments).tolist()
        if count < 2:
            return adv
        mean = total / count
        std = math.sqrt(max(squares - total * mean, 0.0) / (count - 1.0))
        return (adv - mean) / (std + 1e-8)

    @contextlib.contextmanager
    def merged(self, stats: Sequence[RunningMeanStd]) -> Iterator[None]:
        """Running statistics that each rank updates inside the block on its own data become,
        after it, the statistics of every rank's data (the same on every rank)."""
        if self.world == 1 or not stats:
            yield
            return
        before = [(s.mean.clone(), s.var.clone(), s.count.clone()) for s in stats]
        yield
        # each rank's additions, as sums of (x - m0) and (x - m0)^2 around the common mean m0
        parts = []
        for s, (m0, v0, c0) in zip(stats, before, strict=True):
            shift = s.mean - m0
            parts += [(s.count - c0).reshape(1), (s.count * shift).reshape(-1),
                      (s.count * (s.var + shift.square()) - c0 * v0).reshape(-1)]
        packed = self.sum_(torch.cat([p.to(self.comm_device, torch.float64) for p in parts]))
        at = 0
        for s, (m0, v0, c0) in zip(stats, before, strict=True):
            size = s.mean.numel()
            added = packed[at].to(s.count.device)
            s1 = packed[at + 1:at + 1 + size].to(s.mean.device).view_as(m0)
            s2 = packed[at + 1 + size:at + 1 + 2 * size].to(s.mean.device).view_as(m0)
            at += 1 + 2 * size
            total = c0 + added
            s.mean.copy_(m0 + s1 / total)
            s.var.copy_(((c0 * v0 + s2) / total - (s1 / total).square()).clamp_min(0.0))
            s.count.copy_(total)

    def explained_variance(self, pred: Tensor, target: Tensor) -> float:
        """:func:`~selfplay.losses.explained_variance` over every rank's rows."""
        if self.world == 1:
            return explained_variance(pred, target)
        y = target.detach().double().reshape(-1)
        r = y - pred.detach().double().reshape(-1)
        sums = torch.stack([y.new_tensor(float(y.numel())), y.sum(), y.square().sum(),
                            r.sum(), r.square().sum()])
        n, sy, syy, sr, srr = self.sum_(sums).tolist()
        if n == 0:
            return float("nan")
        var_y = syy / n - (sy / n) ** 2
        if var_y <= 0.0:
            return float("nan")
        return 1.0 - (srr / n - (sr / n) ** 2) / var_y

    def average_metrics(self, metrics: dict[str, float],
                        weights: dict[str, float] | None = None,
                        summed: Sequence[str] = ("episodes",)) -> dict[str, float]:
        """Per-rank metrics (episode returns, win rates) averaged over the ranks that report
        them, each weighted by its ``weights`` entry (how many episodes the rank's window
        holds; 1 where none is given); the ``summed`` ones (counts) added up."""
        if self.world == 1:
            return metrics
        every = self.all_gather((metrics, weights or {}))
        keys = sorted({key for m, _ in every for key in m})
        out = {}
        for key in keys:
            values = [(m[key], float(w.get(key, 1.0))) for m, w in every if key in m]
            if key in summed:
                out[key] = float(sum(v for v, _ in values))
                continue
            total = sum(w for _, w in values)
            out[key] = float(sum(v * w for v, w in values) / total if total > 0
                             else np.mean([v for v, _ in values]))
        return out

    def close(self, failed: bool = False) -> None:
        """Leave the process group (after the run), all ranks together: a rank that tears
        gloo down while a peer still talks to it can abort in C++ at exit. After a failure
        (a lost rank, say) no rank waits for the others."""
        if self.world > 1 and dist.is_initialized():
            if not failed:
                try:
                    dist.barrier()
                except RuntimeError:  # a peer is gone: nothing to wait for
                    pass
            dist.destroy_process_group()


def rendezvous_store(rank: int, world: int, timeout_s: float) -> dist.TCPStore | None:
    """The store the ranks meet at (``MASTER_ADDR``/``MASTER_PORT``, rank 0 hosting it, as
    torch's ``env://`` makes it), waiting ``timeout_s`` for every rank to connect
    (``distributed.rendezvous_timeout_s``) and then the collectives' timeout. ``None``
    (torch's own rendezvous) under a
    ``torchrun`` agent, which hosts the store itself, or without those variables (torch names
    what is missing)."""
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        return None
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if host is None or port is None:
        return None
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"MASTER_PORT={port!r} is not a port number") from None
    if not 0 < number < 2 ** 16:
        raise ConfigError(f"MASTER_PORT={port!r} is not a port number (1-65535)")
    store = interruptible(lambda: dist.TCPStore(
        host, number, world, is_master=rank == 0, wait_for_workers=True,
        timeout=timedelta(seconds=timeout_s)), timeout_s + RENDEZVOUS_GRACE_S,
        f"the rendezvous at {host}:{number} (MASTER_ADDR:MASTER_PORT) did not answer within "
        f"{timeout_s:g} s: is rank 0 running, and is that port its own and not another "
        "program's?")
    store.set_timeout(timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    return store


RENDEZVOUS_GRACE_S = 10.0
"""how much longer than its own timeout the store's connection may take before the rank stops
(a connection to a program that accepts it and never answers blocks in C++ for good)"""

T = TypeVar("T")


def interruptible(make: Callable[[], T], limit_s: float, late: str) -> T:
    """``make()`` (a blocking call into C++ that releases the GIL) in a daemon thread, waited
    for in short slices: Ctrl-C and SIGTERM stop the rank at once (their handlers run between
    slices, which they cannot while the main thread is inside the call), and after
    ``limit_s`` a ``RuntimeError`` saying ``late``. A call left behind blocks nothing at
    exit."""
    done: dict[str, Any] = {}

    def call() -> None:
        try:
            done["value"] = make()
        except BaseException as exc:  # handed to the main thread
            done["error"] = exc

    thread = threading.Thread(target=call, name="rendezvous", daemon=True)
    thread.start()
    end = time.monotonic() + limit_s
    while thread.is_alive():
        thread.join(0.25)
        if thread.is_alive() and time.monotonic() > end:
            raise RuntimeError(late)
    if "error" in done:
        raise done["error"]
    return cast(T, done["value"])


def join_ranks(config: TrainConfig) -> Ranks:
    """This process's :class:`Ranks`: the process group ``torchrun`` describes (``WORLD_SIZE``
    > 1) joined with gloo on CPU, nccl on CUDA; ``Ranks()`` without ``torchrun``. A one-line
    :class:`ConfigError` for settings that several ranks cannot train with."""
    rank, world, local_rank = world_from_environment()
    if world == 1:
        return Ranks()
    problems = distributed_problems(config, world)
    if problems:
        raise SameOnEveryRank(f"cannot train on {world} ranks: " + "; ".join(problems))
    cuda = config.device == "cuda" or (config.device == "auto" and torch.cuda.is_available())
    comm_device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    if not dist.is_initialized():
        if cuda:
            torch.cuda.set_device(comm_device)
        else:
            pin_gloo_to_loopback()
        try:
            store = rendezvous_store(rank, world, config.distributed.rendezvous_timeout_s)
            dist.init_process_group("nccl" if cuda else "gloo", rank=rank, world_size=world,
                                    timeout=timedelta(seconds=COLLECTIVE_TIMEOUT_S),
                                    store=store)
        except ConfigError:  # a setting of ours: its own line
            raise
        except (RuntimeError, ValueError) as exc:  # DistNetworkError, DistStoreError too
            first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
            raise ConfigError(
                f"rank {rank} of {world} could not join the others ({type(exc).__name__}: "
                f"{first}); check MASTER_ADDR, MASTER_PORT (free, the same for every rank), "
                "GLOO_SOCKET_IFNAME and that all WORLD_SIZE ranks start (torchrun "
                "--nproc-per-node N sets them)") from exc
    return Ranks(rank, world, local_rank, comm_device)
