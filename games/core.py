"""The common batched, per-seat, action-masked game interface.

Every adapter in :mod:`games` turns its engine into a :class:`VecGame`: ``E`` environments with
``A`` agent seats each, stepped together. All arrays lead with ``[E, A]`` (or ``[E]`` for
per-environment flags). Environments reset automatically: the observation returned with a
``terminated``/``truncated`` flag is already the first observation of the next episode, and the
last observation of the finished episode is in ``final_obs`` / ``final_state`` (needed to
bootstrap the value of truncated episodes).

Every adapter's options accept ``render: bool`` (enable :meth:`SupportsRender.render` where
rendering costs set-up), so tools such as ``selfplay eval --video`` can ask for frames.

Seats whose actions come from outside the engine are the game's seats; opponents scripted
inside an engine (a microRTS bot, an Atari built-in player) are not seats. Which *policy*
controls which seat is decided by the caller (an ``owner[E, A]`` array), never by the game.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import numpy as np


class Outcome(IntEnum):
    """Result of a finished episode for one seat."""

    LOSS = -1
    DRAW = 0
    WIN = 1
    NONE = 2  # single-agent games and episodes without a winner (e.g. truncated)


# --------------------------------------------------------------------------- spaces


@dataclass(frozen=True)
class Discrete:
    """One choice among ``n``. Action shape ``()``, mask shape ``(n,)``."""

    n: int

    @property
    def action_shape(self) -> tuple[int, ...]:
        return ()

    @property
    def mask_shape(self) -> tuple[int, ...]:
        return (self.n,)


@dataclass(frozen=True)
class MultiDiscrete:
    """Several categorical components chosen together, optionally once per grid cell.

    Action shape ``(k,)`` or, with ``cells``, ``(cells, k)``; mask shape ``(sum(nvec),)`` or
    ``(cells, sum(nvec))`` with the components' legal-value masks concatenated.

    ``gates[i]`` (for ``i >= 1``) lists the values of component 0 (the action *type*) that use
    component ``i``; ``None`` means component ``i`` is always used. A component that the chosen
    type does not use contributes neither log-probability nor entropy, and neither does a
    component (or cell) whose mask has no legal value.
    """

    nvec: tuple[int, ...]
    cells: int | None = None
    grid: tuple[int, int] | None = None  # (height, width) when cells == height * width
    gates: tuple[tuple[int, ...] | None, ...] | None = None
    names: tuple[str, ...] | None = None
    """the components' names (metrics say ``type``, ``attack``...; default ``c0``, ``c1``...)"""

    def __post_init__(self) -> None:
        if not self.nvec or min(self.nvec) < 1:
            raise ValueError(f"nvec must be non-empty positive integers, got {self.nvec}")
        if self.names is not None and len(self.names) != len(self.nvec):
            raise ValueError("names must have one entry per component")
        if self.grid is not None:
            height, width = self.grid
            if self.cells not in (None, height * width):
                raise ValueError(f"cells={self.cells} does not match grid {self.grid}")
            object.__setattr__(self, "cells", height * width)
        if self.gates is not None:
            if len(self.gates) != len(self.nvec):
                raise ValueError("gates must have one entry per component")
            if self.gates[0] is not None:
                raise ValueError("component 0 (the action type) cannot be gated")

    @property
    def component_names(self) -> tuple[str, ...]:
        return self.names or tuple(f"c{i}" for i in range(len(self.nvec)))

    @property
    def action_shape(self) -> tuple[int, ...]:
        k = len(self.nvec)
        return (k,) if self.cells is None else (self.cells, k)

    @property
    def mask_shape(self) -> tuple[int, ...]:
        total = int(sum(self.nvec))
        return (total,) if self.cells is None else (self.cells, total)


@dataclass(frozen=True)
class Box:
    """Continuous actions in ``[low, high]`` (per dimension). No mask."""

    low: tuple[float, ...]
    high: tuple[float, ...]

    @property
    def action_shape(self) -> tuple[int, ...]:
        return (len(self.low),)

    @property
    def mask_shape(self) -> tuple[int, ...]:
        return (0,)


ActionSpace = Discrete | MultiDiscrete | Box


OBS_KINDS = ("vector", "image", "grid")
"""what an observation is: features, an image ``(C, H, W)``, or a grid of cells ``(C, H, W)``"""


@dataclass(frozen=True)
class GameSpec:
    """Static description of a :class:`VecGame`'s arrays."""

    name: str
    num_envs: int
    num_seats: int
    obs_shape: tuple[int, ...]
    obs_dtype: np.dtype
    action_space: ActionSpace
    state_shape: tuple[int, ...] | None = None  # global state for a centralized critic
    state_dtype: np.dtype = field(default_factory=lambda: np.dtype(np.float32))
    state_is_obs: bool = False
    """the global state equals each seat's observation (a fully observed game): a critic in
    ``critic_input: auto`` mode then reads the observation and may share the actor's torso"""
    obs_kind: str = "vector"  # "vector" (features), "image" (C, H, W) or "grid" (C, H, W cells)
    pad_plane: int | None = None
    """grid games whose boards differ in size: the observation (and state) plane that is 1 on
    padding cells, outside an env's board in the batch's grid. Padding cells have all-False
    masks; size-agnostic networks pool only over the cells where this plane is 0"""
    zero_sum: bool = False
    turn_based: bool = False
    """the seats take turns: a seat that does not act waits for its turn, and acts again in
    its episode (otherwise a seat that does not act is out of its episode until it ends)"""
    decided: bool = True
    """the games end with a winner (win / draw / loss outcomes); False for cooperative and
    mixed games, whose episodes have returns but no winner: results, ratings and a league
    need one"""
    render_fps: int = 30
    obs_scale: float = 1.0
    """the features are ``obs * obs_scale`` (and ``state * obs_scale``): games that quantize
    their planes to ``uint8`` levels set ``1 / 255``; image games keep 1 (their networks scale
    pixels themselves)"""
    plane_names: tuple[str, ...] | None = None
    """grid games: the name of each observation plane, in order (what ``network.ignore_planes``
    names); None where the planes are not named"""

    def __post_init__(self) -> None:
        """Normalize what a game declares (a shape as a tuple, dtypes as ``np.dtype``) and
        refuse what no network reads: one line naming the field."""
        object.__setattr__(self, "obs_shape", tuple(int(n) for n in self.obs_shape))
        object.__setattr__(self, "obs_dtype", np.dtype(self.obs_dtype))
        object.__setattr__(self, "state_dtype", np.dtype(self.state_dtype))
        if self.state_shape is not None:
            object.__setattr__(self, "state_shape", tuple(int(n) for n in self.state_shape))
        if self.obs_kind not in OBS_KINDS:
            raise GameError(f"{self.name}: GameSpec.obs_kind {self.obs_kind!r} is not one of "
                            f"{', '.join(OBS_KINDS)}")
        if self.num_envs < 1 or self.num_seats < 1:
            raise GameError(f"{self.name}: GameSpec needs num_envs and num_seats >= 1, got "
                            f"{self.num_envs} and {self.num_seats}")
        if not isinstance(self.action_space, (Discrete, MultiDiscrete, Box)):
            raise GameError(f"{self.name}: GameSpec.action_space is "
                            f"{type(self.action_space).__name__}, not a games.core Discrete, "
                            "MultiDiscrete or Box")

    @property
    def has_mask(self) -> bool:
        return not isinstance(self.action_space, Box)


# --------------------------------------------------------------------------- arrays


class EpisodeStats(NamedTuple):
    """Seat-episodes that finished on one step, ``K`` of them (struct of arrays)."""

    env: np.ndarray  # int64 [K]
    seat: np.ndarray  # int64 [K]
    ret: np.ndarray  # float64 [K] undiscounted, unnormalized return
    length: np.ndarray  # int64 [K] steps
    outcome: np.ndarray  # int8 [K] Outcome values

    @staticmethod
    def empty() -> EpisodeStats:
        return EpisodeStats(
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            np.zeros(0, np.float64),
            np.zeros(0, np.int64),
            np.zeros(0, np.int8),
        )


class Batch(NamedTuple):
    """What a :class:`VecGame` returns from ``reset`` and ``step``."""

    obs: np.ndarray  # [E, A, *obs_shape]
    action_mask: np.ndarray | None  # bool [E, A, *mask_shape]; None for Box actions
    state: np.ndarray | None  # [E, A, *state_shape] global state as seen from each seat
    reward: np.ndarray  # float32 [E, A]
    terminated: np.ndarray  # bool [E]
    truncated: np.ndarray  # bool [E]
    alive: np.ndarray  # bool [E, A] seats that act this step
    episodes: EpisodeStats  # seat-episodes finished on this step
    final_obs: np.ndarray | None = None  # [E, A, *obs_shape], valid where terminated|truncated
    final_state: np.ndarray | None = None  # [E, A, *state_shape], likewise


@runtime_checkable
class VecGame(Protocol):
    """A batch of ``E`` environments with ``A`` seats each, stepped together."""

    spec: GameSpec

    def reset(self, seed: int | None = None) -> Batch: ...

    def step(self, actions: np.ndarray) -> Batch:
        """Advance every env; ``actions`` is ``[E, A, *action_shape]``."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class SupportsPartSteps(Protocol):
    """Games whose envs are stepped in separate parts (processes) that can run unattended.

    ``parts`` are contiguous ``(start, stop)`` env ranges covering every env. After
    ``step_part_async(p, actions[start:stop])`` part ``p`` steps in the background until
    ``step_part_wait(p)`` returns its :class:`Batch` (envs numbered from 0 within the part), so a
    trainer can compute one part's actions while the others step. Parts must be waited for
    before the next ``step``, ``reset`` or ``step_part_async`` of the same part.
    """

    parts: list[tuple[int, int]]

    def step_part_async(self, part: int, actions: np.ndarray) -> None: ...

    def step_part_wait(self, part: int) -> Batch: ...


# --------------------------------------------------------------------------- capabilities
# What only some games can do. Callers check with ``isinstance(game, Capability)`` and never
# test a game's name or reach for attributes with ``getattr``.


@runtime_checkable
class SupportsState(Protocol):
    """Games whose full simulator state can be captured, for exact resumption of training."""

    def get_state(self) -> dict[str, object]: ...

    def set_state(self, state: dict[str, object]) -> None: ...


@runtime_checkable
class SupportsRender(Protocol):
    """Games that draw their environments."""

    def render(self, env_index: int = 0) -> np.ndarray:
        """An RGB frame ``uint8 [H, W, 3]`` of one environment."""
        ...


@runtime_checkable
class RendersOnRequest(Protocol):
    """Games that draw frames only when made with the ``render`` option (set-up costs: a
    gymnasium env's renderer): :attr:`rendering` says whether this one was."""

    @property
    def rendering(self) -> bool: ...


def can_render(game: object) -> bool:
    """Whether ``game`` draws frames now (:class:`SupportsRender`, and rendering on where it
    is an option)."""
    return isinstance(game, SupportsRender) and (
        not isinstance(game, RendersOnRequest) or game.rendering)


@runtime_checkable
class SupportsFinalFrame(Protocol):
    """Games that can draw the last position of an env's finished episode (the frames taken
    before each step stop one move short of the end)."""

    def render_final(self, env_index: int = 0) -> np.ndarray: ...


@runtime_checkable
class HasSides(Protocol):
    """Games whose seats play named sides of the engine, which may differ between envs.

    ``players[e, s]`` is the side (engine player) seat ``s`` of env ``e`` plays; ``-1`` marks a
    seat that no policy plays, because an opponent inside the engine plays that side.
    """

    players: np.ndarray  # int [E, A]


@runtime_checkable
class HasOpponentNames(Protocol):
    """Games whose envs name the opponent of the learner's seat (an engine bot, ``selfplay``)."""

    opponent_names: list[str]
    """``[E]`` the opponent of each env's game in progress"""
    ended_opponent_names: list[str]
    """``[E]`` the opponent of each env's last finished game (read when it is reported)"""


@runtime_checkable
class SupportsBotSwap(Protocol):
    """Games with envs whose opponent is a bot inside the engine, swappable per game."""

    def bot_choices(self) -> list[str]:
        """The canonical names of the engine bots this game's bot envs were configured with
        (each once, in order)."""
        ...

    def set_bot(self, env: int, bot: str) -> str:
        """Make ``bot`` the opponent of env ``env``'s next game; returns its canonical name."""
        ...


@runtime_checkable
class SupportsDeviceArrays(Protocol):
    """Games whose arrays live on an accelerator's memory (JAX's device). With
    ``device_arrays`` on, ``reset`` and ``step`` leave the observations, legal-action masks,
    global states and final observations where they are, as device arrays that export
    DLPack (so a trainer on the same device takes them without a copy), and ``step`` also
    takes its actions as any array that exports DLPack (a torch tensor: no copy either). The
    small arrays (rewards, ends, alive seats, episodes) stay NumPy. Off (the default), every
    array is NumPy on the host, as in every game."""

    device_arrays: bool


@runtime_checkable
class HasLostWorkers(SupportsPartSteps, Protocol):
    """Games stepped by workers that may be lost and come back (Ray actors): the games a lost
    worker was playing end as truncated and new ones begin (:mod:`games.workers.vec`). A lost
    worker's envs are one of the ``parts``, so a trainer can step them alone to collect again
    what the loss cost."""

    revivals: int
    """workers lost and revived over the game's life"""

    def take_lost_envs(self) -> np.ndarray:
        """``int [K]``: the envs whose step was lost with their worker since the last call
        (the step had no effect: their game ended at the observations the step was given,
        and the batch the step returned begins new games), in the order lost; the record is
        cleared."""
        ...


@runtime_checkable
class HasRewardComponents(Protocol):
    """Games whose reward is a weighted sum of named components, logged one by one."""

    reward_component_names: tuple[str, ...]

    def episode_reward_components(self) -> np.ndarray:
        """``float [K, C]``: the summed components of the seat-episodes of the last
        ``Batch.episodes``, in its order."""
        ...


@runtime_checkable
class SupportsStaggering(Protocol):
    """Games whose envs run in step: every game lasts the same number of steps, so from a
    reset on all envs are at the same step of their games, and a trainer's batch of a few
    dozen steps holds one phase of a game alone (a network then learns, update after update,
    whatever that phase asks, and forgets the rest)."""

    def stagger(self) -> bool:
        """Spread the envs over a game's phases: each env's running game ends early,
        truncated (no outcome; trainers bootstrap its value), env ``e``'s after ``e / E`` of
        a game's length counted from its start, env 0's at its end; the games after run their
        full length. True where it did; False where the envs do not run in step (nothing
        changes)."""
        ...


@runtime_checkable
class SupportsGameProgress(Protocol):
    """Games that know how far each env's game has gone, so that a trainer can weigh
    positions by the part of a game they come from (``bc.phase_weights``)."""

    def game_progress(self) -> np.ndarray | None:
        """``float [E]``: where in its game each env's current observation lies, as a share
        of the game's length (0 at its first step, below 1 at its last); None where the game
        cannot tell (a wrapper over a game without it)."""
        ...


@runtime_checkable
class SupportsTeachers(Protocol):
    """Games whose seats are played by teachers: scripted players inside the game (live
    cloning) or recorded games replayed through the engine. Their choices are labels for
    behaviour cloning, next to the observations they were made at.

    After ``reset`` and after each ``step``, ``teacher_actions`` holds what the teachers play
    at the observations just returned, and ``imitate`` the seats whose actions are to be
    learned (a teacher chosen by the run: a named player, or a game's winner). ``step``
    plays the teachers' actions on every teacher seat, whatever it is given there, so
    ``game.step(game.teacher_actions)`` advances every game as its teachers play it.
    """

    teacher_actions: np.ndarray
    """``[E, A, *action_shape]`` the teachers' actions at the current observations (legal
    under the current masks; zeros on seats without a teacher)"""
    imitate: np.ndarray
    """``bool [E, A]`` seats whose current actions are labels to learn"""


@runtime_checkable
class HasSeatPlayers(Protocol):
    """Games whose seats named players hold for the whole run (live teacher games: each env
    pairs two of the teachers)."""

    seat_players: np.ndarray
    """``str [E, A]`` the name of the player on each seat"""


@runtime_checkable
class SupportsStudents(Protocol):
    """Live teacher games whose imitated seats the learner may play itself while the
    teachers go on labelling them (DAgger: labels at the states the learner's own play
    reaches, not only at its teachers'). Replays cannot: their games must follow the record.
    """

    def let_students_play(self, seats: np.ndarray) -> None:
        """From the next ``step`` on, play the caller's actions, not the teacher's, on the
        seats of ``seats`` (``bool [E, A]``) whose labels are imitated at that step; every
        other seat stays as :class:`SupportsTeachers` says. ``teacher_actions`` and
        ``imitate`` keep naming what the teachers would play."""
        ...


@runtime_checkable
class SupportsReplayPosition(Protocol):
    """Games that stream recorded games and continue from a saved place in the stream.

    Not an exact state: :meth:`resume_at` starts the games that were in progress again from
    their beginning, and their steps already played come back with ``imitate`` all False, so
    a resumed run learns from every recorded step once, and from no shard twice.
    """

    def replay_position(self) -> dict[str, object]:
        """Where the stream is (plain values, for a checkpoint)."""
        ...

    def resume_at(self, position: dict[str, object]) -> Batch:
        """Continue from ``position``; the first batch (as ``reset`` returns it)."""
        ...


@runtime_checkable
class SupportsRecording(Protocol):
    """Games that record their games as replays (:mod:`games.replays`), exactly enough to
    replay them; staged by :meth:`games.family.Family.recording_game`. Shards are appended
    after the folder's last, each written once it holds ``shard_games`` games: a killed
    process loses at most its unfinished shard, and a rerun adds to the folder."""

    def start_recording(self, folder: Path, names: Sequence[str] | None,
                        shard_games: int = 100) -> None:
        """Record the games that finish from now on; ``names[s]`` plays seat ``s`` in every
        env (``None``: no env is recorded until :meth:`name_seats` names it)."""
        ...

    def name_seats(self, env: int, names: Sequence[str] | None) -> None:
        """Who plays each seat of env ``env``'s game in progress and its next ones (``None``:
        they are not recorded)."""
        ...

    def finish_recording(self) -> Mapping[str, Any]:
        """Write the last, partial shard; what was written (``folder``, ``games``,
        ``shards``). Games in progress are dropped."""
        ...


class MapInfoLike(Protocol):
    name: str

    @property
    def shape(self) -> tuple[int, int]:
        """The board's ``(height, width)``."""
        ...


def trained_boards(game: object, spec: GameSpec) -> dict[str, list[int]]:
    """What a checkpoint records of the boards it learned on: ``{map name: [height, width]}``
    for games with maps, ``{"": [height, width]}`` for other grid games, else empty."""
    if isinstance(game, HasMaps):
        return {m.name: list(m.shape) for m in game.env_map}
    if spec.obs_kind == "grid" and len(spec.obs_shape) == 3:
        return {"": list(spec.obs_shape[1:])}
    return {}


@runtime_checkable
class HasMaps(Protocol):
    """Games whose envs play named maps."""

    env_map: list[MapInfoLike]  # [E]


# --------------------------------------------------------------------------- policies


class Policy(Protocol):
    """Anything that picks actions for a set of seats: a network, a scripted bot."""

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        """``obs [N, ...]`` (with ``mask [N, ...]``, ``state [N, ...]``) -> actions
        ``[N, *action_shape]``."""
        ...


class EngineBot:
    """A player that is a bot inside the engine: it never acts through seats, so only a
    family's own match runner (:meth:`games.family.Family.match_runner`) can play it."""

    def __init__(self, name: str) -> None:
        self.name = name

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        raise GameError(f"bot {self.name!r} plays inside the engine, not through seats")


class ScriptedPolicy:
    """A NumPy bot ``fn(obs, mask, rng) -> actions`` acting through seats, with its own
    seeded generator."""

    def __init__(self, name: str, fn: Callable[..., np.ndarray], seed: int) -> None:
        self.name = name
        self.fn = fn
        self.rng = np.random.default_rng(seed)

    def act(self, obs: np.ndarray, mask: np.ndarray | None,
            state: np.ndarray | None) -> np.ndarray:
        return self.fn(obs, mask, self.rng)


class GameError(Exception):
    """A user-facing problem with a game (bad name, missing files, engine failure)."""
