"""Tic-tac-toe played by its bots (live behaviour cloning): labels, imitated seats, state."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from board_helpers import completing

from games.core import GameError, SupportsState, SupportsStudents, SupportsTeachers
from games.family import Teachers
from games.registry import family_of
from games.seat_teachers import SeatTeacherGame


def teacher_game(num_envs: int = 8, seed: int = 0, **teachers: Any) -> SeatTeacherGame:
    game = family_of("tictactoe").teacher_game("tictactoe", Teachers(**teachers), num_envs,
                                               seed, {})
    assert isinstance(game, SeatTeacherGame)
    return game


def test_teachers_label_the_mover_and_play_their_own_moves() -> None:
    game = teacher_game(bots=("win_or_block", "random"), imitate=("win_or_block",))
    assert isinstance(game, SupportsTeachers) and isinstance(game, SupportsState)
    batch = game.reset(seed=3)
    # every ordered pair of bots with win_or_block in it, spread over the envs (env 1 is
    # win_or_block vs random); random vs random, which teaches nothing, is never played
    wob_seats = np.array([[True, True], [True, False], [False, True]] * 3)[:8]
    assert (game.seat_players == "win_or_block").any(1).all()
    for _ in range(30):
        labels, imitate = game.teacher_actions.copy(), game.imitate.copy()
        mask = batch.action_mask
        assert mask is not None
        mover = batch.alive
        legal = np.take_along_axis(mask, labels[..., None], -1)[..., 0]
        assert legal[mover].all()  # the mover's label is a legal move
        assert np.array_equal(imitate, mover & wob_seats)
        batch = game.step(np.zeros_like(labels))  # what it is given does not matter
        # the move played is the label: it is now an own mark of the mover (or the game ended)
        env, seat = np.nonzero(mover)
        cells = labels[env, seat]
        ended = batch.terminated[env]
        marked = batch.obs[env, seat, 0].reshape(len(env), 9)[np.arange(len(env)), cells] == 1
        assert (marked | ended).all()


def test_win_or_block_labels_win_else_block() -> None:
    """One bot on both seats: a label wins where it can, else blocks where it must."""
    game = teacher_game(num_envs=16, bots=("win_or_block",))
    batch = game.reset(seed=1)
    checked = 0
    for _ in range(60):
        mover = batch.alive
        own = batch.obs[mover][:, 0].reshape(-1, 9) == 1
        opp = batch.obs[mover][:, 1].reshape(-1, 9) == 1
        label = game.teacher_actions[mover]
        wins, blocks = completing(own, ~own & ~opp), completing(opp, ~own & ~opp)
        rows = np.arange(len(label))
        can_win, must_block = wins.any(1), ~wins.any(1) & blocks.any(1)
        assert wins[rows, label][can_win].all()
        assert blocks[rows, label][must_block].all()
        checked += int(can_win.sum() + must_block.sum())
        batch = game.step(game.teacher_actions)
    assert checked > 20


def test_students_play_their_moves_and_the_bots_go_on_labelling() -> None:
    """DAgger: the learner plays win_or_block's seats (always the lowest free cell, which
    win_or_block rarely picks), random still plays its own; win_or_block still labels every
    position the learner's moves reach, winning where it can, else blocking."""
    game = teacher_game(num_envs=16, bots=("win_or_block", "random"),
                        imitate=("win_or_block",))
    assert isinstance(game, SupportsStudents)
    batch = game.reset(seed=4)
    game.let_students_play(np.ones((16, 2), bool))
    students = differ = checked = 0
    for _ in range(60):
        mover, labels, imitate = batch.alive, game.teacher_actions.copy(), game.imitate.copy()
        assert batch.action_mask is not None
        lowest = batch.action_mask.argmax(-1)  # the learner's move: the lowest free cell
        own = batch.obs[imitate][:, 0].reshape(-1, 9) == 1
        opp = batch.obs[imitate][:, 1].reshape(-1, 9) == 1
        wins = completing(own, ~own & ~opp)
        rows = np.arange(len(own))
        can_win = wins.any(1)
        assert wins[rows, labels[imitate]][can_win].all()
        checked += int(can_win.sum())
        batch = game.step(lowest)
        env, seat = np.nonzero(mover)
        played = np.where(imitate[env, seat], lowest[env, seat], labels[env, seat])
        marked = batch.obs[env, seat, 0].reshape(len(env), 9)[np.arange(len(env)), played] == 1
        assert (marked | batch.terminated[env]).all()  # the learner's move on its seats
        students += int(imitate.sum())
        differ += int((lowest != labels)[imitate].sum())
    assert students > 100 and differ > 50 and checked > 5


def test_state_round_trip_continues_identically() -> None:
    game = teacher_game(bots=("random",))
    game.reset(seed=5)
    for _ in range(3):
        game.step(game.teacher_actions)
    saved = game.get_state()
    other = teacher_game(bots=("random",), seed=99)
    other.reset()
    other.set_state(saved)
    assert np.array_equal(other.teacher_actions, game.teacher_actions)
    for _ in range(10):
        a, b = game.step(game.teacher_actions), other.step(other.teacher_actions)
        assert np.array_equal(a.obs, b.obs)
        assert np.array_equal(game.teacher_actions, other.teacher_actions)


@pytest.mark.parametrize(("teachers", "message"), [
    ({"bots": ("random",), "winners_only": True}, "winners_only needs replays"),
    ({"replays": "runs/x"}, "tictactoe has no replays"),
    ({}, "name the teachers of tictactoe"),
    ({"bots": ("alphazero",)}, "unknown tictactoe bot 'alphazero'; known: random, win_or_block"),
    ({"bots": ("random",), "imitate": ("win_or_block",)}, "imitate names 'win_or_block'"),
])
def test_bad_teachers(teachers: dict[str, Any], message: str) -> None:
    with pytest.raises(GameError, match=message):
        teacher_game(**teachers)
