"""Settings of behaviour cloning (``selfplay bc``): the ``bc`` section of a training config.

Who plays the games (live scripted teachers or recorded replays) and whose moves are learned
are settings too, so a run directory's ``config.yaml`` describes the whole run and a resumed
run plays the same teachers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

ValueTarget = Literal["reward", "outcome"]


@dataclass(frozen=True)
class BCConfig:
    teachers: list[str] = field(default_factory=list)
    """Live teachers: the game family's scripted players (e.g. [win_or_block, random]),
    spread over seats and envs. Exclusive with replays."""
    replays: str | None = None
    """A folder of recorded games replayed through the engine. Exclusive with teachers."""
    imitate: list[str] = field(default_factory=list)
    """Learn only these players' moves (names as the teachers or replays call them; empty:
    every teacher's)."""
    winners_only: bool = False
    """Learn only the moves of each game's winner (replays only)."""
    total_steps: int = 1_000_000
    """Environment steps (summed over envs) to clone for."""
    num_envs: int = 16
    """Teacher games stepped together."""
    num_steps: int = 64
    """Steps per env collected per update."""
    learning_rate: float = 3.0e-4
    anneal_lr: bool = False
    """Linearly decay the learning rate to 0 over bc.total_steps."""
    adam_eps: float = 1.0e-5
    epochs: int = 1
    """Passes over each update's collected steps."""
    minibatches: int = 4
    """Minibatches per pass (one forward/backward each)."""
    value_coef: float = 0.5
    """Weight of the value head's loss."""
    value_target: ValueTarget = "reward"
    """What the value head learns the discounted return of. ``reward``: the game's own
    per-step reward, the one PPO's critic learns (in microRTS game.options.reward_weights'
    weighted sum, the win/loss outcome included), so ``selfplay train --init-from`` starts PPO
    from a critic on its own scale. ``outcome``: +1 for a win, -1 for a loss, 0 otherwise, on
    the step an episode ends (a value head on its own scale, which PPO must relearn)."""
    gamma: float | None = None
    """Discount of the value targets (None: ppo.gamma, the discount PPO's critic uses)."""
    gae_lambda: float = 1.0
    """1: Monte-Carlo value targets (bootstrapped at the rollout's end only; no extra
    critic pass); below 1: GAE-style lambda-returns from the value head."""
    max_grad_norm: float = 0.5
    balance: float = 0.0
    """How much rare labels weigh: each learned component's label weighs (its value's share
    among the labels of that component learned so far) ** -balance, scaled to weigh 1 on
    average (:func:`selfplay.bc_loss.balance_weights`). 0: plain cross-entropy; 1: every value
    weighs as much in all as any other (class-balanced); 0.5 in between. For teachers whose
    decisive orders are rare: microRTS's produce orders among no-ops, Lux's builds and watering
    among "none"."""
    phase_weights: list[float] = field(default_factory=list)
    """How much each part of a game weighs: the game's length cut into as many equal parts as
    there are weights, the policy loss of a position from part ``k`` weighs
    ``phase_weights[k]`` (normalized over each minibatch's counted cells, so the loss keeps its
    scale). [] (default): every position weighs 1. For a clone whose games are lost in one
    phase (Lux: the last 30 %, where the raid's rules switch). Games that tell their
    progress only (:class:`games.core.SupportsGameProgress`: Lux)."""
    student_share: float = 0.0
    """DAgger: the share of imitated seats that the network being trained plays itself
    (sampled actions) for a whole game, drawn at each game's start, while their teachers go on
    labelling them (their games' outcomes: ``students/win_rate``); 0:
    the teachers play every seat. A clone learns only at the states its teachers reach, and
    its own mistakes take it to states no label covers; the labels at the states its own
    play reaches teach it to recover. Live teachers only (replays follow their record)."""
    student_ramp: float = 0.0
    """The share of bc.total_steps over which the student share rises linearly from 0 to
    bc.student_share (0: the full share from the first update)."""
    stagger_games: bool = True
    """Spread the live teacher games over a game's phases where every game lasts the same
    number of steps (:class:`games.core.SupportsStaggering`; Lux's last 1,000): each env's
    first game ends early, truncated, at a length of its own. Without it every env is at the
    same step of its game, one update's batch (bc.num_steps steps) holds one phase of a game
    alone, and the network drifts, update after update, towards the phase it saw last: Lux
    clones of one recipe won 80 or 11 of 100 games by where in the game their last updates
    fell (BENCHMARKS.md, session 37). No effect on other games."""
    snapshot_every: int = 0
    """Cloning updates between snapshots of the network in the run's league database
    (``league.db``, else RUN_DIR/league.db), each rated when it is taken, as a training run's
    newest snapshot is (against ``league.eval_pool`` earlier snapshots and
    ``league.anchors``; in a rater process with ``league.eval_process``); 0: none. A
    ``selfplay train --init-from`` of this run with the same ``league.db`` goes on in the same
    league, so cloning and training are rated on one scale. Needs a two-seat game and
    ``league.enabled``."""
    weight_average: float = 0.0
    """Decay of an exponential moving average of the weights over the gradient steps (Polyak
    averaging; 0: none, else e.g. 0.999, an average over about the last 1,000 steps). The
    average is the clone the run gives out: checkpoints' ``agent`` (so ``selfplay play``,
    ``train --init-from`` and evaluations read it), league snapshots and validation; the
    trained weights go on under it (checkpoints keep both, a resumed run goes on exactly)."""
    validate_every: int = 10
    """Validate every this many updates (0: never): held-out replays, or live games with
    another seed."""
    validation_steps: int = 64
    """Positions per env and seat of one validation (the same positions each time: a fixed
    seed)."""
    validation_stride: int = 1
    """Validation scores every this-many-th step of its games, over validation_steps x
    validation_stride steps from their start: 1 scores the first validation_steps steps; Lux
    games last 1,000 steps, so 16 spreads 64 positions over whole games. The positions are
    played and kept once (the imitated seats' observations, masks and labels, in memory), and
    every validation after the first costs the network's forward passes only."""
    validation_share: float = 0.05
    """Replays: the share of games held out for validation."""


def bc_checks(bc: BCConfig) -> list[tuple[bool, str]]:
    """``(ok, message)`` pairs that :func:`selfplay.config.validate` raises on."""
    rows = bc.num_steps * bc.num_envs
    return [
        (not (bc.teachers and bc.replays),
         "bc.teachers and bc.replays are exclusive: clone live teachers or replays, not both"),
        (not (bc.imitate and bc.winners_only),
         "bc.imitate and bc.winners_only are exclusive: imitate named players or the winners"),
        (bc.total_steps >= 1, "bc.total_steps must be >= 1"),
        (bc.num_envs >= 1, "bc.num_envs must be >= 1"),
        (bc.num_steps >= 1, "bc.num_steps must be >= 1"),
        (bc.validation_stride >= 1, "bc.validation_stride must be >= 1"),
        (bc.epochs >= 1, "bc.epochs must be >= 1"),
        (bc.minibatches >= 1, "bc.minibatches must be >= 1"),
        (0.0 <= bc.balance <= 1.0, f"bc.balance must be between 0 and 1, got {bc.balance}"),
        (all(w >= 0 for w in bc.phase_weights) and (not bc.phase_weights
                                                    or max(bc.phase_weights) > 0),
         f"bc.phase_weights must be >= 0 with one > 0, got {bc.phase_weights}"),
        (bc.num_steps < 1 or bc.num_envs < 1 or bc.minibatches <= rows,
         f"bc.minibatches ({bc.minibatches}) exceeds the rows of one update, bc.num_steps * "
         f"bc.num_envs ({rows}); set bc.minibatches <= {rows}"),
        (bc.learning_rate > 0, "bc.learning_rate must be > 0"),
        (0.0 <= bc.student_share <= 1.0,
         f"bc.student_share must be between 0 and 1, got {bc.student_share}"),
        (0.0 <= bc.student_ramp <= 1.0,
         f"bc.student_ramp must be between 0 and 1, got {bc.student_ramp}"),
        (bc.student_share == 0 or bc.replays is None,
         "bc.student_share needs live teachers (bc.teachers): replayed games follow their "
         "record, so the learner cannot play their seats"),
        (bc.value_coef >= 0, "bc.value_coef must be >= 0"),
        (bc.value_target in get_args(ValueTarget),
         f"bc.value_target: {bc.value_target!r} is not one of "
         f"{', '.join(map(repr, get_args(ValueTarget)))}"),
        (bc.gamma is None or 0 < bc.gamma <= 1,
         f"bc.gamma must be in (0, 1] (or null: ppo.gamma), got {bc.gamma}"),
        (0 <= bc.gae_lambda <= 1, "bc.gae_lambda must be in [0, 1]"),
        (bc.max_grad_norm > 0, "bc.max_grad_norm must be > 0"),
        (0.0 <= bc.weight_average < 1.0,
         f"bc.weight_average must be in [0, 1) (0: none), got {bc.weight_average}"),
        (bc.validate_every >= 0, "bc.validate_every must be >= 0 (0: never)"),
        (bc.snapshot_every >= 0, "bc.snapshot_every must be >= 0 (0: no snapshots)"),
        (bc.validation_steps >= 1, "bc.validation_steps must be >= 1"),
        (0 < bc.validation_share < 1, "bc.validation_share must be in (0, 1)"),
    ]
