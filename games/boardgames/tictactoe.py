"""Vectorized tic-tac-toe: the project's small, fast, two-seat zero-sum test game.

``E`` boards are stepped together with numpy bitboards (no Python loop over environments).
Seat 0 plays X, seat 1 plays O; which seat *moves first* is decided per episode by the
``first_player`` option (by default it alternates per environment, starting from a seeded
random draw).

Conventions (see :mod:`games.core` for the common ones):

* Turn-based: only the seat to move is ``alive``; the other seat's action is ignored (any value,
  it is not even range-checked).
* ``action_mask`` is the legal-cells mask (empty cells) for *both* seats, so a non-moving seat
  never has an all-False mask; use ``alive`` to know who acts.
* Observation per seat, from that seat's perspective: float32 ``[3, 3, 3]`` planes
  (own marks, opponent marks, ones when it is this seat's turn), ``obs_kind="grid"``.
* Global state per seat: float32 ``[28]`` = own marks (9), opponent marks (9), empty cells (9),
  "my turn" flag (1).
* Rewards: +1 to the winner and -1 to the loser on the final step, 0 for a draw. Both seats
  receive their reward on that step, including the seat that did not act: trainers must credit
  it to that seat's last action.
* An illegal move (an occupied cell) by the seat to move loses at once (-1 / +1), so the game is
  robust to policies that ignore the mask. Cell indices outside ``0..8`` raise :class:`GameError`.
* Environments reset automatically; ``final_obs`` / ``final_state`` hold the last position
  (with the turn passed to the other seat). Episodes never truncate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from games.batches import EpisodeTracker, outcome_from_rewards
from games.core import Batch, Discrete, EpisodeStats, GameError, GameSpec
from games.options import from_mapping
from games.rng_state import decode_rng, encode_rng

NUM_CELLS = 9
FULL = (1 << NUM_CELLS) - 1  # all nine cells occupied
LINES = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8],
                  [0, 4, 8], [2, 4, 6]], np.int64)  # [8, 3] cell indices of each line
WIN_MASKS = (1 << LINES).sum(axis=1).astype(np.int32)  # [8] bitmask of each line
_SHIFTS = np.arange(NUM_CELLS, dtype=np.int32)  # [9]
_SEATS = np.arange(2, dtype=np.int8)  # [2]
STATE_DIM = 3 * NUM_CELLS + 1


@dataclass(frozen=True)
class TicTacToeOptions:
    """Options of ``tictactoe`` (``game.options`` in a config)."""

    first_player: Literal["alternate", "random", "seat0", "seat1"] = "alternate"
    """Who moves first: ``alternate`` (env ``e``'s first episode opened by seat ``(e // 2) % 2``,
    then alternating per env: whichever seats two players take by env, each opens half the
    games, as ``selfplay play`` and evaluation alternate them), ``random`` (a fresh draw every
    episode), ``seat0`` or ``seat1`` (always that seat)."""
    render: bool = False
    """Accepted for uniformity with other games: render() always works here."""


def cells_of(marks: np.ndarray) -> np.ndarray:
    """Bitboards ``int [...]`` -> 0/1 cells ``int32 [..., 9]`` (row-major, cell = 3*row + col)."""
    return (marks[..., None] >> _SHIFTS) & 1


class TicTacToe:
    """``E`` tic-tac-toe boards, two seats each, as a :class:`games.core.VecGame`."""

    def __init__(self, num_envs: int = 1, seed: int | None = None,
                 options: TicTacToeOptions | None = None, name: str = "tictactoe") -> None:
        if num_envs < 1:
            raise GameError(f"num_envs must be >= 1, got {num_envs}")
        self.options = options or TicTacToeOptions()
        self.spec = GameSpec(name=name, num_envs=num_envs, num_seats=2,
                             obs_shape=(3, 3, 3), obs_dtype=np.dtype(np.float32),
                             action_space=Discrete(NUM_CELLS), state_shape=(STATE_DIM,),
                             obs_kind="grid", zero_sum=True, turn_based=True, render_fps=2)
        self._rng = np.random.default_rng(seed)
        self._env = np.arange(num_envs)  # [E]
        self.marks = np.zeros((num_envs, 2), np.int32)  # [E, A] bitboard of each seat's marks
        self.to_move = np.zeros(num_envs, np.int8)  # [E] seat to move
        self.starter = np.zeros(num_envs, np.int8)  # [E] seat that moved first this episode
        self.final_marks = np.zeros((num_envs, 2), np.int32)  # [E, A] last finished position
        self._tracker = EpisodeTracker(num_envs, 2)
        self._ready = False

    # ----------------------------------------------------------------------- VecGame

    def reset(self, seed: int | None = None) -> Batch:
        """Start a fresh episode in every env (re-seeding first when ``seed`` is given)."""
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        num_envs = self.spec.num_envs
        self.marks[:] = 0
        self.final_marks[:] = 0
        self.starter[:] = self._first_starters(num_envs)
        self.to_move[:] = self.starter
        self._tracker = EpisodeTracker(num_envs, 2)
        self._ready = True
        obs, state = self._observe(self.marks, self.to_move)
        zeros = np.zeros(num_envs, bool)
        return Batch(obs, self._mask(), state, np.zeros((num_envs, 2), np.float32), zeros,
                     zeros.copy(), self._alive(), EpisodeStats.empty())

    def step(self, actions: np.ndarray) -> Batch:
        """Play the mover's cell in every env; ``actions`` is int ``[E, 2]``."""
        if not self._ready:
            raise GameError("call reset() before step()")
        env, to_move = self._env, self.to_move
        cell = self._mover_actions(actions)  # [E]
        bit = np.int32(1) << cell.astype(np.int32)  # [E]
        occupied = self.marks[:, 0] | self.marks[:, 1]  # [E]
        illegal = (occupied & bit) != 0  # [E]
        mover_marks = self.marks[env, to_move] | np.where(illegal, 0, bit)  # [E]
        self.marks[env, to_move] = mover_marks
        win = ((mover_marks[:, None] & WIN_MASKS) == WIN_MASKS).any(axis=1)  # [E]
        full = (occupied | bit) == FULL
        done = win | illegal | full  # [E]

        mover_reward = win.astype(np.float32) - illegal.astype(np.float32)  # [E]
        reward = np.empty((len(env), 2), np.float32)  # [E, A]
        reward[env, to_move] = mover_reward
        reward[env, 1 - to_move] = 0.0 - mover_reward  # not -x: no -0.0 on draws
        episodes = self._tracker.update(reward, done, outcome_from_rewards(reward))

        self.to_move[:] = 1 - to_move
        final_obs, final_state = self._observe(self.marks, self.to_move)
        obs, state = final_obs.copy(), final_state.copy()
        if done.any():
            self.final_marks[done] = self.marks[done]
            self.marks[done] = 0
            self.starter[done] = self._next_starters(self.starter[done])
            self.to_move[done] = self.starter[done]
            obs[done], state[done] = self._observe(self.marks[done], self.to_move[done])
        return Batch(obs, self._mask(), state, reward, done, np.zeros_like(done), self._alive(),
                     episodes, final_obs, final_state)

    def close(self) -> None:
        """Nothing to release."""

    # ----------------------------------------------------------------------- extras

    def render(self, env_index: int = 0) -> np.ndarray:
        """The current board of one env as ``uint8 [128, 128, 3]`` (X = seat 0, O = seat 1)."""
        return draw_board(self.marks[self._check_index(env_index)])

    def render_final(self, env_index: int = 0) -> np.ndarray:
        """The last finished position of one env (blank before its first episode ends)."""
        return draw_board(self.final_marks[self._check_index(env_index)])

    def get_state(self) -> dict[str, object]:
        """The full simulator state as plain numpy arrays."""
        tracker = self._tracker.state_dict()
        return {"marks": self.marks.copy(), "to_move": self.to_move.copy(),
                "starter": self.starter.copy(), "final_marks": self.final_marks.copy(),
                "rng": encode_rng(self._rng), "returns": tracker["returns"],
                "lengths": tracker["lengths"], "ready": np.array(self._ready)}

    def set_state(self, state: dict[str, object]) -> None:
        """Restore a state from :meth:`get_state` (same ``num_envs``)."""
        num_envs = self.spec.num_envs
        shapes = {"marks": (num_envs, 2), "to_move": (num_envs,), "starter": (num_envs,),
                  "final_marks": (num_envs, 2), "rng": (6,), "returns": (num_envs, 2),
                  "lengths": (num_envs,), "ready": ()}
        missing = sorted(set(shapes) - set(state))
        if missing:
            raise GameError(f"tictactoe state is missing {', '.join(missing)}")
        arrays = {k: np.asarray(state[k]) for k in shapes}
        for key, shape in shapes.items():
            if arrays[key].shape != shape:
                raise GameError(f"tictactoe state {key!r} has shape {arrays[key].shape}, "
                                f"expected {shape} (was it saved with another num_envs?)")
        self.marks[:] = arrays["marks"]
        self.to_move[:] = arrays["to_move"]
        self.starter[:] = arrays["starter"]
        self.final_marks[:] = arrays["final_marks"]
        self._rng = decode_rng(arrays["rng"])
        self._tracker.load_state_dict({"returns": arrays["returns"],
                                       "lengths": arrays["lengths"]})
        self._ready = bool(arrays["ready"])

    # ----------------------------------------------------------------------- internals

    def _mover_actions(self, actions: np.ndarray) -> np.ndarray:
        """The mover's cell per env ``int64 [E]``, checked against the action space."""
        acts = np.asarray(actions)
        num_envs = self.spec.num_envs
        if acts.shape != (num_envs, 2):
            raise GameError(f"tictactoe actions must have shape ({num_envs}, 2), "
                            f"got {acts.shape}")
        if acts.dtype.kind not in "iu":
            raise GameError(f"tictactoe actions must be integers, got dtype {acts.dtype}")
        cell = acts[self._env, self.to_move].astype(np.int64)
        bad = (cell < 0) | (cell >= NUM_CELLS)
        if bad.any():
            env = int(np.flatnonzero(bad)[0])
            raise GameError(f"tictactoe action {int(cell[env])} (env {env}, seat "
                            f"{int(self.to_move[env])}) is not a cell index in 0..8")
        return cell

    def _observe(self, marks: np.ndarray, to_move: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per-seat observation ``[N, 2, 3, 3, 3]`` and state ``[N, 2, 28]`` of N boards."""
        n = len(marks)
        cells = cells_of(marks).astype(np.float32)  # [N, A, 9] by absolute seat
        turn = (to_move[:, None] == _SEATS).astype(np.float32)  # [N, A]
        obs = np.empty((n, 2, 3, NUM_CELLS), np.float32)
        obs[:, :, 0] = cells  # own marks
        obs[:, :, 1] = cells[:, ::-1]  # opponent marks
        obs[:, :, 2] = turn[:, :, None]
        state = np.empty((n, 2, STATE_DIM), np.float32)
        state[:, :, : 2 * NUM_CELLS] = obs[:, :, :2].reshape(n, 2, 2 * NUM_CELLS)
        state[:, :, 2 * NUM_CELLS: 3 * NUM_CELLS] = 1.0 - cells.sum(axis=1)[:, None]
        state[:, :, -1] = turn
        return obs.reshape(n, 2, 3, 3, 3), state

    def _mask(self) -> np.ndarray:
        """Legal cells ``bool [E, 2, 9]``, the same for both seats."""
        empty = cells_of(self.marks[:, 0] | self.marks[:, 1]) == 0  # [E, 9]
        return np.repeat(empty[:, None], 2, axis=1)

    def _alive(self) -> np.ndarray:
        """``bool [E, 2]``: only the seat to move acts."""
        return self.to_move[:, None] == _SEATS

    def _first_starters(self, n: int) -> np.ndarray:
        mode = self.options.first_player
        if mode == "alternate":  # a seeded draw before: a checkpoint opened 11 of 16 games
            return ((np.arange(n) // 2) % 2).astype(np.int8)
        if mode == "random":
            return self._rng.integers(0, 2, n, dtype=np.int8)
        return np.full(n, 0 if mode == "seat0" else 1, np.int8)

    def _next_starters(self, previous: np.ndarray) -> np.ndarray:
        mode = self.options.first_player
        if mode == "alternate":
            return (1 - previous).astype(np.int8)
        return self._first_starters(len(previous))

    def _check_index(self, env_index: int) -> int:
        if not 0 <= env_index < self.spec.num_envs:
            raise GameError(f"env_index {env_index} out of range 0..{self.spec.num_envs - 1}")
        return env_index


# --------------------------------------------------------------------------- rendering

_CELL = 40
_LINE = 4
SIZE = 3 * _CELL + 2 * _LINE  # 128 pixels
_BACKGROUND = np.array([245, 245, 240], np.uint8)
_GRID = np.array([40, 40, 40], np.uint8)
_COLORS = (np.array([200, 40, 40], np.uint8), np.array([40, 70, 200], np.uint8))  # X, O


def _sprites() -> tuple[np.ndarray, np.ndarray]:
    """Boolean ``[_CELL, _CELL]`` pixel masks of an X and an O."""
    yy, xx = np.mgrid[0:_CELL, 0:_CELL].astype(np.float32)
    c = (_CELL - 1) / 2
    margin = 8
    inside = (np.abs(yy - c) <= c - margin) & (np.abs(xx - c) <= c - margin)
    cross = inside & ((np.abs(yy - xx) <= 2.2) | (np.abs(yy + xx - (_CELL - 1)) <= 2.2))
    radius = np.hypot(yy - c, xx - c)
    ring = (radius <= c - margin + 1) & (radius >= c - margin - 3)
    return cross, ring


_SPRITES = _sprites()


def draw_board(marks: np.ndarray) -> np.ndarray:
    """RGB ``uint8 [128, 128, 3]`` picture of one board given its bitboards ``[2]``."""
    image = np.empty((SIZE, SIZE, 3), np.uint8)
    image[:] = _BACKGROUND
    for k in (1, 2):
        start = k * _CELL + (k - 1) * _LINE
        image[start: start + _LINE, :] = _GRID
        image[:, start: start + _LINE] = _GRID
    cells = cells_of(np.asarray(marks, np.int32))  # [2, 9]
    for seat in (0, 1):
        for cell in np.flatnonzero(cells[seat]):
            row, col = divmod(int(cell), 3)
            y, x = row * (_CELL + _LINE), col * (_CELL + _LINE)
            image[y: y + _CELL, x: x + _CELL][_SPRITES[seat]] = _COLORS[seat]
    return image


def make(name: str = "tictactoe", num_envs: int = 1, seed: int | None = None,
         **options: Any) -> TicTacToe:
    """Registry factory: ``make("tictactoe", num_envs=8, seed=0, first_player="random")``."""
    opts = from_mapping(TicTacToeOptions, options, where="game.options.")
    return TicTacToe(num_envs=num_envs, seed=seed, options=opts, name=name)
