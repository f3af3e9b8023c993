"""Tic-tac-toe VecGame and its scripted bots."""

from __future__ import annotations

import time

import numpy as np
import pytest

from games.boardgames import make as make_boardgame
from games.boardgames.bots import random_legal, win_or_block
from games.boardgames.tictactoe import TicTacToe, make
from games.core import Batch, GameError, Outcome, VecGame
from games.options import OptionError
from games.registry import make_game, resolve


def legal(batch: Batch) -> np.ndarray:
    """The batch's action mask ``bool [E, 2, 9]`` (never None for tic-tac-toe)."""
    assert batch.action_mask is not None
    return batch.action_mask


def play(game: TicTacToe, batch: Batch, cells: list[int]) -> Batch:
    """Env 0 plays ``cells`` in turn; the idle seat sends an out-of-range value (ignored)."""
    for cell in cells:
        acts = np.full((game.spec.num_envs, 2), -7, np.int64)
        acts[np.arange(game.spec.num_envs), game.to_move] = cell
        batch = game.step(acts)
    return batch


def random_rollout(game: TicTacToe, steps: int, rng: np.random.Generator,
                   p_ignore_mask: float = 0.0) -> list[Batch]:
    batch = game.reset()
    out = [batch]
    num_envs = game.spec.num_envs
    for _ in range(steps):
        acts = random_legal(legal(batch).reshape(-1, 9), rng).reshape(num_envs, 2)
        blind = rng.random((num_envs, 2)) < p_ignore_mask
        acts[blind] = rng.integers(0, 9, int(blind.sum()))
        batch = game.step(acts)
        out.append(batch)
    return out


def test_spec_shapes_and_dtypes() -> None:
    game = make_boardgame("tictactoe", num_envs=5, seed=0)
    assert isinstance(game, VecGame)
    spec = game.spec
    assert (spec.num_envs, spec.num_seats, spec.obs_shape) == (5, 2, (3, 3, 3))
    assert spec.obs_kind == "grid" and spec.zero_sum and spec.has_mask
    b = game.reset()
    assert b.obs.shape == (5, 2, 3, 3, 3) and b.obs.dtype == np.float32
    assert b.action_mask is not None and b.action_mask.shape == (5, 2, 9)
    assert b.action_mask.dtype == bool and b.action_mask.all()
    assert b.state is not None and b.state.shape == (5, 2, 28) and b.state.dtype == np.float32
    assert b.reward.shape == (5, 2) and b.reward.dtype == np.float32
    assert b.terminated.shape == b.truncated.shape == (5,)
    assert b.alive.shape == (5, 2) and b.alive.dtype == bool
    b = game.step(np.zeros((5, 2), np.int64))
    assert b.final_obs is not None and b.final_obs.shape == b.obs.shape
    assert b.state is not None and b.final_state is not None
    assert b.final_state.shape == b.state.shape


def test_registry_entry() -> None:
    assert resolve("TicTacToe").family == "boardgames"
    game = make_game("tictactoe", num_envs=2, seed=1, options={"first_player": "seat1"})
    assert game.reset().alive[:, 1].all()
    with pytest.raises(OptionError, match="first_player"):
        make("tictactoe", first_player="x")
    with pytest.raises(OptionError, match="did you mean 'first_player'"):
        make("tictactoe", first_playr="seat0")
    with pytest.raises(GameError, match="known: tictactoe"):
        make_boardgame("chess")


def test_scripted_win_rewards_outcomes_and_autoreset() -> None:
    game = make("tictactoe", num_envs=1, seed=0, first_player="seat0")
    b = game.reset()
    b = play(game, b, [0, 3, 1, 4])  # X: 0 1, O: 3 4
    assert not b.terminated[0] and b.episodes.env.size == 0
    assert b.reward.tolist() == [[0.0, 0.0]]
    b = play(game, b, [2])  # X completes the top row
    assert b.terminated[0] and not b.truncated[0]
    assert b.reward.tolist() == [[1.0, -1.0]]
    ep = b.episodes
    assert ep.seat.tolist() == [0, 1] and ep.env.tolist() == [0, 0]
    assert ep.outcome.tolist() == [Outcome.WIN, Outcome.LOSS]
    assert ep.ret.tolist() == [1.0, -1.0] and ep.length.tolist() == [5, 5]
    # final_obs is the finished board from each seat's view; obs is the next episode's start
    assert b.final_obs is not None
    assert b.final_obs[0, 0, 0].reshape(9).nonzero()[0].tolist() == [0, 1, 2]
    assert b.final_obs[0, 0, 1].reshape(9).nonzero()[0].tolist() == [3, 4]
    assert b.obs[0, :, :2].sum() == 0 and b.action_mask is not None and b.action_mask.all()
    assert b.alive.tolist() == [[True, False]]  # seat0 always starts with this option
    assert b.obs[0, 0, 2].all() and not b.obs[0, 1, 2].any()


def test_draw_and_illegal_move() -> None:
    game = make("tictactoe", num_envs=1, seed=0, first_player="seat0")
    b = play(game, game.reset(), [0, 1, 2, 4, 3, 5, 7, 6, 8])
    assert b.terminated[0] and b.reward.tolist() == [[0.0, 0.0]]
    assert not np.signbit(b.reward).any()  # no -0.0
    assert b.episodes.outcome.tolist() == [Outcome.DRAW, Outcome.DRAW]
    assert b.episodes.length.tolist() == [9, 9]
    b = play(game, game.reset(), [4, 4])  # seat 1 plays on an occupied cell: it loses
    assert b.terminated[0] and b.reward.tolist() == [[1.0, -1.0]]
    assert b.episodes.outcome.tolist() == [Outcome.WIN, Outcome.LOSS]
    assert b.episodes.length.tolist() == [2, 2]


def test_bad_actions_raise() -> None:
    game = make("tictactoe", num_envs=2, seed=0)
    with pytest.raises(GameError, match="reset"):
        game.step(np.zeros((2, 2), np.int64))
    game.reset()
    with pytest.raises(GameError, match="shape"):
        game.step(np.zeros((2,), np.int64))
    with pytest.raises(GameError, match="not a cell index"):
        game.step(np.full((2, 2), 9, np.int64))
    with pytest.raises(GameError, match="integers"):
        game.step(np.zeros((2, 2), np.float32))


def test_invariants_under_random_play() -> None:
    """Zero-sum rewards, masks = empty cells, perspective swap, alternating alive flags."""
    rng = np.random.default_rng(0)
    game = make("tictactoe", num_envs=64, seed=3, first_player="random")
    batches = random_rollout(game, 60, rng, p_ignore_mask=0.1)
    finished = 0
    for prev, b in zip(batches[:-1], batches[1:], strict=True):
        assert b.action_mask is not None and b.state is not None
        np.testing.assert_array_equal(b.reward.sum(axis=1), 0.0)
        own, opp, turn = b.obs[:, :, 0], b.obs[:, :, 1], b.obs[:, :, 2]  # [E, A, 3, 3]
        np.testing.assert_array_equal(own[:, 1], opp[:, 0])
        np.testing.assert_array_equal(own[:, 0], opp[:, 1])
        empty = ((own == 0) & (opp == 0)).reshape(-1, 2, 9)
        np.testing.assert_array_equal(b.action_mask, empty)
        np.testing.assert_array_equal(b.state[:, :, 18:27], empty)
        np.testing.assert_array_equal(b.state[:, :, 27], b.alive)
        assert (b.alive.sum(axis=1) == 1).all()
        np.testing.assert_array_equal(turn.all(axis=(2, 3)), b.alive)
        going = ~b.terminated
        np.testing.assert_array_equal(b.alive[going], ~prev.alive[going])
        # nonzero rewards only on terminal steps; one +1 and one -1 at a decided end
        assert not b.reward[going].any()
        ep = b.episodes
        finished += len(ep.env)
        np.testing.assert_array_equal(np.sort(ep.env), np.repeat(np.flatnonzero(b.terminated), 2))
        np.testing.assert_array_equal(ep.outcome, np.sign(ep.ret))
    assert finished > 200


def test_first_player_alternates_per_env() -> None:
    game = make("tictactoe", num_envs=32, seed=11)
    first = game.reset().alive[:, 1].copy()
    assert 0 < first.sum() < 32  # seeded random draw for the first episode
    again = make("tictactoe", num_envs=32, seed=11).reset().alive[:, 1]
    np.testing.assert_array_equal(first, again)
    b = play(game, game.reset(seed=11), [4, 4])  # every env ends by an illegal move
    assert b.terminated.all()
    np.testing.assert_array_equal(b.alive[:, 1], ~first)
    b = play(game, b, [0, 0])
    np.testing.assert_array_equal(b.alive[:, 1], first)


def test_random_legal_never_illegal() -> None:
    rng = np.random.default_rng(1)
    mask = rng.random((500, 9)) < 0.4
    mask[0] = False
    acts = random_legal(mask, rng)
    assert acts.shape == (500,) and acts.dtype == np.int64
    some = mask.any(axis=1)
    assert mask[np.flatnonzero(some), acts[some]].all() and (acts[~some] == 0).all()
    game = make("tictactoe", num_envs=128, seed=0)
    for b in random_rollout(game, 40, rng)[1:]:
        assert b.episodes.length.min(initial=9) >= 5  # no game ended by an illegal move


def board_obs(own: list[int], opp: list[int]) -> tuple[np.ndarray, np.ndarray]:
    obs = np.zeros((1, 3, 9), np.float32)
    obs[0, 0, own] = 1.0
    obs[0, 1, opp] = 1.0
    obs[0, 2] = 1.0
    mask = (obs[:, 0] == 0) & (obs[:, 1] == 0)
    return obs.reshape(1, 3, 3, 3), mask


def test_win_or_block() -> None:
    rng = np.random.default_rng(0)
    obs, mask = board_obs(own=[0, 1], opp=[3, 4])
    assert win_or_block(obs, mask, rng).tolist() == [2]  # winning beats blocking
    obs, mask = board_obs(own=[0, 8], opp=[3, 4])
    assert win_or_block(obs, mask, rng).tolist() == [5]  # block
    obs, mask = board_obs(own=[6], opp=[2, 4, 8])  # two threats: blocks one of them
    assert win_or_block(obs, mask, rng).item() in (5, 0)
    # against random play it wins far more often than it loses (as seat 0, either order)
    game = make("tictactoe", num_envs=256, seed=0)
    b = game.reset()
    wins = losses = 0
    for _ in range(60):
        acts = random_legal(legal(b)[:, 1], rng)
        bot = win_or_block(b.obs[:, 0], legal(b)[:, 0], rng)
        b = game.step(np.stack([bot, acts], axis=1))
        seat0 = b.episodes.seat == 0
        wins += int((b.episodes.outcome[seat0] == Outcome.WIN).sum())
        losses += int((b.episodes.outcome[seat0] == Outcome.LOSS).sum())
    assert wins > 5 * losses


def test_state_round_trip() -> None:
    rng = np.random.default_rng(2)
    game = make("tictactoe", num_envs=16, seed=5, first_player="random")
    random_rollout(game, 13, rng)
    saved = game.get_state()
    assert all(isinstance(v, np.ndarray) for v in saved.values())
    actions = [rng.integers(0, 9, (16, 2)) for _ in range(20)]
    first = [game.step(a) for a in actions]
    other = make("tictactoe", num_envs=16, seed=99, first_player="random")
    other.set_state({k: np.array(v) for k, v in saved.items()})
    for a, b in zip(actions, first, strict=True):
        c = other.step(a)
        for x, y in zip(b, c, strict=True):
            if isinstance(x, tuple):  # EpisodeStats
                assert isinstance(y, tuple)
                for u, v in zip(x, y, strict=True):
                    np.testing.assert_array_equal(u, v)
            else:
                np.testing.assert_array_equal(x, y)
    with pytest.raises(GameError, match="num_envs"):
        make("tictactoe", num_envs=3).set_state(saved)


def test_render() -> None:
    game = make("tictactoe", num_envs=2, seed=0, first_player="seat0")
    b = game.reset()
    blank = game.render(1)
    assert blank.shape == (128, 128, 3) and blank.dtype == np.uint8
    b = play(game, b, [4])
    assert not np.array_equal(game.render(1), blank)
    play(game, b, [4])  # illegal: ends both games
    np.testing.assert_array_equal(game.render(1), blank)
    assert not np.array_equal(game.render_final(1), blank)
    with pytest.raises(GameError, match="env_index"):
        game.render(2)


@pytest.mark.slow  # a benchmark (`make bench`): a rate floor flakes on a loaded machine
def test_throughput_1024_envs() -> None:
    num_envs, steps = 1024, 200
    game = make("tictactoe", num_envs=num_envs, seed=0)
    b = game.reset()
    rng = np.random.default_rng(0)
    start = time.perf_counter()
    for _ in range(steps):
        b = game.step(legal(b).argmax(axis=-1))  # first legal cell, no policy cost
    game_rate = num_envs * steps / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(steps):
        acts = random_legal(legal(b).reshape(-1, 9), rng).reshape(num_envs, 2)
        b = game.step(acts)
    bot_rate = num_envs * steps / (time.perf_counter() - start)
    print(f"\ntictactoe 1024 envs: {game_rate:,.0f} env-steps/s (game only), "
          f"{bot_rate:,.0f} with random_legal")
    assert game_rate > 20_000
