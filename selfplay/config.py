"""Typed training configuration: the settings of a run as frozen dataclasses, and the checks
that types alone cannot express (:func:`validate`). Reading them from ``hyperparams/`` YAML
files and overrides: :mod:`selfplay.config_files`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from games.options import to_mapping
from selfplay.bc_config import BCConfig, bc_checks
from selfplay.distributed_config import DistributedConfig, distributed_checks
from selfplay.league_config import LeagueConfig, league_checks, new_league_checks


class ConfigError(ValueError):
    """A bad configuration: unknown key, wrong type, missing or malformed file."""


@dataclass(frozen=True)
class GameConfig:
    name: str = "CartPole-v1"
    """Registered game name (see `selfplay train --help`)."""
    num_envs: int = 8
    """Parallel environments stepped together."""
    options: dict[str, Any] = field(default_factory=dict)
    """Adapter-specific options, validated by the adapter."""


@dataclass(frozen=True)
class PPOConfig:
    num_steps: int = 128
    """Steps per environment per rollout."""
    learning_rate: float = 2.5e-4
    anneal_lr: bool = True
    """Linearly decay the learning rate to 0 over total_steps."""
    adam_eps: float = 1e-5
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    """Normalize advantages per minibatch."""
    clip_coef: float = 0.2
    clip_vloss: bool = True
    ent_coef: float = 0.01
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    """Stop the update epochs early when approx-KL exceeds this."""
    teacher_kl_coef: float = 0.0
    """Needs init_from: weight of KL(teacher || policy) in the loss, the teacher being the
    network the run started from (frozen), so the policy stays near it early on; decays
    linearly to 0 over teacher_kl_steps. 0: off."""
    teacher_kl_steps: int | None = None
    """Env steps over which teacher_kl_coef decays linearly to 0 (None: total_steps)."""
    stagger_games: bool = True
    """Where every game lasts the same number of steps (:class:`games.core.SupportsStaggering`;
    Lux's last 1,000), each env's first game ends early, truncated (its value bootstrapped),
    at a length of its own, so that a rollout holds every phase of a game, not the same few
    steps of all envs' games. No effect on other games."""


@dataclass(frozen=True)
class NetworkConfig:
    kind: Literal["auto", "mlp", "nature_cnn", "impala_cnn", "gridnet"] = "auto"
    """Torso: auto picks mlp for vectors, nature_cnn for images, gridnet for grid actions."""
    hidden: list[int] = field(default_factory=lambda: [64, 64])
    """MLP layer widths (and the critic MLP head for CNN torsos)."""
    activation: Literal["tanh", "relu"] = "tanh"
    channels: list[int] = field(default_factory=lambda: [16, 32, 32])
    """IMPALA / gridnet channel widths."""
    critic_input: Literal["auto", "obs", "state"] = "auto"
    """auto: the global state when the game provides one (centralized critic), else obs."""
    shared_torso: bool = False
    """Actor and critic share the torso (only when the critic reads the observation)."""
    log_std_init: float = 0.0
    """Initial log standard deviation of continuous actions."""
    grid_skips: bool = False
    """gridnet: a U-Net (the decoder joins each upsampled map with the encoder's map of the same
    size, and the input planes before the logits), so every cell's logits see its own cell at
    full resolution; for large boards (Lux's 48x48). False: the encoder-decoder of MicroRTS-Py."""
    grid_head: int = 0
    """gridnet with ``grid_skips``: a 1x1 convolution squeezes the joined full-size maps to this
    many channels (then ReLU) before the 3x3 convolution to the logits; 0: the 3x3 convolution
    reads the joined maps. On 48x48 Lux boards that convolution over every cell is a third of
    the network's multiply-adds, and 16 channels cut it to a quarter; policies compute it at
    the cells with a legal action only, where the squeeze saves little."""
    grid_hidden: int = 0
    """gridnet with ``grid_skips``: the 3x3 convolution over the joined full-size maps gives
    this many channels, and after a ReLU a 1x1 convolution gives the logits, so each cell's
    logits are a nonlinear function of its 3x3 neighbourhood (a unit's own cargo deciding
    towards which neighbour it steps); 0: that 3x3 convolution gives the logits, linear in the
    neighbourhood's features."""
    grid_cells: list[int] = field(default_factory=list)
    """gridnet with ``grid_skips``: hidden widths of a per-cell MLP head instead of the U-Net's
    decoder (:mod:`selfplay.cell_decoder`): each cell's logits from its neighbourhood of the
    input planes (``grid_cell_radius``) and the encoder's coarser maps at it, a nonlinear
    function of the neighbourhood, computed at the cells with a legal action only (no
    transposed convolutions back to full size); empty: the U-Net decoder."""
    grid_cell_radius: int = 1
    """``grid_cells``: how many cells each way of the input planes a cell's logits read (1: its
    3x3 neighbourhood)."""
    grid_cell_pool: int = 1
    """``grid_cells``: the encoder's stages read the board average-pooled by this factor (2: a
    48x48 board's first convolution on 24x24, a quarter of the work), while the cell head
    still reads each cell's neighbourhood of the input planes at full size; 1: no pooling."""
    grid_cell_context: bool = False
    """``grid_cells``: every cell's logits also read the whole board, the mean and the max of
    the encoder's final map over it (global pooling), for decisions that hang on the team as a
    whole (the water of all its factories, the count of its robots); False: each cell sees its
    neighbourhood and the coarser maps' cells over it only."""
    grid_cell_bins: int = 0
    """``grid_cells``: each cell's own input planes also enter the head binned: every plane's
    value in [0, 1] cut into this many equal bins, each (plane, bin) a learned vector added to
    the first hidden layer (a one-hot encoding of the numbers). A rule that turns on a
    threshold (a robot goes home at half its cargo, a factory waters above a reserve) is then
    one step between two bins, where a linear reading of the plane learns only a gentle slope
    across it; 40 bins split [0, 1] at every 0.025. 0: the planes' values only."""
    ignore_planes: list[str] = field(default_factory=list)
    """gridnet: observation planes (by the game's names for them) the actor does not read: they
    are zeroed at its input (bots still read every plane). For ablations, and against
    behaviour cloning's "copycat" problem, where a plane that repeats a unit's last action
    (Lux's ``queued_*``) lets a clone copy it instead of learning when to change it (on Lux's
    clones it did not help: BENCHMARKS.md, session 30)."""
    grid_critic: Literal["pool", "flatten"] = "pool"
    """gridnet's critic head: pool (the mean and max of the encoder's features over the board's
    cells: any board size) or flatten (a dense layer over the whole feature map, tied to the
    board size; networks saved before size-agnostic ones load as flatten)."""


@dataclass(frozen=True)
class NormalizeConfig:
    obs: bool = False
    """Running mean/std normalization of observations (continuous control)."""
    reward: bool = False
    """Scale rewards by the running std of the discounted return."""
    value: bool = False
    """Critic predicts normalized returns (running mean/std of the value targets)."""
    clip_obs: float = 10.0
    clip_reward: float = 10.0


@dataclass(frozen=True)
class LogConfig:
    tensorboard: bool = True
    wandb: bool = False
    wandb_project: str = "selfplay"
    wandb_mode: Literal["offline", "online"] = "offline"
    """offline needs no account or network; `wandb sync` uploads later."""
    progress: bool = True
    """Show a progress bar (steps/s, recent returns)."""
    return_window: int = 20
    """Episodes averaged in the reported mean return and length (``episode/return_mean``);
    the win, draw and loss rates (``episode/win_rate``...) count the last ``max(100,
    return_window)`` decided games against other players (not the learner itself)."""


@dataclass(frozen=True)
class CheckpointConfig:
    every_updates: int = 20
    """A checkpoint every this many updates ..."""
    every_minutes: float = 2.0
    """... and at the first update boundary after this many minutes of training since the last
    one (0: off), so a killed run loses at most about this much whatever an update costs."""
    keep: int = 3
    """Most recent checkpoints kept (older ones are deleted)."""


@dataclass(frozen=True)
class TrainConfig:
    game: GameConfig = field(default_factory=GameConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    network: NetworkConfig = field(default_factory=NetworkConfig)
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    log: LogConfig = field(default_factory=LogConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    league: LeagueConfig = field(default_factory=LeagueConfig)
    bc: BCConfig = field(default_factory=BCConfig)
    """Behaviour cloning (``selfplay bc``)."""
    distributed: DistributedConfig = field(default_factory=DistributedConfig)
    """Where rollout workers run (local processes or Ray actors)."""
    seed: int = 1
    total_steps: int = 100_000
    """Environment steps (summed over envs) to train for."""
    init_from: str | None = None
    """The checkpoint a new run takes its network from (actor, critic and normalization
    statistics; a fresh optimizer and counters): ``selfplay train --init-from``, which records
    the file here (a run directory means its newest checkpoint). A PPO, behaviour-cloning or
    league-snapshot checkpoint of the same game and network. A resumed run continues from its
    own checkpoint and never loads this again."""
    torch_threads: int = 1
    """Intra-op threads for torch (1 is fastest for small networks)."""
    acting_threads: int | None = None
    """Intra-op threads for the rollout's acting passes (None: ``torch_threads``). One thread can
    be fastest where the batches are tiny or another busy thread (a JVM compiling an engine's
    code) shares the cores: torch's threads wait for each other at every operator."""
    device: str = "cpu"
    """Where the network runs: cpu, cuda, cuda:N, or auto (CUDA when available). The update
    runs on this device; the rollout buffer stays on the host, except what a game with device
    arrays hands over (``array_handover``)."""
    precision: Literal["float32", "bfloat16"] = "float32"
    """The learner's arithmetic: ``bfloat16`` runs its forward passes and losses under
    ``torch.autocast`` (matrix products and convolutions in bfloat16, weights, optimizer state
    and log-probabilities in float32): faster where the hardware multiplies bfloat16 (CPUs with
    AMX or AVX-512 BF16, NVIDIA Ampere or later), slower where it does not. Acting passes stay
    in float32."""
    array_handover: Literal["auto", "host", "dlpack"] = "auto"
    """How a game's observations, masks and actions reach the network. ``host``: NumPy arrays
    on the host. ``dlpack``: a game whose engine keeps them on an accelerator (JAX: Lux)
    hands them to torch by DLPack, without a copy when both use the same device, and the
    rollout buffer's observations, masks and actions stay on ``device``, so a GPU run never
    round-trips them through the host. ``auto``: ``dlpack`` where the game can, else
    ``host``."""
    pipeline: bool = True
    """With a game whose envs step in several processes (microRTS ``game.options.workers``
    >= 2), step each part while the actions of the others are computed, so env and network
    time overlap (double-buffered sampling). Each env follows the same policy as in lockstep;
    the random draws come in another order, and running normalization statistics
    (``normalize.obs``, ``normalize.reward``) are updated part by part."""
    collection: Literal["sync", "async"] = "sync"
    """``sync``: each update collects a rollout, then learns from it (exact: a resumed run
    continues bit for bit). ``async``: the next rollout is collected while the update learns
    (one process, data-parallel ranks excepted), by a copy of the network one update old, so
    env stepping and learning overlap; the policy lag is one update at most, and PPO's clipped
    ratio against the acting copy's log-probabilities (which the rollout stores) corrects for
    it. League matchmaking and episode statistics reach the next rollout but one. A checkpoint
    waits for the rollout in progress and learns it first, so a run resumed from one goes on
    exactly as the run that wrote it; that makes the next rollout's weights fresh, so timed
    checkpoints (``checkpoint.every_minutes``) and a stop (Ctrl-C, SIGTERM) make the course
    depend on when they came: a stopped and resumed run is not bit-identical to an
    uninterrupted one."""
    pipeline_groups: int = 2
    """Pipelined collection: the worker processes are split into this many groups of
    neighbours, and the trainer acts for a group's envs with one forward pass while the other
    groups step. 2 is double buffering; more groups overlap more but cost one forward pass
    each per step, which on a GPU (fixed cost per pass) outweighs the overlap."""
    keep_freed_memory: bool = True
    """On CPU, keep freed memory in the process instead of returning it to the kernel (glibc
    only; process-wide, for the rest of the process): large tensors are then reused without
    page faults, which makes CPU training of conv networks up to 15 % faster; the process
    holds on to its peak memory."""
    fast_inference: bool = True
    """Act with a NumPy copy of small MLP policies in the rollout (same results, faster)."""


def validate(config: TrainConfig, on_this_machine: bool = True) -> None:
    """Cross-field checks that types alone cannot express: :class:`ConfigError` naming the
    first bad key. :func:`config_from_mapping` (so :func:`build_config`) calls it; a
    :class:`TrainConfig` built in code can be checked the same way. ``on_this_machine``: also
    that this machine has ``device`` (not for a saved run's config, read to play or rate its
    weights on any machine)."""
    rows = config.ppo.num_steps * config.game.num_envs  # rows of one update, per learner seat
    checks = [
        (config.game.num_envs >= 1, "game.num_envs must be >= 1"),
        (config.ppo.num_steps >= 1, "ppo.num_steps must be >= 1"),
        (config.ppo.num_minibatches >= 1, "ppo.num_minibatches must be >= 1"),
        (config.ppo.num_steps < 1 or config.game.num_envs < 1
         or config.ppo.num_minibatches <= rows,
         f"ppo.num_minibatches ({config.ppo.num_minibatches}) exceeds the rows of one update, "
         f"ppo.num_steps * game.num_envs ({config.ppo.num_steps} * {config.game.num_envs} = "
         f"{rows}), so a minibatch would hold less than one row; set ppo.num_minibatches <= "
         f"{rows} or raise ppo.num_steps / game.num_envs"),
        (config.ppo.update_epochs >= 1, "ppo.update_epochs must be >= 1"),
        (config.ppo.learning_rate > 0, "ppo.learning_rate must be > 0"),
        (0 < config.ppo.gamma <= 1, "ppo.gamma must be in (0, 1]"),
        (0 <= config.ppo.gae_lambda <= 1, "ppo.gae_lambda must be in [0, 1]"),
        (config.total_steps >= 1, "total_steps must be >= 1"),
        (config.torch_threads >= 1, "torch_threads must be >= 1"),
        (config.acting_threads is None or config.acting_threads >= 1,
         "acting_threads must be >= 1 (or null: same as torch_threads)"),
        (config.checkpoint.every_updates >= 1, "checkpoint.every_updates must be >= 1"),
        (config.checkpoint.keep >= 1, "checkpoint.keep must be >= 1"),
        (all(h >= 1 for h in config.network.hidden), "network.hidden widths must be >= 1"),
        (config.network.grid_head >= 0, "network.grid_head must be >= 0 (0: none)"),
        (config.network.grid_head == 0 or config.network.grid_skips,
         "network.grid_head needs network.grid_skips: true (it squeezes the U-Net's full-size "
         "maps)"),
        (config.network.grid_hidden >= 0, "network.grid_hidden must be >= 0 (0: none)"),
        (all(w > 0 for w in config.network.grid_cells),
         "network.grid_cells: every hidden width must be > 0"),
        (not config.network.grid_cells or config.network.grid_skips,
         "network.grid_cells needs network.grid_skips: true (the cell head reads the encoder's "
         "finer maps)"),
        (not config.network.grid_cells or (config.network.grid_head == 0
                                           and config.network.grid_hidden == 0),
         "network.grid_cells replaces the U-Net decoder: leave network.grid_head and "
         "network.grid_hidden at 0"),
        (config.network.grid_cell_radius >= 0, "network.grid_cell_radius must be >= 0"),
        (config.network.grid_cell_pool >= 1, "network.grid_cell_pool must be >= 1 (1: none)"),
        (not config.network.grid_cell_context or config.network.grid_cells,
         "network.grid_cell_context needs network.grid_cells (the board context is an input "
         "of the per-cell head)"),
        (config.network.grid_cell_bins >= 0, "network.grid_cell_bins must be >= 0 (0: none)"),
        (not config.network.grid_cell_bins or config.network.grid_cells,
         "network.grid_cell_bins needs network.grid_cells (the bins are an input of the "
         "per-cell head)"),
        (config.network.grid_cell_pool == 1 or config.network.grid_cells,
         "network.grid_cell_pool needs network.grid_cells (the U-Net's decoder joins maps of "
         "the input's size)"),
        (config.network.grid_hidden == 0 or config.network.grid_skips,
         "network.grid_hidden needs network.grid_skips: true (it widens the U-Net's logits "
         "convolution)"),
        (config.ppo.clip_coef > 0, "ppo.clip_coef must be > 0"),
        (config.ppo.max_grad_norm > 0, "ppo.max_grad_norm must be > 0"),
        (config.ppo.teacher_kl_coef >= 0, "ppo.teacher_kl_coef must be >= 0 (0: off)"),
        (config.ppo.teacher_kl_steps is None or config.ppo.teacher_kl_steps >= 1,
         "ppo.teacher_kl_steps must be >= 1 (or null: total_steps)"),
        (config.ppo.teacher_kl_coef == 0 or config.init_from is not None,
         "ppo.teacher_kl_coef > 0 needs init_from, the checkpoint whose network is the "
         "teacher: give --init-from CHECKPOINT, or set ppo.teacher_kl_coef=0"),
        (config.seed >= 0, "seed must be >= 0"),
        (config.log.return_window >= 1, "log.return_window must be >= 1"),
        (config.pipeline_groups >= 1, "pipeline_groups must be >= 1"),
        (config.collection == "sync" or not config.league.bot_env_pfsp,
         "collection: async and league.bot_env_pfsp are exclusive: the bot envs' next bots "
         "are drawn as their games end, which an async rollout reports one update late"),
        *league_checks(config.league),
        *bc_checks(config.bc),
        (config.bc.snapshot_every == 0 or config.league.enabled,
         "bc.snapshot_every rates the clone's snapshots in the league: set "
         "league.enabled=true, or bc.snapshot_every=0"),
        *distributed_checks(config.distributed),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    if not on_this_machine:
        return
    from selfplay.device import resolve_device

    try:
        resolve_device(config.device)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


# bounds where ``.inf`` means "none" (no clipping)
_UNBOUNDED_OK = frozenset({"normalize.clip_obs", "normalize.clip_reward", "ppo.max_grad_norm"})


def check_finite(mapping: dict[str, Any], prefix: str = "") -> None:
    """Every number in a config is finite (``.inf`` also allowed for the clipping bounds):
    ``.nan`` or ``.inf`` in a YAML file or ``--set`` would train on NaN losses without a word.
    :class:`ConfigError` naming the key."""
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            check_finite(value, f"{name}.")
        elif isinstance(value, float) and not math.isfinite(value) and not (
                name in _UNBOUNDED_OK and value == math.inf):
            raise ConfigError(f"{name} must be a finite number, got {value}")
        elif isinstance(value, (list, tuple)) and any(
                isinstance(item, float) and not math.isfinite(item) for item in value):
            raise ConfigError(f"{name} must hold finite numbers, got {list(value)}")


CEILINGS = {
    "game.num_envs": 2**20, "bc.num_envs": 2**20, "torch_threads": 1024,
    "acting_threads": 1024, "log.return_window": 10**6, "league.eval_games": 10**5,
    "league.anchor_calibration_games": 10**5,
    "league.eval_envs": 2**16, "league.eval_pool": 10**4, "bc.validation_stride": 10**5,
    "network.hidden": 2**16, "network.channels": 2**16, "total_steps": 2**62,
    "bc.total_steps": 2**62, "ppo.update_epochs": 10**4,
}
"""the largest value of settings with no natural bound: a typo such as 1e30 (an int to
YAML) is one line here, not an overflow, a hang or an allocation deep in training"""


def check_ceilings(settings: Mapping[str, Any]) -> None:
    """:class:`ConfigError` naming the first setting of :data:`CEILINGS` above its ceiling
    (every item of a list setting)."""
    for key, ceiling in CEILINGS.items():
        value: Any = settings
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, (int, float)) and v > ceiling for v in values):
            raise ConfigError(f"{key} must be <= {ceiling:,}, got {value}")


def check_new_settings(config: TrainConfig) -> None:
    """Checks of a config being made (:func:`build_config`), beyond :func:`validate`, which
    also reads saved runs: settings older versions accepted, so saved runs holding them still
    load, play and resume. :class:`ConfigError` naming the key."""
    settings = to_mapping(config)
    check_finite(settings)
    ppo, normalize = config.ppo, config.normalize
    checks = [
        *new_league_checks(config.league),
        (normalize.clip_obs > 0, f"normalize.clip_obs must be > 0 (.inf: no clipping), got "
                                 f"{normalize.clip_obs}"),
        (normalize.clip_reward > 0, f"normalize.clip_reward must be > 0 (.inf: no clipping), "
                                    f"got {normalize.clip_reward}"),
        (ppo.target_kl is None or ppo.target_kl > 0,
         f"ppo.target_kl must be > 0 (or null: no early stop), got {ppo.target_kl}"),
        (ppo.vf_coef >= 0, f"ppo.vf_coef must be >= 0, got {ppo.vf_coef}"),
        (ppo.ent_coef >= 0, f"ppo.ent_coef must be >= 0, got {ppo.ent_coef}"),
        (ppo.adam_eps > 0, f"ppo.adam_eps must be > 0, got {ppo.adam_eps}"),
        (abs(config.network.log_std_init) <= 20, "network.log_std_init must be in [-20, 20] "
         f"(a log standard deviation), got {config.network.log_std_init}"),
        (config.bc.adam_eps > 0, f"bc.adam_eps must be > 0, got {config.bc.adam_eps}"),
        (config.checkpoint.every_minutes >= 0,
         f"checkpoint.every_minutes must be >= 0 (0: off), got "
         f"{config.checkpoint.every_minutes}"),
        (all(c >= 1 for c in config.network.channels),
         f"network.channels must be >= 1, got {config.network.channels}"),
        (config.collection == "sync" or config.acting_threads is None,
         "acting_threads sets the acting passes' threads of collection: sync; with "
         "collection: async acting runs in a thread of its own under torch_threads (torch's "
         "count is the process's): drop acting_threads"),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)
    check_ceilings(settings)
    if not 0 <= config.seed < 2**63:  # torch's generators take no more
        raise ConfigError(f"seed must be in 0..2**63-1, got {config.seed}")
    address, backend = config.distributed.address, config.distributed.backend
    if backend != "ray" and address != "local":
        raise ConfigError(f"distributed.address={address} names a Ray cluster, but "
                          f"distributed.backend is {backend!r}: add distributed.backend=ray, "
                          "or drop the address")


# --------------------------------------------------------------------------- loading


